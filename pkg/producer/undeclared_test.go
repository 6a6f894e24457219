package producer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/scope"
)

// undeclaredSpec is the route of an undeclared topic of the cluster c, keyed as the operator
// keys them (one "/" part more than a declared Topic's key).
func undeclaredSpec(c *nsCluster, topic string) NameServerRoute {
	return NameServerRoute{Key: scope.Cluster("shop", "prod").UndeclaredRoute(topic), Topic: topic, Brokers: scope.Cluster("shop", "prod"),
		NameServers: []string{c.ns.Addr()}, MetricsTopic: "shop/prod/*"}
}

func TestUndeclaredTopicRouteLoadsOnFirstUseAndSends(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	spec := undeclaredSpec(c, testTopic)
	if _, ok := c.r.RouteInfo(spec.Key); ok {
		t.Fatal("a route before its first use")
	}
	if err := c.r.UseRoute(context.Background(), spec); err != nil {
		t.Fatalf("first use: %v", err)
	}
	info, ok := c.r.RouteInfo(spec.Key)
	if !ok || len(info.Brokers) != 2 || info.Brokers[0].Name != "shop/prod/broker-a" {
		t.Fatalf("route after first use: %+v", info)
	}
	res, err := c.r.SendRoute(context.Background(), spec.Key, &Message{Topic: testTopic, Body: []byte("m")})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if res.Broker != "shop/prod/broker-a" && res.Broker != "shop/prod/broker-b" {
		t.Fatalf("sent to %s", res.Broker)
	}
	if got := c.r.ResolvedRoutes(); len(got) != 0 {
		t.Fatalf("ResolvedRoutes lists undeclared routes: %v", got)
	}
	if u := c.r.UndeclaredInUse("shop/prod/", 10); u.Topics != 1 || u.RefusedCount != 0 {
		t.Fatalf("in use: %+v, want one topic", u)
	}
}

func TestUndeclaredTopicConcurrentFirstUsesAskTheNameServerOnce(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	before := c.ns.RouteQueries()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() { errs <- c.r.UseRoute(context.Background(), undeclaredSpec(c, testTopic)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := c.ns.RouteQueries() - before; n != 1 {
		t.Fatalf("64 first uses at once asked the name server %d times, want 1", n)
	}
}

func TestUndeclaredTopicTheNameServersDoNotKnowIsRefusedAndRemembered(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	spec := undeclaredSpec(c, "NoSuchTopic")
	before := c.ns.RouteQueries()
	for i := range 20 {
		err := c.r.UseRoute(context.Background(), spec)
		if !errors.Is(err, ErrTopicNotPublished) {
			t.Fatalf("use %d: %v, want ErrTopicNotPublished", i, err)
		}
	}
	if n := c.ns.RouteQueries() - before; n != 1 {
		t.Fatalf("20 uses of an unknown topic asked the name server %d times, want 1 (the miss remembered)", n)
	}
	u := c.r.UndeclaredInUse("shop/prod/", 10)
	if u.Topics != 0 || u.RefusedCount != 1 || u.Refused[0].Key != spec.Key {
		t.Fatalf("in use: %+v, want the unknown topic refused and nothing held", u)
	}
	if _, ok := c.r.RouteInfo(spec.Key); ok {
		t.Fatal("an unknown topic left a route behind")
	}
}

func TestUndeclaredTopicRouteIsDroppedWhenIdle(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	r := New(Options{UndeclaredTopics: UndeclaredTopicOptions{IdleAfter: 200 * time.Millisecond}})
	t.Cleanup(func() { r.Close() })
	spec := undeclaredSpec(c, testTopic)
	if err := r.UseRoute(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the idle route dropped", func() error {
		if _, ok := r.RouteInfo(spec.Key); ok {
			return errors.New("still routed")
		}
		return nil
	})
	if u := r.UndeclaredInUse("", 10); u.Topics != 0 {
		t.Fatalf("in use after idling: %+v", u)
	}
	// A later use loads it again.
	if err := r.UseRoute(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.RouteInfo(spec.Key); !ok {
		t.Fatal("no route after using the topic again")
	}
}

func TestForgetUndeclaredDropsACluster(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	spec := undeclaredSpec(c, testTopic)
	if err := c.r.UseRoute(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	c.r.ForgetUndeclared("shop/other/")
	if _, ok := c.r.RouteInfo(spec.Key); !ok {
		t.Fatal("forgetting another Cluster dropped this one's route")
	}
	c.r.ForgetUndeclared("shop/prod/")
	if _, ok := c.r.RouteInfo(spec.Key); ok {
		t.Fatal("the Cluster's route survived ForgetUndeclared")
	}
}

// TestRouteCacheBoundAgainstRandomTopics names 200,000 random topics, as a hostile client
// would: the runtime's memory stays flat, the name server is asked at most the burst plus the
// rate, and the requests beyond are refused with ErrTooManyNewTopics.
func TestRouteCacheBoundAgainstRandomTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 200,000 requests")
	}
	c := startNameServerCluster(t, "broker-a")
	opts := UndeclaredTopicOptions{LoadsPerSecond: 100, LoadBurst: 100}
	r := New(Options{UndeclaredTopics: opts})
	t.Cleanup(func() { r.Close() })
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// The real topic is in use throughout.
	if err := r.UseRoute(context.Background(), undeclaredSpec(c, testTopic)); err != nil {
		t.Fatal(err)
	}
	start, before := time.Now(), c.ns.RouteQueries()
	var heapAt20k uint64
	busy := 0
	const topics = 200000
	for i := range topics {
		err := r.UseRoute(context.Background(), undeclaredSpec(c, fmt.Sprintf("random-%d", i)))
		switch {
		case errors.Is(err, ErrTooManyNewTopics):
			busy++
		case !errors.Is(err, ErrTopicNotPublished):
			t.Fatalf("random topic %d: %v", i, err)
		}
		if i == 20000 {
			heapAt20k = heap()
		}
	}
	elapsed := time.Since(start)
	queries := c.ns.RouteQueries() - before
	bound := int64(opts.LoadBurst) + int64(elapsed.Seconds()*opts.LoadsPerSecond) + 1
	if queries > bound {
		t.Fatalf("%d random topics in %v asked the name server %d times, more than the burst and rate allow (%d)", topics, elapsed, queries, bound)
	}
	if busy == 0 {
		t.Fatal("no random topic was refused as too many, yet they came faster than the rate")
	}
	// Memory: what 180,000 more topics added is what the remembered misses' bound allows, not a
	// per-topic growth (each entry costs about 200 bytes: 180,000 would be 36 MB).
	if grew := int64(heap()) - int64(heapAt20k); grew > 4<<20 {
		t.Fatalf("the heap grew %d bytes over the last 180,000 random topics", grew)
	}
	if s := r.UndeclaredStats(); s.Keys > 1 || s.Misses > 4096 {
		t.Fatalf("cache after the flood: %+v", s)
	}
	if _, err := r.SendRoute(context.Background(), "shop/prod/"+testTopic, &Message{Topic: testTopic, Body: []byte("m")}); err != nil {
		t.Fatalf("the topic in use no longer sends after the flood: %v", err)
	}
	t.Logf("%d random topics in %v: %d name-server queries, %d refused as too many", topics, elapsed, queries, busy)
}

// TestUndeclaredRouteQueriesAreBoundedByTheTopicsInUse proves the name-server bound: however many
// callers name the same topics, the name server is asked at most once per topic in use per
// refresh period (plus each topic's first use), while the routes are kept fresh.
func TestUndeclaredRouteQueriesAreBoundedByTheTopicsInUse(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	const topics, callers = 10, 8
	for i := range topics {
		c.brokers["broker-a"].CreateTopic(fmt.Sprintf("InUse%d", i), 2)
	}
	const every = MinRouteRefresh
	spec := func(i int) NameServerRoute {
		s := undeclaredSpec(c, fmt.Sprintf("InUse%d", i))
		s.Refresh = every
		return s
	}
	before, start := c.ns.RouteQueries(), time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for n := 0; time.Since(start) < 3*time.Second; n++ {
				if err := c.r.UseRoute(context.Background(), spec(n%topics)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	queries := c.ns.RouteQueries() - before
	bound := int64(topics) * (int64(elapsed/every) + 1)
	if queries > bound || queries < topics {
		t.Fatalf("%d callers using %d topics for %v asked the name server %d times; want from %d (the first uses) to %d (a query per topic per %v)",
			callers, topics, elapsed.Round(time.Millisecond), queries, topics, bound, every)
	}
	t.Logf("%d callers, %d topics, %v: %d name-server queries (bound %d)", callers, topics, elapsed.Round(time.Millisecond), queries, bound)
}
