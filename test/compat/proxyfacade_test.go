package compat_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/facadetest"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// proxyFacadeTopic is the topic the Proxy writes behind the facade.
const proxyFacadeTopic = "DetourProxyFacade"

// envProxyDefaultRefresh, when set, adds the Proxy's default route refresh (20 s) to
// TestProxyBehindFacadeStopsWritingToHiddenBroker, which then takes about a minute longer.
const envProxyDefaultRefresh = "DETOUR_PROXY_DEFAULT_REFRESH"

// proxyDefaultRefresh is the Proxy's topicRouteServiceCacheRefreshSeconds by default.
const proxyDefaultRefresh = 20 * time.Second

// facadeLagMargin is what the Proxy may take beyond its route refresh to stop (or resume)
// writing to a broker: its next access after the refresh is due, the reload through the facade,
// the broker's dispatch and this test's polling, on a loaded 2-core machine.
const facadeLagMargin = 20 * time.Second

// TestProxyBehindFacadeStopsWritingToHiddenBroker points a real RocketMQ 5.5.0 Proxy (cluster
// mode) at detour's name-server facade instead of the name server, loads it with RocketMQ 5's
// gRPC SDK (rocketmq-client-java 5.2.0) and marks one of two real brokers' pods not ready in
// detour's runtime, which the facade then publishes without the write bit. The Proxy stops
// writing to that broker within its route refresh plus a margin, and writes there again within
// the same bound once the broker is ready again; the test logs both lags, measured from the
// brokers' stored counts. It runs at a route refresh of 3 s, and also at the Proxy's default of
// 20 s when DETOUR_PROXY_DEFAULT_REFRESH is set.
func TestProxyBehindFacadeStopsWritingToHiddenBroker(t *testing.T) {
	cases := []struct {
		name    string
		refresh time.Duration // 0: the Proxy's default
	}{{name: "route refresh 3s", refresh: 3 * time.Second}}
	if os.Getenv(envProxyDefaultRefresh) != "" {
		cases = append(cases, struct {
			name    string
			refresh time.Duration
		}{name: "default route refresh", refresh: 0})
	}
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
	// Pod health is all this policy acts on: without probes or traffic of its own, nothing but
	// the Proxy writes to the topic, and the broker stays healthy, so its stored count shows
	// exactly when the Proxy stops writing there.
	pol := producer.DefaultPolicy("facade")
	pol.Probe.Enabled = false
	rt := newRuntime(t, c, proxyFacadeTopic, 4, pol)
	fc, err := facade.Start(facade.Options{Addr: "127.0.0.1:0",
		View: facadetest.RuntimeView{NameServer: c.NameServer(), Topic: proxyFacadeTopic, Policy: pol.Name, Runtime: rt}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.Close() })
	hidden, kept := c.Brokers()[1], c.Brokers()[0]

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refresh := tc.refresh
			if refresh == 0 {
				refresh = proxyDefaultRefresh
			}
			px := c.StartProxy(rmqtest.ProxyOptions{NameServer: fc.Addr(), RouteRefresh: tc.refresh})
			defer px.Stop()
			load := rmqtest.StartGRPCLoad(t, t.TempDir(), rmqtest.GRPCLoadOptions{Endpoint: px.Addr, Topic: proxyFacadeTopic,
				Senders: 2, Interval: 10 * time.Millisecond, Duration: 5 * time.Minute})
			if _, err := load.Warm(); err != nil {
				t.Fatal(err)
			}
			base := stored(t, c)
			waitFor(t, time.Minute, "the Proxy writing to both brokers", func() bool {
				now := stored(t, c)
				return now[hidden.Name] > base[hidden.Name] && now[kept.Name] > base[kept.Name]
			})

			hiddenAt := time.Now()
			setReady(t, rt, hidden, false)
			if !slices.ContainsFunc(rt.Isolated(pol.Name), func(it fault.Item) bool { return it.Broker == hidden.Name }) {
				t.Fatalf("%s is not held out by detour after its pod was marked not ready: %v", hidden.Name, rt.Isolated(pol.Name))
			}
			lag := untilWritesStop(t, c, hidden.Name, kept.Name, hiddenAt, refresh+facadeLagMargin)
			t.Logf("route refresh %v: the Proxy wrote to %s for the last time %v after detour hid it", refresh, hidden.Name, lag.Round(10*time.Millisecond))

			shownAt := time.Now()
			setReady(t, rt, hidden, true)
			before := stored(t, c)[hidden.Name]
			waitFor(t, refresh+facadeLagMargin, "the Proxy writing to "+hidden.Name+" again", func() bool {
				return stored(t, c)[hidden.Name] > before
			})
			t.Logf("route refresh %v: the Proxy wrote to %s again %v after detour showed it", refresh, hidden.Name,
				time.Since(shownAt).Round(10*time.Millisecond))

			load.Stop()
			phase, err := load.Done()
			if err != nil {
				t.Fatal(err)
			}
			if err := load.Close(); err != nil {
				t.Error(err)
			}
			if phase.Failed > 0 {
				t.Errorf("%d of %d sends through the Proxy failed; first: %s", phase.Failed, phase.Sent+phase.Failed, phase.FirstError)
			}
		})
	}
}

// stored is what each broker holds for the test topic.
func stored(t *testing.T, c *rmqtest.Cluster) map[string]int64 {
	t.Helper()
	_, per := storedTotal(t, c, proxyFacadeTopic)
	return per
}

// setReady marks b's pod ready or not in the runtime, as the operator does from the pod's
// condition.
func setReady(t *testing.T, rt *producer.Runtime, b *rmqtest.Broker, ready bool) {
	t.Helper()
	rt.SetBroker(producer.Broker{Name: b.Name, Addr: b.Addr, Ready: ready})
}

// quietFor is how long the hidden broker's count must stand still, while the other broker's
// grows, for the Proxy to count as no longer writing there: longer than any gap between two
// of its writes while it still had the broker's queues (hundreds of sends a second over both).
const quietFor = 5 * time.Second

// untilWritesStop polls the brokers' stored counts until hidden's has not grown for quietFor
// while kept's did, within bound, and returns how long after from hidden's count last grew.
func untilWritesStop(t *testing.T, c *rmqtest.Cluster, hidden, kept string, from time.Time, bound time.Duration) time.Duration {
	t.Helper()
	last := stored(t, c)
	lastGrew := from
	var keptSince int64
	poll.Until(t, bound+quietFor, 100*time.Millisecond, "the Proxy to stop writing to "+hidden,
		poll.True(func() bool {
			now := stored(t, c)
			if now[hidden] > last[hidden] {
				lastGrew, keptSince = time.Now(), 0
			}
			keptSince += now[kept] - last[kept]
			last = now
			return time.Since(lastGrew) >= quietFor && keptSince > 0
		}))
	return lastGrew.Sub(from)
}
