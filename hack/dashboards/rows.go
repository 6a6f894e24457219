package main

// The overview's rows, one function each so every one reads as what the person on call asks.

// doorsRow: what clients send through each door, what fails, and how long answers take.
func doorsRow() row {
	return row{title: "Doors", panels: []panel{
		{title: "Sends per second by door", unit: "reqps",
			description: "Messages answered by the RocketMQ gRPC endpoint and requests answered by the HTTP send gateway, and the sends detour's runtime made for them by result. A drop to zero at one door while the others go on points at that door, not at the brokers.",
			queries: []query{
				{`sum(rate(detour_grpc_messages_total{` + ns + `}` + rate + `))`, "gRPC endpoint (messages)"},
				{`sum(rate(detour_gateway_requests_total{` + ns + `}` + rate + `))`, "HTTP gateway (requests)"},
				{`sum by (result) (rate(detour_sends_total{` + ns + `}` + rate + `))`, "runtime sends: {{result}}"},
			}},
		{title: "Errors per second by door", unit: "reqps",
			description: "Answers that were not a success, by door: gRPC messages not stored (by RocketMQ status code), HTTP gateway answers other than 2xx (by status code), and requests and connections the name-server facade refused.",
			queries: []query{
				{`sum by (code) (rate(detour_grpc_messages_total{` + ns + `, code!="OK"}` + rate + `))`, "gRPC: {{code}}"},
				{`sum by (code) (rate(detour_gateway_requests_total{` + ns + `, code!~"2.."}` + rate + `))`, "gateway: {{code}}"},
				{`sum by (code) (rate(detour_namesrv_facade_refused_total{` + ns + `}` + rate + `))`, "facade refused request: {{code}}"},
				{`sum by (reason) (rate(detour_namesrv_facade_connections_refused_total{` + ns + `}` + rate + `))`, "facade refused connection: {{reason}}"},
			}},
		{title: "p99 answer time by door", unit: "s",
			description: "The 99th percentile of the time from a request's arrival to its answer: the gRPC endpoint's SendMessage calls and the HTTP gateway's requests, which include every attempt and the wait for a broker, so they rise when brokers answer late before they are isolated; and the name-server facade's route queries, which wait on the cluster's name servers (the facade's clients send to brokers themselves).",
			queries: []query{
				{`histogram_quantile(0.99, sum by (le) (rate(detour_grpc_call_duration_seconds_bucket{` + ns + `, method="SendMessage"}` + rate + `)))`, "gRPC SendMessage"},
				{`histogram_quantile(0.99, sum by (le) (rate(detour_gateway_request_duration_seconds_bucket{` + ns + `}` + rate + `)))`, "HTTP gateway"},
				{`histogram_quantile(0.99, sum by (le) (rate(detour_namesrv_facade_request_duration_seconds_bucket{` + ns + `, code="105"}` + rate + `)))`, "name-server facade routes"},
			}},
		{title: "Messages per second by Cluster and door", unit: "reqps",
			description: "Messages the gRPC endpoint and the HTTP gateway sent through the runtime, by the Cluster of the brokers they went to (namespace/name; the namespace alone for a Topic that selects broker pods), stored or failed. Trouble at one Cluster while the others go on is that Cluster's brokers or name servers; trouble everywhere is detour or the node.",
			queries: []query{
				{`sum by (cluster, door, result) (rate(detour_door_messages_total{` + ns + `}` + rate + `))`, "{{cluster}} {{door}}: {{result}}"},
			}},
		{title: "p99 send time by Cluster and door", unit: "s",
			description: "The 99th percentile of how long a door waited on the runtime for one send, every attempt and hedge included, by the Cluster of the brokers it went to: the brokers' part of the answer time above, told apart by Cluster.",
			queries: []query{
				{`histogram_quantile(0.99, sum by (cluster, door, le) (rate(detour_door_send_duration_seconds_bucket{` + ns + `}` + rate + `)))`, "{{cluster}} {{door}}"},
			}},
		{title: "Routes served by the name-server facade", unit: "reqps",
			description: "Topic routes the facade answered, and whether it hid brokers in them (rewritten=true): facade clients send to brokers directly, so a rewritten route is how they keep away from an isolated broker.",
			queries: []query{
				{`sum by (rewritten) (rate(detour_namesrv_facade_routes_total{` + ns + `}` + rate + `))`, "rewritten={{rewritten}}"},
			}},
	}}
}

// brokersRow: which brokers are held out now, why, for how long, and whether facade clients see it.
func brokersRow() row {
	return row{title: "Brokers", panels: []panel{
		{kind: kindStat, title: "Brokers isolated now", width: 6,
			description: "Brokers each FaultPolicy isolates now, on the replica that isolates the most (each replica decides for its own senders).",
			queries: []query{
				{`max by (policy) (detour_isolated_brokers{` + ns + `})`, "{{policy}}"},
			}},
		{kind: kindTable, title: "Isolated brokers: why and for how long", unit: "s", width: 18,
			description: "Each isolated broker, the policy that isolates it, the reason (SlowSend, SendFailed, BrokerBusy, BrokerPressure, ProbeFailed, ...) and how long it has been out. Isolations end within seconds of a broker's recovery; a long one is a broker that has not recovered.",
			queries: []query{
				{`max by (policy, broker, reason) (detour_broker_isolated_seconds{` + ns + `})`, ""},
			}},
		{title: "Isolations by reason", unit: "short",
			description: "Brokers entering isolation in each interval, by reason: a broker isolated again and again is flapping.",
			queries: []query{
				{`sum by (reason) (increase(detour_isolations_total{` + ns + `}` + rate + `))`, "{{reason}}"},
			}},
		{title: "Brokers hidden from facade clients", unit: "short",
			description: "Brokers the name-server facade's last route answer for each topic published read-only, so facade clients send elsewhere.",
			queries: []query{
				{`max by (topic) (detour_namesrv_facade_brokers_hidden{` + ns + `})`, "{{topic}}"},
			}},
		{title: "Isolated against the cap", unit: "short",
			description: "Brokers each policy isolates, the brokers it is in force for, and its cap (maxIsolatedPercent). At the cap the next broker to fail stays in use.",
			queries: []query{
				{`max by (policy) (detour_isolated_brokers{` + ns + `})`, "isolated: {{policy}}"},
				{`max by (policy) (detour_policy_isolation_cap_brokers{` + ns + `})`, "cap: {{policy}}"},
				{`max by (policy) (detour_policy_brokers{` + ns + `})`, "brokers: {{policy}}"},
			}},
	}}
}

// pressureRow: how full brokers are, by their own figures, and what they refuse.
func pressureRow() row {
	return row{title: "Pressure", panels: []panel{
		{title: "Send-queue fill", unit: "percent",
			description: "Each broker's send queue as a share of its capacity, as it last said. A broker whose queue fills refuses sends soon after.",
			queries: []query{
				{`max by (broker) (detour_broker_send_queue_fill_percent{` + ns + `})`, "{{broker}}"},
			}},
		{title: "Brokers under pressure", unit: "short",
			description: "1 while a broker's own figures (send queue, page-cache lock, put latency) cross its policy's pressure thresholds: detour holds it out before it refuses anything.",
			queries: []query{
				{`max by (broker) (detour_broker_pressed{` + ns + `})`, "{{broker}}"},
			}},
		{title: "Refusals by brokers", unit: "reqps",
			description: "Send attempts brokers answered with an error (busy, flow control and the like), and requests brokers refused for detour's credentials.",
			queries: []query{
				{`sum by (broker) (rate(detour_send_attempts_total{` + ns + `, outcome="broker_error"}` + rate + `))`, "broker error: {{broker}}"},
				{`sum by (broker, reason) (rate(detour_credential_refusals_total{` + ns + `}` + rate + `))`, "credentials: {{broker}} {{reason}}"},
			}},
	}}
}

// faultRow: how hard detour works to get each send stored.
func faultRow() row {
	return row{title: "Fault handling", panels: []panel{
		{title: "Attempts per send", unit: "short",
			description: "Send attempts for each send: 1 when brokers answer first time; above 1 when sends are retried on another broker.",
			queries: []query{
				{`sum(rate(detour_send_attempts_total{` + ns + `}` + rate + `)) / sum(rate(detour_sends_total{` + ns + `}` + rate + `))`, "attempts per send"},
			}},
		{title: "Attempts by outcome", unit: "reqps",
			description: "Send attempts by outcome: transport_error counts attempts with no answer by their attempt deadline (stalled) as well as broken connections.",
			queries: []query{
				{`sum by (outcome) (rate(detour_send_attempts_total{` + ns + `}` + rate + `))`, "{{outcome}}"},
			}},
		{title: "Stalled or failed attempts by broker", unit: "reqps",
			description: "Attempts that failed in transport, by broker: no connection, a broken one, or no answer by the attempt deadline.",
			queries: []query{
				{`sum by (broker) (rate(detour_send_attempts_total{` + ns + `, outcome="transport_error"}` + rate + `))`, "{{broker}}"},
			}},
		{title: "Stalled attempts by broker", unit: "reqps",
			description: "Attempts cut by their attempt deadline with no answer, by broker, and whether the broker answered other requests meanwhile (answering=true: it holds some requests, as a hung disk or a lost request does; false: it answers nothing, as a paused or unreachable broker). Stalls are what a send waits on; hedging and the stall rules are there to keep them short.",
			queries: []query{
				{`sum by (broker, answering) (rate(detour_stalled_attempts_total{` + ns + `}` + rate + `))`, "{{broker}} answering={{answering}}"},
			}},
		{title: "Retries by failed broker", unit: "reqps",
			description: "Attempts that failed and were retried on another queue, by the broker that failed.",
			queries: []query{
				{`sum by (broker) (rate(detour_send_retries_total{` + ns + `}` + rate + `))`, "{{broker}}"},
			}},
		{title: "Hedges", unit: "percentunit",
			description: "Hedged sends (FaultPolicy spec.hedge) against all sends: sent (a second attempt to another broker), won (the hedge answered), lost, and copy_stored (both stored a copy, under one message id). Sent stays within the policy's budgetPercent.",
			queries: []query{
				{`sum by (event) (rate(detour_hedges_total{` + ns + `}` + rate + `)) / scalar(sum(rate(detour_sends_total{` + ns + `}` + rate + `)))`, "{{event}}"},
			}},
	}}
}

// undeclaredRow: routes of topics no Topic declares, served by Clusters with undeclaredTopics: Serve.
func undeclaredRow() row {
	return row{title: "Undeclared topics", panels: []panel{
		{title: "Routes cached", unit: "short",
			description: "Routes of undeclared topics each replica keeps, against the most it keeps (--undeclared-topics-max). At the most, each new topic drops the least recently used.",
			queries: []query{
				{`max by (pod) (detour_undeclared_topic_routes{` + ns + `})`, "cached: {{pod}}"},
				{`max by (pod) (detour_undeclared_topic_routes_max{` + ns + `})`, "most: {{pod}}"},
			}},
		{title: "Topics refused", unit: "reqps",
			description: "Requests naming a new undeclared topic refused because clients named more new topics than --undeclared-topics-new-per-second allows, and the first uses that were let through.",
			queries: []query{
				{`sum(rate(detour_undeclared_topic_refusals_too_many_total{` + ns + `}` + rate + `))`, "refused"},
				{`sum(rate(detour_undeclared_topic_loads_total{` + ns + `}` + rate + `))`, "first uses"},
			}},
		{title: "Routes dropped: the cache full", unit: "reqps",
			description: "Routes let go, by why: idle (unused) or full (room made for a new topic). A steady rate of full means clients use more topics than the cache holds, and each drop costs a name-server query later.",
			queries: []query{
				{`sum by (why) (rate(detour_undeclared_topic_routes_dropped_total{` + ns + `}` + rate + `))`, "{{why}}"},
			}},
	}}
}

// fleetRow: the replicas, which one leads, and what they share through their ReplicaViews.
func fleetRow() row {
	return row{title: "Fleet", panels: []panel{
		{kind: kindStat, title: "Replicas and leaders", width: 6,
			description: "Replicas serving metrics and how many lead: exactly one leader writes status, creates topics and records Events.",
			queries: []query{
				{`count(detour_leader{` + ns + `})`, "replicas"},
				{`sum(detour_leader{` + ns + `})`, "leaders"},
			}},
		{title: "Replicas each replica counts", unit: "short", width: 6,
			description: "Live replicas each replica counts through their ReplicaViews, itself included. A replica that counts fewer than the others cannot read or renew the views, and shares no isolations.",
			queries: []query{
				{`max by (pod) (detour_fleet_replicas{` + ns + `})`, "{{pod}}"},
			}},
		{title: "Isolations shared by other replicas", unit: "short", width: 6,
			description: "Brokers each replica isolates because other live replicas publish them as isolated, by policy: a broker one replica finds failing is held out on every replica.",
			queries: []query{
				{`max by (pod, policy) (detour_fleet_peer_isolations{` + ns + `})`, "{{pod}} {{policy}}"},
			}},
		{title: "Route refreshes failing", unit: "short", width: 6,
			description: "Routes each replica could not refresh from any name server of the topic's cluster (it keeps sending by the last route it has).",
			queries: []query{
				{`sum by (pod) (detour_route_refresh_failing{` + ns + `})`, "{{pod}}"},
			}},
	}}
}
