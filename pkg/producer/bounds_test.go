package producer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/nstest"
	"github.com/detourmq/detour/pkg/remoting"
)

// waitStatus polls a route's status until cond holds.
func waitStatus(t *testing.T, r *Runtime, key, what string, cond func(RouteStatus) bool) RouteStatus {
	t.Helper()
	var st RouteStatus
	waitFor(t, what, func() bool {
		st, _ = r.RouteStatus(key)
		return cond(st)
	})
	return st
}

func TestRoutesBeyondABoundAreRefusedAndTheLastGoodRouteStays(t *testing.T) {
	tests := []struct {
		name      string
		body      func() []byte
		wantBound string
	}{
		{"2^31-1 write queues on a broker", func() []byte { return nstest.RouteBody(1, 1<<31-1, "127.0.0.1:10911", 0) },
			"write queues of broker \"broker-0\": 2147483647, outside the bound 0..1024"},
		{"a 15 MiB route", func() []byte { return nstest.RouteBody(98000, 64, "127.0.0.1:10911", 0) },
			fmt.Sprintf("exceeds the limit of %d bytes", remoting.NameServerMaxFrameSize)},
		{"more brokers than the bound", func() []byte { return nstest.RouteBody(remoting.MaxRouteBrokers+1, 1, "127.0.0.1:10911", 0) },
			"lists more than 1024 entries, beyond the bound of 1024"},
		{"more write queues over the route than the bound", func() []byte { return nstest.RouteBody(65, 1024, "127.0.0.1:10911", 0) },
			"66560 write queues over its brokers, beyond the bound of 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := nstest.RouteBody(2, 4, "127.0.0.1:10911", 0)
			ns := nstest.StartScripted(t, good)
			r := New(Options{HeartbeatInterval: -1})
			t.Cleanup(func() { r.Close() })
			if err := r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{ns.Addr()}}); err != nil {
				t.Fatal(err)
			}
			if st, _ := r.RouteStatus(testTopic); !st.Resolved || st.Err != nil {
				t.Fatalf("the good route was not taken: %+v", st)
			}

			ns.AnswerRoute(tt.body())
			r.RefreshRoute(testTopic)
			st := waitStatus(t, r, testTopic, "the refusal", func(st RouteStatus) bool { return st.Err != nil })
			if !errors.Is(st.Err, ErrAnswerRefused) || !strings.Contains(st.Err.Error(), tt.wantBound) {
				t.Fatalf("status error %v, want ErrAnswerRefused naming %q", st.Err, tt.wantBound)
			}
			if !st.Resolved || len(st.Brokers) != 2 {
				t.Fatalf("the last good route's status is gone: %+v", st)
			}
			if info, _ := r.RouteInfo(testTopic); len(info.Queues) != 8 {
				t.Fatalf("route in force has %d queues, want the last good route's 8", len(info.Queues))
			}
		})
	}
}

func TestAStaticRouteBeyondTheQueueBoundsIsRefused(t *testing.T) {
	tests := []struct {
		name      string
		brokers   []BrokerQueues
		wantBound string
	}{
		{"2^31-1 write queues", []BrokerQueues{{Broker: "a", WriteQueues: 1<<31 - 1, Addr: "127.0.0.1:1"}}, "beyond the bound of 1024"},
		{"queues over the route", func() []BrokerQueues {
			var bs []BrokerQueues
			for i := range 65 {
				bs = append(bs, BrokerQueues{Broker: fmt.Sprint("b", i), WriteQueues: 1024, Addr: "127.0.0.1:1"})
			}
			return bs
		}(), "beyond the bound of 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Options{HeartbeatInterval: -1})
			t.Cleanup(func() { r.Close() })
			err := r.SetRoute(Route{Topic: testTopic, Brokers: tt.brokers})
			if err == nil || !strings.Contains(err.Error(), tt.wantBound) {
				t.Fatalf("SetRoute: %v, want a refusal naming %q", err, tt.wantBound)
			}
			if _, ok := r.RouteInfo(testTopic); ok {
				t.Fatal("the refused route is in force")
			}
		})
	}
}

func TestClusterInfoBeyondTheBoundIsRefused(t *testing.T) {
	ns := nstest.StartScripted(t, nil)
	ns.AnswerClusterInfo(nstest.ClusterInfoBody(10000, "127.0.0.1:10911"))
	r := New(Options{HeartbeatInterval: -1})
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := r.DescribeCluster(ctx, []string{ns.Addr()})
	if !errors.Is(err, ErrAnswerRefused) || !strings.Contains(err.Error(), "beyond the bound of 4096") {
		t.Fatalf("err = %v, want ErrAnswerRefused naming the bound of 4096 brokers", err)
	}
}

func TestASilentNameServerDoesNotKeepDescribeClusterFromTheNext(t *testing.T) {
	silent := nstest.StartSilent(t)
	good := nstest.StartScripted(t, nil)
	good.AnswerClusterInfo([]byte(`{"brokerAddrTable":{"broker-a":{"cluster":"c","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"}}},"clusterAddrTable":{"c":["broker-a"]}}`))
	r := New(Options{HeartbeatInterval: -1})
	t.Cleanup(func() { r.Close() })
	// A generous whole-look deadline: the silent name server must cost one request's wait, not
	// all of it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := r.DescribeCluster(ctx, []string{silent.Addr(), good.Addr()})
	if err != nil || v.NameServer != good.Addr() || len(v.Brokers) != 1 {
		t.Fatalf("DescribeCluster = %+v, %v; want broker-a from %s", v, err, good.Addr())
	}
}

func TestAnAsyncNameServerRouteDoesNotWaitForASilentNameServer(t *testing.T) {
	silent := nstest.StartSilent(t)
	r := New(Options{HeartbeatInterval: -1})
	t.Cleanup(func() { r.Close() })
	changed := make(chan struct{}, 16)
	spec := NameServerRoute{Topic: testTopic, NameServers: []string{silent.Addr()}, Async: true,
		OnChange: func() { changed <- struct{}{} }}
	if err := r.SetNameServerRoute(spec); err != nil {
		t.Fatal(err)
	}
	// Returned while the query is unanswered: no outcome yet.
	if st, _ := r.RouteStatus(testTopic); st.Resolved || st.Err != nil {
		t.Fatalf("status %+v before the silent name server answered", st)
	}
	waitFor(t, "the query to reach the silent name server", func() bool { return silent.Accepted() > 0 })
	silent.Release()
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("OnChange was not called after the query failed")
	}
	if st, _ := r.RouteStatus(testTopic); st.Resolved || st.Err == nil {
		t.Fatalf("status %+v, want the failure", st)
	}
}

// heapAfterGC is the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestSixHostileNameServersKeepTheHeapBounded(t *testing.T) {
	const clusters, bound = 6, 256 << 20
	tests := []struct {
		name string
		body []byte
	}{
		// What the hostile-peer trial sent: routes of about 15 MiB, here 10,000 brokers of 1000
		// write queues each, padded with slave addresses.
		{"routes of 15 MiB", nstest.RouteBody(10000, 1000, "127.0.0.1:10911", 58)},
		// The largest routes the bounds admit: 1024 brokers of 64 queues (65536 queues), padded
		// with slave addresses to just under the 2 MiB body bound.
		{"routes at every bound", nstest.RouteBody(remoting.MaxRouteBrokers, 64, "127.0.0.1:10911", 82)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("route body %d bytes", len(tt.body))
			var servers []*nstest.Scripted
			for range clusters {
				servers = append(servers, nstest.StartScripted(t, tt.body))
			}
			r := New(Options{HeartbeatInterval: -1})
			t.Cleanup(func() { r.Close() })
			base := heapAfterGC()
			var peak atomic.Uint64
			stop := sampleHeap(&peak)
			var wg sync.WaitGroup
			for i, ns := range servers {
				wg.Go(func() {
					key := fmt.Sprint("cluster-", i)
					if err := r.SetNameServerRoute(NameServerRoute{Key: key, Topic: testTopic, NameServers: []string{ns.Addr()}}); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			stop()
			for i := range clusters {
				st, _ := r.RouteStatus(fmt.Sprint("cluster-", i))
				if !st.Resolved && st.Err == nil {
					t.Fatalf("route %d has no outcome: %+v", i, st)
				}
			}
			held := int64(heapAfterGC()) - int64(base)
			t.Logf("heap above baseline after GC with %d routes: %.1f MiB (peak sampled during the queries, the hostile servers' own write buffers included: %.1f MiB)",
				clusters, float64(held)/(1<<20), (float64(peak.Load())-float64(base))/(1<<20))
			if held > bound {
				t.Fatalf("%d hostile routes hold %.0f MiB of heap, beyond %d MiB", clusters, float64(held)/(1<<20), bound>>20)
			}
		})
	}
}

// sampleHeap records the largest live heap seen until the returned stop is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
