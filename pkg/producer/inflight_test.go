package producer

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
)

// TestAnAttemptsDeadlineFollowsItsBrokersLatency proves the adaptive attempt deadline: under the
// Detour preset an attempt to a broker is given up after fault.AttemptDeadlineFactor times the
// broker's usual latency, at least fault.AttemptDeadlineFloor and at most the policy's
// per-attempt timeout; a broker with no success measured gets the per-attempt timeout; without
// AdaptivePerAttempt (RocketMQ's presets) the deadline is the policy's per-attempt timeout,
// whatever the broker's latency.
func TestAnAttemptsDeadlineFollowsItsBrokersLatency(t *testing.T) {
	fixedTimeout := func(p *Policy) { p.Retry.PerAttemptTimeout = 700 * time.Millisecond }
	cases := []struct {
		name      string
		preset    Preset
		edit      func(*Policy)
		successes []time.Duration
		want      time.Duration
	}{
		{name: "Detour, no success measured yet", preset: PresetDetour, want: DetourPerAttemptTimeout},
		{name: "Detour, a broker answering in a millisecond gets the floor", preset: PresetDetour,
			successes: steady(time.Millisecond, 3), want: fault.AttemptDeadlineFloor},
		{name: "Detour, a broker answering in 100 ms", preset: PresetDetour,
			successes: steady(100*time.Millisecond, 40), want: 400 * time.Millisecond},
		{name: "Detour, a broker slower than the timeout allows keeps the timeout", preset: PresetDetour,
			successes: steady(400*time.Millisecond, 40), want: DetourPerAttemptTimeout},
		{name: "Detour without adaptive deadlines", preset: PresetDetour, edit: func(p *Policy) { p.Retry.AdaptivePerAttempt = false },
			successes: steady(time.Millisecond, 3), want: DetourPerAttemptTimeout},
		{name: "RocketMQ5 with a per-attempt timeout: fixed", preset: PresetRocketMQ5, edit: fixedTimeout,
			successes: steady(time.Millisecond, 3), want: 700 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := mustPresetPolicy(t, "test", tc.preset)
			if tc.edit != nil {
				tc.edit(&pol)
			}
			tol := fault.New(fault.Options{})
			for _, l := range tc.successes {
				tol.Update("broker-a", l, fault.Success)
			}
			c := sendCall{pol: &pol, rules: retryRules{attempts: 3}, remaining: time.Hour}
			got, _ := c.attemptDeadline(0, &brokerSlot{name: "broker-a", entry: tol.Entry("broker-a")})
			if d := got - tc.want; d < -tc.want/50 || d > tc.want/50 {
				t.Errorf("deadline %v, want %v", got, tc.want)
			}
		})
	}
}

// steady is n successes of latency l.
func steady(l time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = l
	}
	return out
}

// TestAnUnansweredBrokerIsHeldOutBeforeItsAttemptTimesOut: under the Detour preset, a broker that
// stops answering (a black hole) is held out as SendStalled while its first unanswered attempt is
// still in flight, long before that attempt's deadline, and every send after that goes to the broker
// that answers.
func TestAnUnansweredBrokerIsHeldOutBeforeItsAttemptTimesOut(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withPreset(t, PresetDetour, func(p *Policy) {
		// Attempts that outlast the test: only the stall can hold broker-b out while one waits.
		p.Retry.SendTimeout = time.Minute
		p.Retry.PerAttemptTimeout = 30 * time.Second
		p.Retry.AdaptivePerAttempt = false
	}))
	for i := range 20 {
		if _, err := c.send(t, "warm"); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	c.brokers["broker-b"].SetFault(brokersim.Fault{BlackHole: true})
	tol := c.r.state.Load().policies["test"].tol
	entry := tol.Entry("broker-b")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// Four sends at once take the four queues of the round robin, two of them broker-b's; they are
	// given up when the test ends.
	for range 4 {
		wg.Go(func() { _, _ = c.r.Send(ctx, &Message{Topic: testTopic, Body: []byte("m")}) })
	}
	waitFor(t, "broker-b held out", func() bool { return !entry.Available() })
	it, _ := tol.Lookup("broker-b")
	if n, wait := entry.InFlight(); it.Reason != fault.ReasonSendStalled || n == 0 {
		t.Fatalf("broker-b held out as %q with %d attempts in flight (oldest %v), want %s while its attempt waits",
			it.Reason, n, wait, fault.ReasonSendStalled)
	}
	for i := range 20 {
		res, err := c.send(t, "after")
		if err != nil || res.Broker != "broker-a" || res.Attempts != 1 {
			t.Fatalf("send %d after the stall: %+v, %v; want it stored by broker-a at once", i, res, err)
		}
	}
}

// TestAnAttemptCutByItsAdaptiveDeadlineIsAStallNotAFailure: under the Detour preset, an attempt
// to a broker that answers later than a few times its usual latency is cut at its adaptive
// deadline, the send is stored by another broker, and the broker is held out as SendStalled with
// no failure counted: a pause is not an outage; metrics count the stall as one. An attempt cut at
// the policy's per-attempt timeout still is a failure, and no stall.
func TestAnAttemptCutByItsAdaptiveDeadlineIsAStallNotAFailure(t *testing.T) {
	cases := []struct {
		name       string
		adaptive   bool
		wantReason fault.Reason
		failures   int
		stalls     []string
	}{
		{name: "adaptive deadline", adaptive: true, wantReason: fault.ReasonSendStalled, failures: 0, stalls: []string{"broker-b"}},
		{name: "the policy's per-attempt timeout", adaptive: false, wantReason: fault.ReasonSendFailed, failures: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withPreset(t, PresetDetour, func(p *Policy) {
				// No probe may change the verdict before it is read.
				p.Probe.Enabled = false
				p.StallAfter = 0
				p.Retry.AdaptivePerAttempt = tc.adaptive
				p.Retry.PerAttemptTimeout = 300 * time.Millisecond
			}))
			for i := range 20 {
				if _, err := c.send(t, "warm"); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			c.brokers["broker-b"].SetFault(brokersim.Fault{Delay: 2 * time.Second})
			var res *SendResult
			for i := 0; i < 8 && (res == nil || res.BrokersTried[0] != "broker-b"); i++ {
				var err error
				if res, err = c.send(t, "m"); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			if res.BrokersTried[0] != "broker-b" || res.Broker != "broker-a" {
				t.Fatalf("last send %+v, want its first attempt on broker-b and the message stored on broker-a", res)
			}
			it, ok := c.r.state.Load().policies["test"].tol.Lookup("broker-b")
			if !ok || it.Reason != tc.wantReason || it.ConsecutiveFailures != tc.failures {
				t.Errorf("broker-b's item %+v, want reason %s and %d failures counted", it, tc.wantReason, tc.failures)
			}
			if got := c.rec.stalled(); !slices.Equal(got, tc.stalls) {
				t.Errorf("stalled attempts reported on %v, want %v", got, tc.stalls)
			}
		})
	}
}
