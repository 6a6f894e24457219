package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
)

// nsCluster is brokersim brokers behind a brokersim name server, and a runtime resolving topic
// testTopic from it.
type nsCluster struct {
	r       *Runtime
	ns      *brokersim.NameServer
	brokers map[string]*brokersim.Broker
}

func startNameServerCluster(t *testing.T, names ...string) *nsCluster {
	t.Helper()
	c := &nsCluster{brokers: map[string]*brokersim.Broker{}}
	var list []*brokersim.Broker
	for _, n := range names {
		b, err := brokersim.StartBroker(n, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.CreateTopic(testTopic, 4)
		c.brokers[n] = b
		list = append(list, b)
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", list...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c.ns = ns
	c.r = New(Options{})
	t.Cleanup(func() { c.r.Close() })
	return c
}

// sendSpread sends n messages and counts them by broker; every send must succeed.
func sendSpread(t *testing.T, r *Runtime, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		res, err := r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		got[res.Broker]++
	}
	return got
}

// waitRoute polls until the route's brokers satisfy cond.
func waitRoute(t *testing.T, r *Runtime, what string, cond func(RouteInfo) bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "route "+what, func() error {
		if info, _ := r.RouteInfo(testTopic); !cond(info) {
			return fmt.Errorf("route is %+v", info)
		}
		return nil
	})
}

func TestNameServerRouteSendsToPublishedMastersWithoutPushedBrokers(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}}); err != nil {
		t.Fatal(err)
	}
	got := sendSpread(t, c.r, 40)
	if got["broker-a"] != 20 || got["broker-b"] != 20 {
		t.Fatalf("spread %v, want 20 each over the published 4+4 queues", got)
	}
	st, ok := c.r.RouteStatus(testTopic)
	if !ok || !st.Resolved || st.Err != nil || st.NameServer != c.ns.Addr() || len(st.Brokers) != 2 {
		t.Fatalf("status %+v", st)
	}
	for _, b := range st.Brokers {
		if b.MasterAddr != c.brokers[b.Name].Addr() || b.WriteQueues != 4 || !b.Routed {
			t.Errorf("published %+v", b)
		}
	}
}

func TestNameServerRouteFollowsDrainsAndRemovedBrokersWithinOneRefresh(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Second}); err != nil {
		t.Fatal(err)
	}
	// A drain (wipeWritePerm, brokerPermission=4) publishes the queues without the write bit.
	c.brokers["broker-b"].SetTopicPerm(testTopic, 4)
	waitRoute(t, c.r, "without the drained broker", func(info RouteInfo) bool { return len(info.Brokers) == 1 })
	if got := sendSpread(t, c.r, 20); got["broker-b"] != 0 {
		t.Fatalf("drained broker got %d sends", got["broker-b"])
	}
	st, _ := c.r.RouteStatus(testTopic)
	for _, b := range st.Brokers {
		if b.Name == "broker-b" && (b.Routed || b.Perm != 4) {
			t.Errorf("drained broker published as %+v", b)
		}
	}
	c.brokers["broker-b"].SetTopicPerm(testTopic, 6)
	waitRoute(t, c.r, "with the broker back", func(info RouteInfo) bool { return len(info.Brokers) == 2 })

	c.ns.RemoveBroker("broker-a")
	waitRoute(t, c.r, "without the removed broker", func(info RouteInfo) bool {
		return len(info.Brokers) == 1 && info.Brokers[0].Name == "broker-b"
	})
}

func TestNameServerRouteFailsOverAndKeepsTheLastGoodRoute(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	// A name server that is gone: its port refuses.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{dead, c.ns.Addr()}, Refresh: time.Second}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.r.RouteStatus(testTopic); !st.Resolved || st.NameServer != c.ns.Addr() {
		t.Fatalf("status after failover: %+v", st)
	}
	c.ns.Close()
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "a refresh with no name server answering reports an error",
		poll.True(func() bool { st, _ := c.r.RouteStatus(testTopic); return st.Err != nil }))
	if got := sendSpread(t, c.r, 5); got["broker-a"] != 5 {
		t.Fatalf("sends with every name server down: %v", got)
	}
}

func TestNameServerRouteOfAnUnpublishedTopicHasNoRoute(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	const topic = "NotOnAnyBroker"
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: topic, NameServers: []string{c.ns.Addr()}}); err != nil {
		t.Fatal(err)
	}
	st, _ := c.r.RouteStatus(topic)
	if st.Resolved || !errors.Is(st.Err, ErrTopicNotPublished) {
		t.Fatalf("status %+v, want ErrTopicNotPublished", st)
	}
	if _, err := c.r.Send(context.Background(), &Message{Topic: topic, Body: []byte("m")}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("send: %v, want ErrNoRoute", err)
	}
}

// TestNameServerRouteOfATopicPublishedLaterArrivesBeforeTheNextRefresh: a route that has never
// resolved is asked for again within seconds, not at the next refresh, so a Topic that another
// replica creates on the brokers is routable here soon after.
func TestNameServerRouteOfATopicPublishedLaterArrivesBeforeTheNextRefresh(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	const topic = "PublishedLater"
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: topic, NameServers: []string{c.ns.Addr()}, Refresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.r.RouteStatus(topic); st.Resolved {
		t.Fatalf("status %+v before the topic exists", st)
	}
	c.brokers["broker-a"].CreateTopic(topic, 4)
	// The refresh period is an hour, so only the route miss can bring the route this soon.
	poll.Until(t, 30*time.Second, 20*time.Millisecond, "the route of a topic published after the first query arrives",
		poll.True(func() bool { info, _ := c.r.RouteInfo(topic); return len(info.Brokers) == 1 }))
}

func TestNameServerRouteRespectsPodHealthOfMatchedBrokers(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	p := DefaultPolicy("pods")
	p.RespectPodHealth = true
	if err := c.r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	// The pod's address may differ from what the broker registers; the name server's wins.
	c.r.SetBroker(Broker{Name: "broker-b", Addr: "10.0.0.9:10911", Ready: false})
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Policy: "pods"}); err != nil {
		t.Fatal(err)
	}
	if got := sendSpread(t, c.r, 20); got["broker-b"] != 0 || got["broker-a"] != 20 {
		t.Fatalf("spread with broker-b's pod not ready: %v", got)
	}
	c.r.SetBroker(Broker{Name: "broker-b", Addr: "10.0.0.9:10911", Ready: true})
	if got := sendSpread(t, c.r, 16); got["broker-b"] != 8 {
		t.Fatalf("spread with broker-b's pod ready: %v (sent to %s)", got, c.brokers["broker-b"].Addr())
	}
}

func TestStaticRouteEndsResolving(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}}); err != nil {
		t.Fatal(err)
	}
	c.r.SetBroker(Broker{Name: "broker-a", Addr: c.brokers["broker-a"].Addr(), Ready: true})
	if err := c.r.SetRoute(Route{Topic: testTopic, Brokers: []BrokerQueues{{Broker: "broker-a", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.r.RouteStatus(testTopic); ok {
		t.Fatal("still resolving after a static route")
	}
	if info, _ := c.r.RouteInfo(testTopic); len(info.Queues) != 1 {
		t.Fatalf("route %+v, want the static one", info)
	}
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Millisecond}); err == nil {
		t.Fatal("a refresh under a second was accepted")
	}
}

func TestDescribeClusterListsPublishedMasters(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	v, err := c.r.DescribeCluster(context.Background(), []string{dead, c.ns.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	if v.NameServer != c.ns.Addr() || len(v.Brokers) != 2 {
		t.Fatalf("view %+v", v)
	}
	for _, b := range v.Brokers {
		if b.MasterAddr != c.brokers[b.Name].Addr() || !b.Writable || b.Cluster == "" {
			t.Errorf("broker %+v", b)
		}
	}
	if _, err := c.r.DescribeCluster(context.Background(), []string{dead}); err == nil {
		t.Fatal("no name server answered, yet no error")
	}
}

func TestNameServerRouteFollowsAMasterThatMoved(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Second}); err != nil {
		t.Fatal(err)
	}
	// A new master of the same broker group registers at another address (a DLedger or controller
	// failover, or a broker moved to another pod); the old one leaves.
	moved, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { moved.Close() })
	moved.CreateTopic(testTopic, 4)
	c.ns.RemoveBroker("broker-a")
	c.ns.AddBroker(moved)
	waitRoute(t, c.r, "at the new master's address", func(info RouteInfo) bool {
		return len(info.Brokers) == 1 && info.Brokers[0].Addr == moved.Addr()
	})
	c.brokers["broker-a"].Close()
	sendSpread(t, c.r, 8)
	if got := moved.Stats().MessagesStored; got != 8 {
		t.Fatalf("the new master stored %d messages, want 8", got)
	}
}

func TestStaleQueueRefusalAsksTheNameServersAtOnce(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	// A refresh interval far beyond the test: only the refusal can trigger the second query.
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	before := c.ns.RouteQueries()
	// The topic shrinks on the broker (mqadmin updateTopic) while the route still has 4 queues.
	c.brokers["broker-a"].CreateTopic(testTopic, 1)
	for range 4 {
		_, _ = c.r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")})
	}
	poll.Until(t, 5*time.Second, 10*time.Millisecond, "a route query after INVALID_PARAMETER",
		poll.True(func() bool { return c.ns.RouteQueries() != before }))
	waitRoute(t, c.r, "shrunk to one queue", func(info RouteInfo) bool { return len(info.Queues) == 1 })
}

func TestBrokersKnownOnlyFromANameServerAreProbedBackIntoService(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	p := DefaultPolicy("probing")
	p.Probe = ProbePolicy{Enabled: true, Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond}
	if err := c.r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Policy: "probing"}); err != nil {
		t.Fatal(err)
	}
	// broker-b refuses once: isolated, and with probing it returns only on a good probe.
	c.brokers["broker-b"].SetFault(brokersim.Fault{Code: 1})
	deadline := time.Now().Add(10 * time.Second)
	for len(c.r.Isolated("probing")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("broker-b never isolated")
		}
		_, _ = c.r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")})
	}
	c.brokers["broker-b"].SetFault(brokersim.Fault{})
	poll.Until(t, time.Until(deadline), 20*time.Millisecond, "broker-b, known only from the name server, is probed back", func() error {
		if isolated := c.r.Isolated("probing"); len(isolated) != 0 {
			return fmt.Errorf("still isolated: %+v", isolated)
		}
		return nil
	})
}
