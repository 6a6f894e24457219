package main

// brokerBoard is the per-broker drill-down: one broker's attempts, isolation and own figures.
func brokerBoard() board {
	sel := ns + `, broker=~"$broker"`
	return board{
		file: "detour-broker.json", uid: "detour-broker", title: "detour / Broker",
		description: "One broker as detour sees it: its send attempts, its isolation and the figures it reports.",
		variables: []variable{namespaceVariable,
			{"broker", "Broker", `label_values(detour_send_attempts_total{` + ns + `}, broker)`}},
		rows: []row{
			{title: "Sends", panels: []panel{
				{title: "Attempts by outcome", unit: "reqps",
					description: "The broker's send attempts by outcome.",
					queries:     []query{{`sum by (broker, outcome) (rate(detour_send_attempts_total{` + sel + `}` + rate + `))`, "{{broker}} {{outcome}}"}}},
				{title: "Attempt latency", unit: "s",
					description: "The 50th and 99th percentiles of the broker's send attempts: what isolation for slow sends compares with its policy's thresholds.",
					queries: []query{
						{`histogram_quantile(0.5, sum by (broker, le) (rate(detour_send_attempt_duration_seconds_bucket{` + sel + `}` + rate + `)))`, "p50 {{broker}}"},
						{`histogram_quantile(0.99, sum by (broker, le) (rate(detour_send_attempt_duration_seconds_bucket{` + sel + `}` + rate + `)))`, "p99 {{broker}}"},
					}},
			}},
			{title: "Isolation", panels: []panel{
				{title: "Isolated for", unit: "s",
					description: "How long the broker has been isolated, by the reason; empty while it is in use.",
					queries:     []query{{`max by (broker, reason) (detour_broker_isolated_seconds{` + sel + `})`, "{{broker}} {{reason}}"}}},
				{title: "Isolations by reason", unit: "short",
					description: "Times the broker entered isolation in each interval, by reason.",
					queries:     []query{{`sum by (broker, reason) (increase(detour_isolations_total{` + sel + `}` + rate + `))`, "{{broker}} {{reason}}"}}},
			}},
			{title: "The broker's own figures", panels: []panel{
				{title: "Send queue: oldest wait against the broker's limit", unit: "s",
					description: "How long the oldest send in the broker's send queue had waited, against its waitTimeMillsInSendQueue: at the limit the broker refuses sends.",
					queries: []query{
						{`max by (broker) (detour_broker_send_queue_head_wait_seconds{` + sel + `})`, "wait {{broker}}"},
						{`max by (broker) (detour_broker_send_queue_wait_limit_seconds{` + sel + `})`, "limit {{broker}}"},
					}},
				{title: "Page-cache lock against the broker's limit", unit: "s",
					description: "How long the broker's put in progress had held the commit log's lock, against its osPageCacheBusyTimeOutMills: past it the broker refuses sends.",
					queries: []query{
						{`max by (broker) (detour_broker_page_cache_lock_seconds{` + sel + `})`, "lock {{broker}}"},
						{`max by (broker) (detour_broker_page_cache_busy_limit_seconds{` + sel + `})`, "limit {{broker}}"},
					}},
				{title: "Put latency p99", unit: "s",
					description: "The 99th percentile of the broker's own recent put times, as it last said.",
					queries:     []query{{`max by (broker) (detour_broker_put_latency_p99_seconds{` + sel + `})`, "{{broker}}"}}},
				{title: "Send-queue fill and pressure", unit: "percent",
					description: "The broker's send queue as a share of its capacity; the pressed series is 100 while its figures cross its policy's thresholds.",
					queries: []query{
						{`max by (broker) (detour_broker_send_queue_fill_percent{` + sel + `})`, "fill {{broker}}"},
						{`100 * max by (broker) (detour_broker_pressed{` + sel + `})`, "pressed {{broker}}"},
					}},
			}},
		},
	}
}
