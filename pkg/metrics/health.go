package metrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// healthCollector exports, at scrape time, what an on-call engineer's alerts are written against
// (the shipped alert rules): how many brokers each policy is in force for and may isolate
// at once, how long each isolated broker has been out, whether each name-server route still
// refreshes, and whether this replica leads. Read from the runtime when scraped, so a series
// goes with its policy, broker or route and no figure is older than the scrape.
type healthCollector struct {
	mu      sync.Mutex
	rt      *producer.Runtime
	leading func() bool
	fleet   func() FleetFigures
	now     func() time.Time

	brokers, capBrokers, isolatedFor *prometheus.Desc
	refreshFailing, lastResolved     *prometheus.Desc
	leader                           *prometheus.Desc
	// What this replica knows of the others: the live replicas, the isolations they publish.
	fleetReplicas, fleetPeerIsolations *prometheus.Desc
	// The routes of undeclared topics: kept, the bound, first loads, refusals, drops.
	undeclared, undeclaredMax, undeclaredLoads, undeclaredBusy, undeclaredDropped *prometheus.Desc
}

// newHealthCollector returns a collector of health figures, with no runtime behind it yet.
func newHealthCollector() *healthCollector {
	return &healthCollector{now: time.Now,
		brokers: prometheus.NewDesc("detour_policy_brokers",
			"Brokers a FaultPolicy (namespace/name) is in force for.", []string{"policy"}, nil),
		capBrokers: prometheus.NewDesc("detour_policy_isolation_cap_brokers",
			"How many of its brokers a FaultPolicy may isolate at once (its maxIsolatedPercent); absent when it sets no cap. "+
				"At the cap, the next broker to fail stays in use.", []string{"policy"}, nil),
		isolatedFor: prometheus.NewDesc("detour_broker_isolated_seconds",
			"How long a broker has been isolated under a FaultPolicy, by the reason it was isolated.",
			[]string{"policy", "broker", "reason"}, nil),
		refreshFailing: prometheus.NewDesc("detour_route_refresh_failing",
			"1 when no name server of the topic's cluster answered the last refresh of its route (a topic they do not know counts as answered), else 0.",
			[]string{"route"}, nil),
		lastResolved: prometheus.NewDesc("detour_route_last_resolved_timestamp_seconds",
			"When a name server last answered with the topic's route (Unix seconds); absent until one has.", []string{"route"}, nil),
		leader: prometheus.NewDesc("detour_leader",
			"1 while this replica leads (writes status, creates topics, records Events), else 0.", nil, nil),
		fleetReplicas: prometheus.NewDesc("detour_fleet_replicas",
			"Live replicas this replica counts, itself included: those whose ReplicaViews have not expired. Absent when replicas share no views.", nil, nil),
		fleetPeerIsolations: prometheus.NewDesc("detour_fleet_peer_isolations",
			"Brokers other live replicas isolate under a FaultPolicy, by policy: their ReplicaViews publish them and this replica isolates them too.",
			[]string{"policy"}, nil),
		undeclared: prometheus.NewDesc("detour_undeclared_topic_routes",
			"Routes of undeclared topics (served by Clusters with undeclaredTopics: Serve) this replica keeps now: topics its clients named lately.", nil, nil),
		undeclaredMax: prometheus.NewDesc("detour_undeclared_topic_routes_max",
			"The most routes of undeclared topics this replica keeps at once (--undeclared-topics-max); at it, a new topic drops the least recently used.", nil, nil),
		undeclaredLoads: prometheus.NewDesc("detour_undeclared_topic_loads_total",
			"Name-server queries for undeclared topics not in use yet (first uses; refreshes not counted).", nil, nil),
		undeclaredBusy: prometheus.NewDesc("detour_undeclared_topic_refusals_too_many_total",
			"Requests naming an undeclared topic not in use that were refused because clients named more new topics than --undeclared-topics-new-per-second allows.", nil, nil),
		undeclaredDropped: prometheus.NewDesc("detour_undeclared_topic_routes_dropped_total",
			"Routes of undeclared topics let go, by why: idle (unused for --undeclared-topics-idle-timeout) or full (room made for a new topic).", []string{"why"}, nil),
	}
}

// observe points the collector at rt and leading.
func (c *healthCollector) observe(rt *producer.Runtime, leading func() bool) {
	c.mu.Lock()
	c.rt, c.leading = rt, leading
	c.mu.Unlock()
}

// FleetFigures are what one replica knows of the fleet: the live replicas, itself included, and
// by policy the brokers the other live replicas publish as isolated.
type FleetFigures struct {
	Replicas       int
	PeerIsolations map[string]int
}

// observeFleet points the collector at what the replica knows of the others.
func (c *healthCollector) observeFleet(fleet func() FleetFigures) {
	c.mu.Lock()
	c.fleet = fleet
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.brokers, c.capBrokers, c.isolatedFor, c.refreshFailing, c.lastResolved, c.leader,
		c.fleetReplicas, c.fleetPeerIsolations, c.undeclared, c.undeclaredMax, c.undeclaredLoads, c.undeclaredBusy, c.undeclaredDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	rt, leading, fleet := c.rt, c.leading, c.fleet
	c.mu.Unlock()
	if leading != nil {
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, boolGauge(leading()))
	}
	if fleet != nil {
		f := fleet()
		ch <- prometheus.MustNewConstMetric(c.fleetReplicas, prometheus.GaugeValue, float64(f.Replicas))
		for policy, n := range f.PeerIsolations {
			ch <- prometheus.MustNewConstMetric(c.fleetPeerIsolations, prometheus.GaugeValue, float64(n), policy)
		}
	}
	if rt == nil {
		return
	}
	now := c.now()
	for _, policy := range rt.PolicyNames() {
		if policy == "" {
			continue // the runtime's default policy: no FaultPolicy to alert on
		}
		c.collectPolicy(ch, rt, policy, now)
	}
	for _, route := range rt.ResolvedRoutes() {
		c.collectRoute(ch, rt, route)
	}
	c.collectUndeclared(ch, rt)
}

// collectUndeclared exports the counts of the runtime's routes of undeclared topics.
func (c *healthCollector) collectUndeclared(ch chan<- prometheus.Metric, rt *producer.Runtime) {
	s := rt.UndeclaredStats()
	ch <- prometheus.MustNewConstMetric(c.undeclared, prometheus.GaugeValue, float64(s.Keys))
	ch <- prometheus.MustNewConstMetric(c.undeclaredMax, prometheus.GaugeValue, float64(s.MaxKeys))
	ch <- prometheus.MustNewConstMetric(c.undeclaredLoads, prometheus.CounterValue, float64(s.Loads))
	ch <- prometheus.MustNewConstMetric(c.undeclaredBusy, prometheus.CounterValue, float64(s.Busy))
	ch <- prometheus.MustNewConstMetric(c.undeclaredDropped, prometheus.CounterValue, float64(s.Expired), "idle")
	ch <- prometheus.MustNewConstMetric(c.undeclaredDropped, prometheus.CounterValue, float64(s.Evicted), "full")
}

// collectPolicy exports one policy's broker count, isolation limit and isolated brokers.
func (c *healthCollector) collectPolicy(ch chan<- prometheus.Metric, rt *producer.Runtime, policy string, now time.Time) {
	n := len(rt.Brokers(policy))
	ch <- prometheus.MustNewConstMetric(c.brokers, prometheus.GaugeValue, float64(n), policy)
	if p, ok := rt.Policy(policy); ok {
		if limit, capped := fault.IsolationLimit(n, p.MaxIsolatedPercent); capped {
			ch <- prometheus.MustNewConstMetric(c.capBrokers, prometheus.GaugeValue, float64(limit), policy)
		}
	}
	for _, it := range rt.Isolated(policy) {
		ch <- prometheus.MustNewConstMetric(c.isolatedFor, prometheus.GaugeValue,
			max(now.Sub(it.Since).Seconds(), 0), policy, it.Broker, string(it.Reason))
	}
}

// collectRoute exports whether one name-server route refreshes, and when it last did.
func (c *healthCollector) collectRoute(ch chan<- prometheus.Metric, rt *producer.Runtime, route string) {
	st, ok := rt.RouteStatus(route)
	if !ok {
		return // removed since ResolvedRoutes
	}
	// A topic the name servers say they do not know is the user's to fix (the Topic's condition
	// says so), not a name server out of reach.
	unreachable := st.Err != nil && !errors.Is(st.Err, producer.ErrTopicNotPublished)
	ch <- prometheus.MustNewConstMetric(c.refreshFailing, prometheus.GaugeValue, boolGauge(unreachable), route)
	if !st.LastResolved.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.lastResolved, prometheus.GaugeValue,
			float64(st.LastResolved.UnixNano())/1e9, route)
	}
}

// boolGauge is 1 for true, 0 for false.
func boolGauge(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
