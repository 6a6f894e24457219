package compat_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// grpcBlackHoleTopic is the topic of the side-by-side run; serveGRPC serves it (DetourGRPC prefix).
const grpcBlackHoleTopic = "DetourGRPCBlackHole"

// blackHoleSends is how many messages the SDK sends through each access point: enough that both
// brokers' queues come up many times, few enough that a run through an access point that waits out
// every attempt on the paused broker stays well within the name server's 120 s before it drops
// the silent broker (after that both access points would route around it alike).
const blackHoleSends = 24

// TestGRPCBlackHoledBrokerDetourBesideTheProxy pauses (SIGSTOP: a black hole) one of two real
// 5.5.0 brokers and runs RocketMQ 5's gRPC SDK (rocketmq-client-java 5.2.0, defaults but the
// endpoint: TLS on, three attempts, 3 s per request) twice in one run against the same cluster:
// once through detour's gRPC endpoint (the Detour policy), once through the manager serving the
// whole cluster, where the topic is undeclared (its Cluster's Detour policy), and once through the
// real RocketMQ 5.5.0 Proxy in cluster mode (its defaults). It logs, for each, the failed sends and the p50, p99 and
// maximum send latency. It asserts only what must hold for detour: every send detour acknowledged
// is stored, and detour fails no more sends than the Proxy. Latency is reported, never asserted.
func TestGRPCBlackHoledBrokerDetourBesideTheProxy(t *testing.T) {
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
	rt := newRuntime(t, c, grpcBlackHoleTopic, 2, detourPolicy("detour"))
	detourAddr := serveGRPC(t, rt, selfSignedTLS(t), nil)
	// The manager serving the whole cluster, where the topic is undeclared (its Cluster's Detour
	// policy governs it).
	wholeAddr := startManagerServingTheCluster(t, c, grpcBlackHoleTopic).endpoint
	px := c.StartProxy(rmqtest.ProxyOptions{})
	dir := t.TempDir()
	// The Proxy learns the topic's route while both brokers answer, as a Proxy already serving the
	// topic when a broker goes bad has it; its first look at a topic during the black hole can
	// outlast the SDK's 3 s route query, and the SDK then never starts (seen once on a loaded run).
	warm, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if route, err := px.QueryRoute(warm, grpcBlackHoleTopic); err != nil || route.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("the Proxy's route of %s before the black hole: %v, %v", grpcBlackHoleTopic, route.GetStatus(), err)
	}
	// The manager has served the undeclared topic's route too (startManagerServingTheCluster
	// waits for it): a topic in use when its broker goes bad.

	paused := c.Brokers()[1]
	paused.Pause()
	pausedAt := time.Now()
	runs := []struct {
		via, addr string
		run       rmqtest.GRPCRun
	}{{via: "detour", addr: detourAddr}, {via: "undeclared", addr: wholeAddr}, {via: "proxy", addr: px.Addr}}
	for i := range runs {
		runs[i].run = rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: runs[i].addr, Topic: grpcBlackHoleTopic,
			Normal: blackHoleSends, Timeout: 3 * time.Minute})
		if n := len(runs[i].run.Sends); n != blackHoleSends {
			t.Fatalf("through %s the SDK reported %d sends, want %d; its log ends:\n%s", runs[i].via, n, blackHoleSends, runs[i].run.Log)
		}
	}
	blackHole := time.Since(pausedAt)
	paused.Resume()

	failed := map[string]int{}
	var receipts []rmqtest.GRPCSend
	for _, r := range runs {
		s := summarize(r.run.Sends)
		failed[r.via] = s.failed
		t.Logf("through %s with %s black-holed: %d of %d sends failed; latency p50 %v, p99 %v, slowest %v; %d sends took over 1 s",
			r.via, paused.Name, s.failed, len(r.run.Sends), s.p50, s.p99, s.slowest, s.overSecond)
		if s.firstError != "" {
			t.Logf("through %s the first failure: %s", r.via, s.firstError)
		}
		for _, snd := range r.run.Sends {
			if snd.OK {
				receipts = append(receipts, snd)
			}
		}
	}
	t.Logf("the black hole lasted %v", blackHole.Round(time.Second))

	// Resumed, the paused broker answers what the kernel buffered: it may store sends that timed
	// out, so the topic holds at least the receipts, not exactly them.
	stored := map[string]bool{}
	for _, m := range c.Consume(t, context.Background(), grpcBlackHoleTopic, len(receipts), 2*time.Minute) {
		stored[m.MsgID] = true
	}
	lost := map[string]int{}
	for _, r := range runs {
		for _, snd := range r.run.Sends {
			if snd.OK && !stored[snd.MsgID] {
				lost[r.via]++
				if r.via != "proxy" {
					t.Errorf("detour acknowledged %s (receipt %s) but it is not stored", snd.Body, snd.MsgID)
				}
			}
		}
	}
	t.Logf("receipts not stored: detour %d, undeclared %d, proxy %d", lost["detour"], lost["undeclared"], lost["proxy"])
	for _, via := range []string{"detour", "undeclared"} {
		if failed[via] > failed["proxy"] {
			t.Errorf("%s failed %d sends, the Proxy %d: detour must fail no more", via, failed[via], failed["proxy"])
		}
	}
}

// sendSummary is what a run of the SDK's producer came to: failed sends, the first failure, the
// nearest-rank percentiles of how long a send took and how many took over a second.
type sendSummary struct {
	failed, overSecond int
	firstError         string
	p50, p99, slowest  time.Duration
}

// summarize counts the failed sends and ranks how long each send took.
func summarize(sends []rmqtest.GRPCSend) sendSummary {
	var s sendSummary
	took := make([]time.Duration, 0, len(sends))
	for _, snd := range sends {
		took = append(took, snd.Took())
		if snd.Took() > time.Second {
			s.overSecond++
		}
		if !snd.OK {
			s.failed++
			if s.firstError == "" {
				s.firstError = snd.Error
			}
		}
	}
	if len(took) == 0 {
		return s
	}
	slices.Sort(took)
	s.p50, s.p99, s.slowest = rank(took, 50), rank(took, 99), took[len(took)-1]
	return s
}

// rank is the nearest-rank percentile p of sorted.
func rank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100
	return sorted[max(i, 1)-1]
}
