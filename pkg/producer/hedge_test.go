package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
)

// withHedging turns hedging on in the test policy with a budget of percent.
func withHedging(percent int) clusterOpt {
	return withPolicy(func(p *Policy) { p.Hedge = HedgePolicy{Enabled: true, BudgetPercent: percent} })
}

// warmUp sends n messages to the healthy cluster, so every broker has a usual latency and the
// hedge budget has earned n sends' share.
func warmUp(t *testing.T, c *simCluster, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := c.send(t, "warm"); err != nil {
			t.Fatal(err)
		}
	}
}

// A send whose broker answers far later than it usually does is answered by its hedge on another
// broker; the slow broker still stores its copy, under the same UNIQ_KEY, and its late success
// reaches the fault table with the latency it took.
func TestHedgeWinsAgainstASlowBroker(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withHedging(50))
	warmUp(t, c, 20)
	const delay = 400 * time.Millisecond
	c.brokers["broker-a"].SetFault(brokersim.Fault{Delay: delay})
	var won *SendResult
	for i := 0; i < 10 && won == nil; i++ {
		res, err := c.send(t, "hedged")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.BrokersTried) == 2 && res.BrokersTried[0] == "broker-a" {
			won = res
		}
	}
	if won == nil {
		t.Fatal("no send to the slow broker was hedged")
	}
	if won.Broker != "broker-b" || c.rec.hedgeCount(HedgeWon) < 1 {
		t.Fatalf("the hedge should answer the send: %+v, won %d", won, c.rec.hedgeCount(HedgeWon))
	}
	waitFor(t, "the slow broker's copy", func() bool { return c.rec.hedgeCount(HedgeCopyStored) >= 1 })
	copies := c.storedByUniq()[won.MsgID]
	if len(copies) != 2 {
		t.Fatalf("message %s stored on %v; want one copy on each broker", won.MsgID, copies)
	}
	var late bool
	for _, a := range c.rec.snapshotAttempts() {
		late = late || (a.broker == "broker-a" && a.outcome == fault.Success && a.latency >= delay)
	}
	if !late {
		t.Fatal("the slow broker's late success never reached the fault table")
	}
}

// Ordered sends, transactions' half messages and oneway sends are never hedged, however slow their
// broker, while a single message, a batch or a delayed message in the same state is; the RocketMQ presets refuse hedging outright
// and never turn it on.
func TestHedgeNeverForFIFOTransactionsOrRocketMQPresets(t *testing.T) {
	ctx := context.Background()
	msg := func() *Message { return &Message{Topic: testTopic, Body: []byte("x")} }
	sends := []struct {
		name   string
		send   func(r *Runtime) error
		hedges int
	}{
		{"plain", func(r *Runtime) error { _, err := r.SendRoute(ctx, testTopic, msg()); return err }, 1},
		{"batch", func(r *Runtime) error { _, err := r.SendBatchRoute(ctx, testTopic, batchOf(testTopic, 3)); return err }, 1},
		{"delayed", func(r *Runtime) error {
			_, err := r.SendTimedRoute(ctx, testTopic, msg(), time.Now().Add(time.Minute))
			return err
		}, 1},
		{"ordered", func(r *Runtime) error { _, err := r.SendOrderedRoute(ctx, testTopic, msg(), "group-1"); return err }, 0},
		{"transaction's half", func(r *Runtime) error {
			_, err := r.SendTransactionRoute(ctx, testTopic, msg(), "tx-group")
			return err
		}, 0},
		{"oneway", func(r *Runtime) error { return r.SendOneway(ctx, msg()) }, 0},
	}
	for _, s := range sends {
		t.Run(s.name, func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withHedging(50))
			warmUp(t, c, 20)
			for _, b := range c.brokers {
				b.SetFault(brokersim.Fault{Delay: 300 * time.Millisecond})
			}
			if err := s.send(c.r); err != nil {
				t.Fatal(err)
			}
			if n := c.rec.hedgeCount(HedgeSent); n != s.hedges {
				t.Fatalf("a %s send to a slow broker made %d hedges; want %d", s.name, n, s.hedges)
			}
		})
	}
	r := New(Options{})
	defer r.Close()
	for _, preset := range []Preset{PresetRocketMQ5, PresetRocketMQ4, PresetDisabled} {
		p := mustPresetPolicy(t, "rmq", preset)
		if p.Hedge.Enabled {
			t.Errorf("preset %s hedges", preset)
		}
		p.Hedge.Enabled = true
		if err := r.SetPolicy(p); err == nil {
			t.Errorf("preset %s accepted hedging", preset)
		}
	}
}

// When every broker turns slow at once, every send wants a hedge; the budget keeps them to its
// share of all sends.
func TestHedgeBudgetHoldsWhenEveryBrokerIsSlow(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withHedging(DefaultHedgeBudgetPercent))
	const warm, slow = 100, 60
	warmUp(t, c, warm)
	for _, b := range c.brokers {
		b.SetFault(brokersim.Fault{Delay: 150 * time.Millisecond})
	}
	var wg sync.WaitGroup
	errs := make(chan error, slow)
	for i := 0; i < slow; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("slow")})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sent := c.rec.hedgeCount(HedgeSent)
	if share := (warm + slow) * DefaultHedgeBudgetPercent / 100; sent < 1 || sent > share {
		t.Fatalf("%d hedges for %d sends; want 1..%d", sent, warm+slow, share)
	}
	// Every other slow send wanted a hedge and was told the budget was spent, which is what
	// the metric and its alert say.
	if spent := c.rec.hedgeCount(HedgeBudgetSpent); spent < slow-sent {
		t.Fatalf("%d sends told the budget was spent, %d hedged, of %d slow sends; want every unhedged one told", spent, sent, slow)
	}
}

// The budget earns a share of a hedge per send and spends a whole one per hedge, saving up at most
// hedgeBurst: hedges never outnumber the share of the sends that came before them.
func TestHedgeBudgetIsAShareOfSends(t *testing.T) {
	cases := []struct {
		name           string
		percent, sends int
		want           int
	}{
		{name: "2 % of 100 sends", percent: 2, sends: 100, want: 2},
		{name: "2 % of 49 sends", percent: 2, sends: 49, want: 0},
		{name: "50 % of 10 sends", percent: 50, sends: 10, want: 5},
		{name: "a long quiet spell saves at most the burst", percent: 50, sends: 1000, want: hedgeBurst / hedgeCost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b hedgeBudget
			for i := 0; i < tc.sends; i++ {
				b.earn(tc.percent)
			}
			got := 0
			for b.spend() {
				got++
			}
			if got != tc.want {
				t.Fatalf("%d hedges; want %d", got, tc.want)
			}
		})
	}
}

// With hedging off (every preset's default) a send to a slow broker waits for it, as before: no
// hedge, no second copy, and the policy's behaviour reads as its preset's.
func TestHedgingOffChangesNothing(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"})
	warmUp(t, c, 20)
	c.brokers["broker-a"].SetFault(brokersim.Fault{Delay: 100 * time.Millisecond})
	for i := 0; i < 4; i++ {
		res, err := c.send(t, "unhedged")
		if err != nil {
			t.Fatal(err)
		}
		if len(res.BrokersTried) != 1 {
			t.Fatalf("a send without hedging tried %v", res.BrokersTried)
		}
	}
	if n := c.rec.hedgeCount(HedgeSent); n != 0 {
		t.Fatalf("%d hedges with hedging off", n)
	}
	if c.stored() != 24 {
		t.Fatalf("%d messages stored for 24 sends", c.stored())
	}
	if b := DefaultPolicy("d").Behavior(); b != string(PresetDetour) {
		t.Fatalf("the Detour preset's behaviour reads %q", b)
	}
}

// A send armed for a hedge that never fires (a fast broker, a budget too small to spend) allocates
// at most two objects more than the same send with hedging off.
func TestHedgeArmedAllocatesAtMostTwoMore(t *testing.T) {
	allocs := func(opts ...clusterOpt) float64 {
		c := startCluster(t, 2, []string{"broker-a", "broker-b"}, opts...)
		warmUp(t, c, 20)
		m := &Message{Topic: testTopic, Body: []byte("allocs")}
		return testing.AllocsPerRun(40, func() {
			if _, err := c.r.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		})
	}
	off, armed := allocs(), allocs(withHedging(1))
	t.Logf("allocations per send: %.0f with hedging off, %.0f armed", off, armed)
	if armed > off+2 {
		t.Fatalf("a send allocates %.0f objects with hedging off, %.0f armed", off, armed)
	}
}
