package metrics

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/internal/testsupport/poll"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// healthSeries gathers c's series as name{label=value,...} -> value, labels in name order.
func healthSeries(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return metricstest.Gathered(t, reg)
}

// TestHealthMetricsShowWhatAlertsAreWrittenAgainst proves the series the alerting rules read
// (the shipped alert rules) carry the runtime's state: a policy over three brokers may
// isolate two (the Detour cap of 99 %), the broker that refuses connections is isolated for its
// failed probes and for how long, a route whose only name server refuses is failing while one
// whose name server answers is not, and the leader gauge follows leadership.
func TestHealthMetricsShowWhatAlertsAreWrittenAgainst(t *testing.T) {
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	pol := producer.DefaultPolicy("ns/p")
	pol.Probe.Interval = 100 * time.Millisecond
	pol.Probe.Timeout = 50 * time.Millisecond
	pol.Probe.Routed = true // watch the routed brokers, so a refusing one is isolated without sends
	if err := rt.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	route := producer.Route{Topic: "T", Policy: pol.Name}
	var brokers []*brokersim.Broker
	for _, name := range []string{"broker-a", "broker-b", "broker-c"} {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers = append(brokers, b)
		rt.SetBroker(producer.Broker{Name: name, Addr: b.Addr(), Ready: true})
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: name, WriteQueues: 2})
	}
	if err := rt.SetRoute(route); err != nil {
		t.Fatal(err)
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", brokers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	// A port nothing listens on: every refresh is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	for key, addr := range map[string]string{"ns/answered": ns.Addr(), "ns/unreachable": gone} {
		spec := producer.NameServerRoute{Key: key, Topic: "T", NameServers: []string{addr}, Async: true, Refresh: time.Second}
		if err := rt.SetNameServerRoute(spec); err != nil {
			t.Fatal(err)
		}
	}
	brokers[2].SetFault(brokersim.Fault{Refuse: true})

	var leading atomic.Bool
	c := newHealthCollector()
	c.observe(rt, leading.Load)
	const isolatedC = "detour_broker_isolated_seconds{broker=broker-c,policy=ns/p,reason=ProbeFailed}"
	poll.Until(t, 30*time.Second, 20*time.Millisecond, "broker-c isolated for its probes and both routes refreshed", func() error {
		got := healthSeries(t, c)
		if _, ok := got[isolatedC]; !ok {
			return fmt.Errorf("no %s in %v", isolatedC, got)
		}
		for _, key := range []string{"ns/answered", "ns/unreachable"} {
			if st, ok := rt.RouteStatus(key); !ok || (st.Err == nil && !st.Resolved) {
				return fmt.Errorf("route %s not refreshed yet: %+v", key, st)
			}
		}
		return nil
	})
	got := healthSeries(t, c)
	for series, want := range map[string]float64{
		"detour_policy_brokers{policy=ns/p}":                 3,
		"detour_policy_isolation_cap_brokers{policy=ns/p}":   2,
		"detour_route_refresh_failing{route=ns/answered}":    0,
		"detour_route_refresh_failing{route=ns/unreachable}": 1,
		"detour_leader{}": 0,
		"detour_broker_isolated_seconds{broker=broker-a,policy=ns/p,reason=ProbeFailed}": -1, // absent
	} {
		v, ok := got[series]
		switch {
		case want < 0 && ok:
			t.Errorf("%s = %v, want no such series", series, v)
		case want >= 0 && !ok:
			t.Errorf("no %s in %v", series, got)
		case want >= 0 && v != want:
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	if v := got[isolatedC]; v < 0 || v > 60 {
		t.Errorf("%s = %v s, want the few seconds since broker-c refused", isolatedC, v)
	}
	if _, ok := got["detour_route_last_resolved_timestamp_seconds{route=ns/unreachable}"]; ok {
		t.Error("a route no name server ever answered has a last-resolved time")
	}

	leading.Store(true)
	if v := healthSeries(t, c)["detour_leader{}"]; v != 1 {
		t.Errorf("detour_leader = %v while leading, want 1", v)
	}
}

// TestUndeclaredTopicMetricsCountTheRoutesKept proves the undeclared topics' series: a topic in
// use is one route kept, a topic the name server does not know is a load but no route, and the
// routes dropped are counted by why, without a series per topic.
func TestUndeclaredTopicMetricsCountTheRoutesKept(t *testing.T) {
	b, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.CreateTopic("Kept", 2)
	ns, err := brokersim.StartNameServer("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	rt := producer.New(producer.Options{UndeclaredTopics: producer.UndeclaredTopicOptions{MaxTopics: 7}})
	t.Cleanup(func() { rt.Close() })
	for _, topic := range []string{"Kept", "Unknown"} {
		spec := producer.NameServerRoute{Key: "ns/c/" + topic, Topic: topic, NameServers: []string{ns.Addr()}}
		_ = rt.UseRoute(t.Context(), spec)
	}
	c := newHealthCollector()
	c.observe(rt, nil)
	got := healthSeries(t, c)
	for series, want := range map[string]float64{
		"detour_undeclared_topic_routes{}":                       1,
		"detour_undeclared_topic_routes_max{}":                   7,
		"detour_undeclared_topic_loads_total{}":                  2,
		"detour_undeclared_topic_refusals_too_many_total{}":      0,
		"detour_undeclared_topic_routes_dropped_total{why=idle}": 0,
		"detour_undeclared_topic_routes_dropped_total{why=full}": 0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (exported %v), want %v", series, v, ok, want)
		}
	}
}

// TestFleetMetricsShowReplicasAndWhatTheyShare proves the fleet's series are absent while
// replicas share no views, and then follow what the replica knows of the others at each scrape:
// the live replicas, itself included, and by policy the brokers the others isolate.
func TestFleetMetricsShowReplicasAndWhatTheyShare(t *testing.T) {
	c := newHealthCollector()
	for name := range healthSeries(t, c) {
		t.Errorf("series %s without a fleet", name)
	}
	var figures atomic.Pointer[FleetFigures]
	figures.Store(&FleetFigures{Replicas: 1})
	c.observeFleet(func() FleetFigures { return *figures.Load() })
	for _, tc := range []struct {
		name    string
		figures FleetFigures
		want    map[string]float64
	}{
		{"alone", FleetFigures{Replicas: 1}, map[string]float64{"detour_fleet_replicas{}": 1}},
		{"two others, one isolating two brokers", FleetFigures{Replicas: 3, PeerIsolations: map[string]int{"shop/fp": 2}},
			map[string]float64{"detour_fleet_replicas{}": 3, "detour_fleet_peer_isolations{policy=shop/fp}": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			figures.Store(&tc.figures)
			got := healthSeries(t, c)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("series %v, want %v", got, tc.want)
			}
		})
	}
}
