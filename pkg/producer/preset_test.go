package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// plainPolicy is the Detour preset with probing, growth, the isolation limit and the attempt deadline
// off: RocketMQ 5.x's table and rules with Detour's selection and pod health. Tests of the send
// loop and of selection use it so that each extension they do not test stays out of the way.
func plainPolicy(name string) Policy {
	p := DefaultPolicy(name)
	p.Probe.Enabled = false
	p.GrowOnRepeat = false
	p.MaxIsolatedPercent = 0
	p.Retry.PerAttemptTimeout = 0
	return p
}

func mustPresetPolicy(t testing.TB, name string, preset Preset) Policy {
	t.Helper()
	p, err := PresetPolicy(name, preset)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// neverIsolating is a table under which no outcome isolates, so tests of retry rules see every
// attempt reach the broker under test.
func neverIsolating(t testing.TB) *fault.Table {
	tab, err := fault.NewTable([]fault.Rule{{LatencyMillis: fault.MaxMillis, IsolationMillis: 0}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// withPreset makes the test topic's policy the preset's, then lets edit change it.
func withPreset(t testing.TB, preset Preset, edit func(*Policy)) clusterOpt {
	return withPolicy(func(p *Policy) {
		*p = mustPresetPolicy(t, "test", preset)
		if edit != nil {
			edit(p)
		}
	})
}

func TestPresetPoliciesAreWholeBehaviours(t *testing.T) {
	tests := []struct {
		preset                                Preset
		failureIsolation                      time.Duration
		codes                                 []int16
		probing, growth, pods                 bool
		maxIsolated                           int
		perAttempt                            time.Duration
		semantics                             fault.Semantics
		onewayAttempts, asyncAttempts         int
		asyncRetriesCodes, onewayRetriesWrite bool
	}{
		{PresetDetour, 10 * time.Second, DefaultRetryCodes, true, true, true, 99, time.Second, fault.SemanticsRocketMQ5, 3, 3, true, true},
		{PresetRocketMQ5, 10 * time.Second, DefaultRetryCodes, false, false, false, 0, 0, fault.SemanticsRocketMQ5, 1, 3, false, false},
		{PresetRocketMQ4, 10 * time.Minute, RocketMQ4RetryCodes, false, false, false, 0, 0, fault.SemanticsRocketMQ4, 1, 3, false, false},
		{PresetDisabled, 10 * time.Second, DefaultRetryCodes, false, false, false, 0, 0, fault.SemanticsDisabled, 1, 3, false, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.preset), func(t *testing.T) {
			p := mustPresetPolicy(t, "p", tc.preset)
			if p.Table.FailureIsolation() != tc.failureIsolation || !slices.Equal(p.Retry.RetryOnCodes, tc.codes) ||
				p.Probe.Enabled != tc.probing || p.GrowOnRepeat != tc.growth || p.RespectPodHealth != tc.pods ||
				p.MaxIsolatedPercent != tc.maxIsolated || p.Retry.PerAttemptTimeout != tc.perAttempt ||
				p.Retry.Attempts != DefaultAttempts || p.Retry.SendTimeout != DefaultSendTimeout {
				t.Errorf("policy %+v", p)
			}
			if got := p.Preset.semantics(); got != tc.semantics {
				t.Errorf("semantics %v, want %v", got, tc.semantics)
			}
			if got := p.Behavior(); got != string(tc.preset) {
				t.Errorf("Behavior() = %q, want %q", got, tc.preset)
			}
			oneway, async := retryRulesOf(&p, ModeOneway), retryRulesOf(&p, ModeAsync)
			if oneway.attempts != tc.onewayAttempts || async.attempts != tc.asyncAttempts || async.async == tc.asyncRetriesCodes {
				t.Errorf("oneway %+v, async %+v", oneway, async)
			}
		})
	}
	if _, err := PresetPolicy("p", "Off"); err == nil {
		t.Error("PresetPolicy accepted an unknown preset")
	}
	r := New(Options{})
	defer r.Close()
	if p, _ := r.Policy(""); p.Behavior() != "Detour" || p.Preset != PresetDetour {
		t.Errorf("the runtime's default policy is %q (%+v), want Detour's", p.Behavior(), p)
	}
	if err := r.SetPolicy(Policy{Name: "bad", Preset: "Off"}); err == nil {
		t.Error("SetPolicy accepted an unknown preset")
	}
}

func TestBehaviorNamesEveryOverride(t *testing.T) {
	custom, err := fault.NewTable([]fault.Rule{{LatencyMillis: 100, IsolationMillis: 1000}}, 5000)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		preset Preset
		edit   func(*Policy)
		want   string
	}{
		{PresetRocketMQ5, func(p *Policy) { p.Probe.Enabled = true }, "RocketMQ5+probing"},
		{PresetRocketMQ5, func(p *Policy) { p.Probe.Interval = time.Second }, "RocketMQ5"}, // off either way
		{PresetRocketMQ4, func(p *Policy) { p.RespectPodHealth, p.GrowOnRepeat = true, true }, "RocketMQ4+growth+podHealth"},
		{PresetDetour, func(p *Policy) { p.GrowOnRepeat = false; p.MaxIsolatedPercent = 30 }, "Detour-growth~isolationCap"},
		{PresetDetour, func(p *Policy) { p.MaxIsolatedPercent = 100 }, "Detour-isolationCap"},
		{PresetDetour, func(p *Policy) { p.Probe.Interval = 500 * time.Millisecond }, "Detour~probing"},
		{PresetDetour, func(p *Policy) { p.Retry.PerAttemptTimeout = 0 }, "Detour-perAttemptCap"},
		{PresetDetour, func(p *Policy) { p.Retry.AdaptivePerAttempt = false }, "Detour-adaptiveCap"},
		{PresetDetour, func(p *Policy) { p.StallAfter = 0 }, "Detour-stall"},
		{PresetDetour, func(p *Policy) { p.StallAfter = time.Second }, "Detour~stall"},
		{PresetRocketMQ5, func(p *Policy) { p.StallAfter = 100 * time.Millisecond }, "RocketMQ5+stall"},
		{PresetDetour, func(p *Policy) { p.Probe.Routed = true }, "Detour+watch"},
		{PresetRocketMQ5, func(p *Policy) { p.Probe.Routed = true }, "RocketMQ5"}, // no probing, no watch
		{PresetRocketMQ5, func(p *Policy) { p.Probe.Enabled, p.Probe.Routed = true, true }, "RocketMQ5+probing+watch"},
		{PresetRocketMQ5, func(p *Policy) { p.Retry.PerAttemptTimeout = 400 * time.Millisecond }, "RocketMQ5+perAttemptCap"},
		{PresetRocketMQ5, func(p *Policy) { p.Table = custom }, "RocketMQ5~table"},
		{PresetRocketMQ4, func(p *Policy) { p.Retry.RetryOnCodes = DefaultRetryCodes }, "RocketMQ4~retry"},
		{PresetRocketMQ5, func(p *Policy) { p.Retry.RetryOnCodes = []int16{1500, 205, 204, 16, 2, 1, 14, 17} }, "RocketMQ5"},
		{PresetDisabled, func(p *Policy) { p.Retry.Attempts = 5 }, "Disabled~retry"},
		{PresetDetour, func(p *Policy) { p.Hedge.Enabled = true }, "Detour+hedge"},
		{PresetDetour, func(p *Policy) { p.Hedge = HedgePolicy{Enabled: true, BudgetPercent: 5} }, "Detour+hedge"},
		{PresetDetour, func(p *Policy) { p.Hedge.BudgetPercent = 5 }, "Detour"}, // off either way
	}
	for _, tc := range tests {
		p := mustPresetPolicy(t, "p", tc.preset)
		tc.edit(&p)
		if got := p.Behavior(); got != tc.want {
			t.Errorf("%s edited: Behavior() = %q, want %q", tc.preset, got, tc.want)
		}
	}
}

// RocketMQ 5.x's last selection pass has no filter, so when every broker but the previous one is
// unreachable a retry may go back to the broker that just failed (about a third of the time here,
// by queue count). Detour's extra pass prefers another broker, and says so in its documentation.
func TestRocketMQ5LastPassMayReturnThePreviousBroker(t *testing.T) {
	for _, tc := range []struct {
		preset   Preset
		mayPickA bool
	}{{PresetRocketMQ5, true}, {PresetDetour, false}} {
		t.Run(string(tc.preset), func(t *testing.T) {
			r, _ := newSelectionRuntime(t, 2, "a", "b", "c")
			p := mustPresetPolicy(t, "", tc.preset)
			p.Probe.Enabled, p.MaxIsolatedPercent = false, 0
			if err := r.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
			tol := r.tolerance("")
			tol.Update("a", 0, fault.TransportError) // the attempt that just failed: isolated, reachable
			tol.Update("b", 0, fault.BrokerError)    // isolated, unreachable
			tol.Update("c", 0, fault.BrokerError)
			count := map[string]int{}
			for range 600 {
				q, _ := r.SelectQueue("T", "a")
				count[q.Broker]++
			}
			if got := count["a"] > 100; got != tc.mayPickA {
				t.Fatalf("retries after a: %v", count)
			}
		})
	}
}

// RocketMQ 4.x with every broker isolated falls back to pickOneAtLeast, which with two brokers
// always takes the one with the lower measured latency.
func TestRocketMQ4FallsBackToTheBrokerWithTheLowerLatency(t *testing.T) {
	r, _ := newSelectionRuntime(t, 4, "a", "b")
	if err := r.SetPolicy(mustPresetPolicy(t, "", PresetRocketMQ4)); err != nil {
		t.Fatal(err)
	}
	tol := r.tolerance("")
	tol.Update("a", 800*time.Millisecond, fault.Success)         // slow: 30 s
	tol.Update("b", 3000*time.Millisecond, fault.TransportError) // timed out: 600 s
	for range 400 {
		if q, _ := r.SelectQueue("T", ""); q.Broker != "a" {
			t.Fatalf("picked %v, want broker a every time", q)
		}
	}
}

// RocketMQ 4.x takes one index step per selection and walks from there, so the broker after an
// isolated one absorbs its share (about 2/3 against 1/3 here); RocketMQ 5.x and Detour spend one
// step per probe and split evenly. RocketMQ 4.x also lets a retry return to the previous broker.
func TestRocketMQ4SpreadAndRetriesFollowItsIndexWalk(t *testing.T) {
	for _, tc := range []struct {
		preset Preset
		a, c   int
	}{{PresetRocketMQ4, 400, 800}, {PresetRocketMQ5, 600, 600}, {PresetDetour, 600, 600}} {
		t.Run(string(tc.preset), func(t *testing.T) {
			r, _ := newSelectionRuntime(t, 4, "a", "b", "c")
			if err := r.SetPolicy(mustPresetPolicy(t, "", tc.preset)); err != nil {
				t.Fatal(err)
			}
			r.tolerance("").Update("b", 0, fault.TransportError)
			count := map[string]int{}
			for range 1200 {
				q, _ := r.SelectQueue("T", "")
				count[q.Broker]++
			}
			if count["a"] != tc.a || count["c"] != tc.c {
				t.Fatalf("spread %v, want a %d, c %d", count, tc.a, tc.c)
			}
			back := 0
			for range 100 {
				if q, _ := r.SelectQueue("T", "a"); q.Broker == "a" {
					back++
				}
			}
			if (back > 0) != (tc.preset == PresetRocketMQ4) {
				t.Errorf("%d of 100 retries after a went back to a", back)
			}
		})
	}
}

// RocketMQ makes one attempt for a oneway send (sendDefaultImpl's timesTotal is 1 for ONEWAY), and
// does not wait for its write: RocketMQ 5.x does not even wait for the connection, so a oneway send
// to an unreachable broker returns as sent and is lost; RocketMQ 4.x fails it. Detour retries the
// failed write on another broker, as documented.
func TestOnewaySendsToAnUnreachableBrokerPerPreset(t *testing.T) {
	for _, tc := range []struct {
		preset         Preset
		failed, stored int
	}{
		{PresetRocketMQ5, 0, 10}, {PresetDisabled, 0, 10}, {PresetRocketMQ4, 10, 10}, {PresetDetour, 0, 20},
	} {
		t.Run(string(tc.preset), func(t *testing.T) {
			c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withPreset(t, tc.preset, func(p *Policy) {
				p.Table = neverIsolating(t)
				p.RespectPodHealth, p.Probe.Enabled, p.MaxIsolatedPercent = false, false, 0
			}))
			c.brokers["broker-a"].SetFault(brokersim.Fault{Refuse: true})
			c.r.client.CloseConn(c.brokers["broker-a"].Addr())
			failed := 0
			for i := range 20 {
				err := c.r.SendOneway(context.Background(), &Message{Topic: testTopic, Body: []byte(fmt.Sprint("o", i))})
				var se *SendError
				switch {
				case err == nil:
				case errors.As(err, &se) && se.Attempts == 1 && se.BrokersTried[0] == "broker-a":
					failed++
				default:
					t.Fatalf("oneway: %v", err)
				}
			}
			if failed != tc.failed {
				t.Errorf("%d of 20 oneway sends failed, want %d", failed, tc.failed)
			}
			waitFor(t, "the oneway messages that reached a broker", func() bool { return c.stored() >= tc.stored })
			if got := c.stored(); got != tc.stored {
				t.Errorf("%d oneway messages stored, want %d", got, tc.stored)
			}
		})
	}
}

// RocketMQ's async callback hands a broker's refusal to the caller without a retry (only
// transport failures are retried); Detour retries async sends as sync ones.
func TestAsyncRetriesBrokerCodesOnlyUnderDetour(t *testing.T) {
	for _, preset := range []Preset{PresetRocketMQ5, PresetRocketMQ4, PresetDetour} {
		t.Run(string(preset), func(t *testing.T) {
			c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withPreset(t, preset, func(p *Policy) {
				p.Table = neverIsolating(t)
				p.RespectPodHealth, p.Probe.Enabled, p.MaxIsolatedPercent = false, false, 0
			}))
			c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.ServiceNotAvailable}) // retried by every line
			done := make(chan error, 20)
			for i := range 20 {
				c.r.SendAsync(context.Background(), &Message{Topic: testTopic, Body: []byte(fmt.Sprint("a", i))},
					func(_ *SendResult, err error) { done <- err })
			}
			errs := 0
			for range 20 {
				if err := <-done; err != nil {
					var be *BrokerError
					if !errors.As(err, &be) || be.Code != remoting.ServiceNotAvailable {
						t.Fatalf("async error %v", err)
					}
					errs++
				}
			}
			if want := preset != PresetDetour; (errs > 0) != want {
				t.Fatalf("%d of 20 async sends failed", errs)
			}
			// The async refusal isolates (here: for 0 ms) but keeps broker-a reachable.
			if preset == PresetRocketMQ5 && !c.r.tolerance("test").Reachable("broker-a") {
				t.Error("an async refusal marked broker-a unreachable")
			}
		})
	}
}

// SYSTEM_BUSY and GO_AWAY joined RocketMQ's retried codes in 5.3.0 and 5.3.1: RocketMQ4 fails a
// send the broker refuses as busy at once.
func TestRocketMQ4DoesNotRetrySystemBusyOrGoAway(t *testing.T) {
	for _, tc := range []struct {
		preset Preset
		code   int16
		retry  bool
	}{
		{PresetRocketMQ4, remoting.SystemBusy, false}, {PresetRocketMQ4, remoting.GoAway, false},
		{PresetRocketMQ4, remoting.SystemError, true},
		{PresetRocketMQ5, remoting.SystemBusy, true}, {PresetRocketMQ5, remoting.GoAway, true},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.preset, tc.code), func(t *testing.T) {
			c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withPreset(t, tc.preset, func(p *Policy) { p.Table = neverIsolating(t) }))
			c.brokers["broker-a"].SetFault(brokersim.Fault{Code: tc.code})
			res, err := sendUntilFirstAttemptOn(t, c, "broker-a")
			if tc.retry != (err == nil) {
				t.Fatalf("result %+v, error %v", res, err)
			}
		})
	}
}
