package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
)

// newSelectionRuntime returns a runtime with brokers a, b, c (addresses never dialled) and topic
// T routed to them with n write queues each, under a default policy of plainPolicy and a manual
// fault clock.
func newSelectionRuntime(t testing.TB, n int, brokers ...string) (*Runtime, *fault.ManualClock) {
	t.Helper()
	clk := fault.NewManualClock(time.Unix(1_700_000_000, 0))
	r := New(Options{Clock: clk})
	t.Cleanup(func() { r.Close() })
	if err := r.SetPolicy(plainPolicy("")); err != nil {
		t.Fatal(err)
	}
	rt := Route{Topic: "T"}
	for i, b := range brokers {
		r.SetBroker(Broker{Name: b, Addr: fmt.Sprintf("127.0.0.1:%d", 1+i), Ready: true})
		rt.Brokers = append(rt.Brokers, BrokerQueues{Broker: b, WriteQueues: n})
	}
	if err := r.SetRoute(rt); err != nil {
		t.Fatal(err)
	}
	return r, clk
}

func (r *Runtime) tolerance(policy string) *fault.Tolerance {
	return r.state.Load().policies[policy].tol
}

func TestRouteOrdersBrokersByNameAndQueueIDs(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	for _, b := range []Broker{{Name: "broker-c", Addr: "c:1", Ready: true}, {Name: "broker-a", Addr: "a:1", Ready: true},
		{Name: "broker-b", Addr: "b:1", Ready: true}, {Name: "broker-noaddr", Ready: true}} {
		r.SetBroker(b)
	}
	err := r.SetRoute(Route{Topic: "T", Brokers: []BrokerQueues{
		{Broker: "broker-c", WriteQueues: 1}, {Broker: "broker-unknown", WriteQueues: 3},
		{Broker: "broker-a", WriteQueues: 2}, {Broker: "broker-b", WriteQueues: 0}, {Broker: "broker-noaddr", WriteQueues: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := r.RouteInfo("T")
	if !ok {
		t.Fatal("no route")
	}
	want := []Queue{{"T", "broker-a", 0}, {"T", "broker-a", 1}, {"T", "broker-c", 0}}
	if fmt.Sprint(info.Queues) != fmt.Sprint(want) {
		t.Fatalf("queues %v, want %v", info.Queues, want)
	}
	// A broker that appears later joins the route in its sorted place.
	r.SetBroker(Broker{Name: "broker-unknown", Addr: "u:1", Ready: true})
	info, _ = r.RouteInfo("T")
	if got := len(info.Queues); got != 6 || info.Queues[3].Broker != "broker-unknown" || info.Queues[5].QueueID != 2 {
		t.Fatalf("after SetBroker: %v", info.Queues)
	}
}

func TestSetRouteRefusesInvalidRoutes(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	for name, rt := range map[string]Route{
		"bad topic":       {Topic: "a b"},
		"duplicate":       {Topic: "T", Brokers: []BrokerQueues{{Broker: "x", WriteQueues: 1}, {Broker: "x", WriteQueues: 2}}},
		"negative queues": {Topic: "T", Brokers: []BrokerQueues{{Broker: "x", WriteQueues: -1}}},
		"empty broker":    {Topic: "T", Brokers: []BrokerQueues{{Broker: "", WriteQueues: 1}}},
	} {
		if err := r.SetRoute(rt); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, ok := r.RouteInfo(rt.Topic); ok {
			t.Errorf("%s: route installed", name)
		}
	}
}

func TestSelectionRoundRobinsEveryQueueOnce(t *testing.T) {
	r, _ := newSelectionRuntime(t, 4, "a", "b", "c")
	counts := map[Queue]int{}
	for i := 0; i < 12*50; i++ {
		q, ok := r.SelectQueue("T", "")
		if !ok {
			t.Fatal("no queue")
		}
		counts[q]++
	}
	if len(counts) != 12 {
		t.Fatalf("%d queues used, want 12", len(counts))
	}
	for q, n := range counts {
		if n != 50 {
			t.Errorf("%v picked %d times, want 50", q, n)
		}
	}
}

func TestSelectionSkipsUnavailableBrokersAndKeepsSpreadEven(t *testing.T) {
	r, _ := newSelectionRuntime(t, 4, "a", "b", "c")
	r.tolerance("").Update("b", 0, fault.TransportError) // isolated, still reachable
	counts := map[Queue]int{}
	for i := 0; i < 8*100; i++ {
		q, _ := r.SelectQueue("T", "")
		counts[q]++
	}
	for q, n := range counts {
		if q.Broker == "b" {
			t.Fatalf("isolated broker chosen: %v", q)
		}
		// Each skipped probe consumes an index step, as RocketMQ's thread-local index does, so the
		// queue after the isolated block does not absorb its share.
		if n < 75 || n > 125 {
			t.Errorf("%v picked %d times of 800 over 8 queues", q, n)
		}
	}
}

func TestSelectionPasses(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(tol *fault.Tolerance, r *Runtime)
		last   string
		allow  map[string]bool
		trials int
	}{
		{"retry avoids the last broker", func(*fault.Tolerance, *Runtime) {}, "a", map[string]bool{"b": true, "c": true}, 50},
		{"available and not last beats isolated", func(tol *fault.Tolerance, _ *Runtime) {
			tol.Update("b", 0, fault.TransportError)
		}, "a", map[string]bool{"c": true}, 50},
		{"only the last broker available: reachable isolated broker beats last", func(tol *fault.Tolerance, _ *Runtime) {
			tol.Update("b", 0, fault.TransportError) // reachable
			tol.Update("c", 0, fault.BrokerError)    // unreachable
		}, "a", map[string]bool{"b": true}, 50},
		{"nothing reachable but last: another isolated broker rather than last", func(tol *fault.Tolerance, _ *Runtime) {
			tol.Update("b", 0, fault.BrokerError)
			tol.Update("c", 0, fault.BrokerError)
		}, "a", map[string]bool{"b": true, "c": true}, 50},
		{"everything unreachable, first attempt: any queue", func(tol *fault.Tolerance, _ *Runtime) {
			for _, b := range []string{"a", "b", "c"} {
				tol.Update(b, 0, fault.BrokerError)
			}
		}, "", map[string]bool{"a": true, "b": true, "c": true}, 50},
		{"only healthy pod is the last broker: retry goes back to it", func(_ *fault.Tolerance, r *Runtime) {
			r.SetBroker(Broker{Name: "b", Addr: "127.0.0.1:2", Ready: false})
			r.SetBroker(Broker{Name: "c", Addr: "127.0.0.1:3", Ready: false})
		}, "a", map[string]bool{"a": true}, 20},
		{"pod not ready is skipped", func(_ *fault.Tolerance, r *Runtime) {
			r.SetBroker(Broker{Name: "b", Addr: "127.0.0.1:2", Ready: false})
		}, "", map[string]bool{"a": true, "c": true}, 50},
		{"pod terminating is skipped even when others are isolated", func(tol *fault.Tolerance, r *Runtime) {
			r.SetBroker(Broker{Name: "b", Addr: "127.0.0.1:2", Ready: true, Terminating: true})
			tol.Update("a", 0, fault.BrokerError)
			tol.Update("c", 0, fault.BrokerError)
		}, "", map[string]bool{"a": true, "c": true}, 50},
		{"all pods unhealthy: still sends somewhere", func(_ *fault.Tolerance, r *Runtime) {
			for i, b := range []string{"a", "b", "c"} {
				r.SetBroker(Broker{Name: b, Addr: fmt.Sprintf("127.0.0.1:%d", i+1), Ready: false})
			}
		}, "", map[string]bool{"a": true, "b": true, "c": true}, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newSelectionRuntime(t, 2, "a", "b", "c")
			tc.setup(r.tolerance(""), r)
			seen := map[string]bool{}
			for i := 0; i < tc.trials; i++ {
				q, ok := r.SelectQueue("T", tc.last)
				if !ok {
					t.Fatal("no queue")
				}
				if !tc.allow[q.Broker] {
					t.Fatalf("picked %v, allowed %v", q, tc.allow)
				}
				seen[q.Broker] = true
			}
			if len(seen) != len(tc.allow) {
				t.Errorf("picked from %v, want every one of %v", seen, tc.allow)
			}
		})
	}
}

func TestSelectionReturnsToBrokerWhenIsolationEnds(t *testing.T) {
	r, clk := newSelectionRuntime(t, 1, "a", "b")
	r.tolerance("").Update("a", 600*time.Millisecond, fault.Success) // RocketMQ5: >= 550ms isolates 2s
	for i := 0; i < 10; i++ {
		if q, _ := r.SelectQueue("T", ""); q.Broker != "b" {
			t.Fatalf("picked %v while a is isolated", q)
		}
	}
	clk.Advance(2 * time.Second)
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		q, _ := r.SelectQueue("T", "")
		seen[q.Broker] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Fatalf("after isolation ended picked %v", seen)
	}
}

func TestSelectionIgnoresPodStateWhenPolicySaysSo(t *testing.T) {
	r, _ := newSelectionRuntime(t, 1, "a", "b")
	p := plainPolicy("")
	p.RespectPodHealth = false
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	r.SetBroker(Broker{Name: "a", Addr: "127.0.0.1:1", Ready: false})
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		q, _ := r.SelectQueue("T", "")
		seen[q.Broker] = true
	}
	if !seen["a"] {
		t.Fatalf("podHealth Ignore still skipped a: %v", seen)
	}
}

func TestRoutesSharePolicyTablesAndFallBackToDefault(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	r.SetBroker(Broker{Name: "a", Addr: "127.0.0.1:1", Ready: true})
	r.SetBroker(Broker{Name: "b", Addr: "127.0.0.1:2", Ready: true})
	bq := []BrokerQueues{{Broker: "a", WriteQueues: 1}, {Broker: "b", WriteQueues: 1}}
	for _, rt := range []Route{{Topic: "T1", Brokers: bq, Policy: "p"}, {Topic: "T2", Brokers: bq, Policy: "p"}, {Topic: "T3", Brokers: bq, Policy: "q"}} {
		if err := r.SetRoute(rt); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ := r.RouteInfo("T1"); info.Policy != "" {
		t.Fatalf("unknown policy p: route uses %q, want the default", info.Policy)
	}
	if err := r.SetPolicy(DefaultPolicy("p")); err != nil {
		t.Fatal(err)
	}
	if info, _ := r.RouteInfo("T1"); info.Policy != "p" {
		t.Fatalf("route T1 uses %q after SetPolicy(p)", info.Policy)
	}
	r.tolerance("p").Update("a", 0, fault.BrokerError)
	for i := 0; i < 10; i++ {
		if q, _ := r.SelectQueue("T2", ""); q.Broker != "b" {
			t.Fatalf("T2 shares policy p with T1 but picked %v", q)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		q, _ := r.SelectQueue("T3", "")
		seen[q.Broker] = true
	}
	if !seen["a"] {
		t.Fatalf("T3 (default policy) must not see policy p's isolation: %v", seen)
	}
	if got := r.Isolated("p"); len(got) != 1 || got[0].Broker != "a" {
		t.Fatalf("Isolated(p) = %v", got)
	}
	// Changing the policy keeps what its table learnt.
	p := DefaultPolicy("p")
	p.Retry.Attempts = 5
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	if got := r.Isolated("p"); len(got) != 1 {
		t.Fatalf("Isolated(p) after a policy change = %v", got)
	}
	r.RemovePolicy("p")
	if info, _ := r.RouteInfo("T1"); info.Policy != "" {
		t.Fatalf("after RemovePolicy route uses %q", info.Policy)
	}
}

func TestPodStateReachesEveryPolicyTable(t *testing.T) {
	r, _ := newSelectionRuntime(t, 1, "a", "b")
	if err := r.SetPolicy(DefaultPolicy("p")); err != nil {
		t.Fatal(err)
	}
	r.SetBroker(Broker{Name: "a", Addr: "127.0.0.1:1", Ready: true, Terminating: true})
	for _, pol := range []string{"", "p"} {
		got := r.Isolated(pol)
		if len(got) != 1 || got[0].Broker != "a" || got[0].Reason != fault.ReasonPodTerminating {
			t.Errorf("policy %q: Isolated = %+v", pol, got)
		}
	}
	r.SetBroker(Broker{Name: "a", Addr: "127.0.0.1:1", Ready: true})
	for _, pol := range []string{"", "p"} {
		if got := r.Isolated(pol); len(got) != 0 {
			t.Errorf("policy %q after Ready: Isolated = %+v", pol, got)
		}
	}
}

func TestDefaultPolicyChangeReachesRoutesThatFellBackToIt(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	r.SetBroker(Broker{Name: "a", Addr: "127.0.0.1:1", Ready: false})
	r.SetBroker(Broker{Name: "b", Addr: "127.0.0.1:2", Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Policy: "unknown", Brokers: []BrokerQueues{{Broker: "a", WriteQueues: 1}, {Broker: "b", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if q, _ := r.SelectQueue("T", ""); q.Broker != "b" {
			t.Fatalf("default policy respects pod health, picked %v", q)
		}
	}
	p := DefaultPolicy("")
	p.RespectPodHealth = false
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		q, _ := r.SelectQueue("T", "")
		seen[q.Broker] = true
	}
	if !seen["a"] {
		t.Fatal("route on an unknown policy kept the old default settings")
	}
}

func TestRouteLookupFindsEveryTopicAtAnyTableSize(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	r.SetBroker(Broker{Name: "a", Addr: "127.0.0.1:1", Ready: true})
	var topics []string
	for n := 1; n <= 2*smallRouteIndex; n++ {
		topic := fmt.Sprintf("T%d", n) // T1 and T10..T16 share lengths with others
		topics = append(topics, topic)
		if err := r.SetRoute(Route{Topic: topic, Brokers: []BrokerQueues{{Broker: "a", WriteQueues: n}}}); err != nil {
			t.Fatal(err)
		}
		for i, want := range topics {
			q, ok := r.SelectQueue(want, "")
			if !ok || q.Topic != want || q.QueueID > i {
				t.Fatalf("%d routes: topic %s selected %+v %v", n, want, q, ok)
			}
		}
		if _, ok := r.SelectQueue("T0", ""); ok {
			t.Fatalf("%d routes: unknown topic found", n)
		}
	}
	for _, topic := range topics[:smallRouteIndex+2] {
		r.RemoveRoute(topic)
		if _, ok := r.SelectQueue(topic, ""); ok {
			t.Fatalf("removed %s still selectable", topic)
		}
	}
	if _, ok := r.SelectQueue(topics[len(topics)-1], ""); !ok {
		t.Fatal("remaining topic lost")
	}
}

func TestRouteInfoReportsBrokersAndAvailableQueues(t *testing.T) {
	r, _ := newSelectionRuntime(t, 2, "a", "b", "c")
	r.tolerance("").Update("b", 0, fault.BrokerError)
	r.SetBroker(Broker{Name: "c", Addr: "127.0.0.1:3", Ready: false})
	info, ok := r.RouteInfo("T")
	if !ok {
		t.Fatal("no route")
	}
	want := []RouteBroker{
		{Name: "a", Addr: "127.0.0.1:1", WriteQueues: 2, PodOK: true, Available: true, Reachable: true},
		{Name: "b", Addr: "127.0.0.1:2", WriteQueues: 2, PodOK: true, Available: false, Reachable: false},
		{Name: "c", Addr: "127.0.0.1:3", WriteQueues: 2, PodOK: false, Available: false, Reachable: true},
	}
	if fmt.Sprint(info.Brokers) != fmt.Sprint(want) || info.AvailableQueues != 2 || len(info.Queues) != 6 {
		t.Fatalf("route info %+v", info)
	}
}

// TestRoutesToOneTopicKeepTheirOwnBrokers proves routes are kept by key: two routes that publish
// to the same RocketMQ topic (two tenants naming their topic alike) each send only to their own
// brokers, a message cannot be sent by a route of another topic, and removing one route leaves
// the other in force.
func TestRoutesToOneTopicKeepTheirOwnBrokers(t *testing.T) {
	const topic = "TopicTest"
	start := func(name string) *brokersim.Broker {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		b.CreateTopic(topic, 4)
		return b
	}
	a, b := start("broker-a"), start("broker-a")
	r := New(Options{})
	t.Cleanup(func() { _ = r.Close() })
	r.SetBroker(Broker{Name: "team-a/broker-a", Addr: a.Addr(), Ready: true})
	r.SetBroker(Broker{Name: "team-b/broker-a", Addr: b.Addr(), Ready: true})
	for _, rt := range []Route{
		{Key: "team-a/orders", Topic: topic, Brokers: []BrokerQueues{{Broker: "team-a/broker-a", WriteQueues: 4}}},
		{Key: "team-b/orders", Topic: topic, Brokers: []BrokerQueues{{Broker: "team-b/broker-a", WriteQueues: 4}}},
	} {
		if err := r.SetRoute(rt); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		key, broker string
		sim         *brokersim.Broker
	}{{"team-a/orders", "team-a/broker-a", a}, {"team-b/orders", "team-b/broker-a", b}} {
		for i := range 10 {
			res, err := r.SendRoute(ctx, tc.key, &Message{Topic: topic, Body: []byte("m")})
			if err != nil || res.Broker != tc.broker {
				t.Fatalf("send %d by %s: %+v, %v; want it stored on %s", i, tc.key, res, err, tc.broker)
			}
		}
		if n := tc.sim.Stats().Topics[topic].Stored; n != 10 {
			t.Fatalf("%s stored %d messages, want its route's 10", tc.broker, n)
		}
		if info, ok := r.RouteInfo(tc.key); !ok || info.Key != tc.key || info.Topic != topic || len(info.Brokers) != 1 {
			t.Fatalf("RouteInfo(%s) = %+v, %v", tc.key, info, ok)
		}
	}
	if _, err := r.Send(ctx, &Message{Topic: topic, Body: []byte("m")}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("send by the bare topic: %v, want ErrNoRoute (no route is keyed by it)", err)
	}
	if _, err := r.SendRoute(ctx, "team-a/orders", &Message{Topic: "OtherTopic", Body: []byte("m")}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("another topic's message by team-a's route: %v, want ErrNoRoute", err)
	}
	r.RemoveRoute("team-a/orders")
	if _, err := r.SendRoute(ctx, "team-b/orders", &Message{Topic: topic, Body: []byte("m")}); err != nil {
		t.Fatalf("team-b after team-a's route went: %v", err)
	}
}
