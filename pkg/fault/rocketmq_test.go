package fault

import (
	"testing"
	"time"
)

// Tests in this file re-derive RocketMQ's own cases (LatencyFaultToleranceImplTest, the proxy's
// selector pipeline test and the rules of MQFaultStrategy.updateFaultItem) through this package's
// API. RocketMQ's tests pass an isolation duration directly; here a one-rule table maps the test's
// latency to that duration.

func tableOf(t testing.TB, failure int64, rules ...Rule) *Table {
	t.Helper()
	tab, err := NewTable(rules, failure)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// testUpdateFaultItem: update(A, 3000, 3000, reachable) makes A unavailable; B has no item and is
// available.
func TestUpdateIsolatesForTheTablesDuration(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Table: tableOf(t, 10000, Rule{3000, 3000})})
	tol.Update("BrokerA", ms(3000), Success)
	wantAvailable(t, tol, map[string]bool{"BrokerA": false, "BrokerB": true})
	clk.Advance(ms(2999))
	wantAvailable(t, tol, map[string]bool{"BrokerA": false})
	clk.Advance(ms(1))
	wantAvailable(t, tol, map[string]bool{"BrokerA": true})
	if got := tol.Brokers(); len(got) != 1 || got[0] != "BrokerA" {
		t.Errorf("Brokers() = %v, want [BrokerA]: availability checks must not create items", got)
	}
}

// testIsAvailable: update(A, 3000, 50) is unavailable now and available 50 ms later.
func TestIsolationEndsWhenItsTimeRunsOut(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Table: tableOf(t, 10000, Rule{3000, 50})})
	tol.Update("BrokerA", ms(3000), Success)
	if tol.Available("BrokerA") {
		t.Fatal("BrokerA available right after a 3000 ms send")
	}
	clk.Advance(ms(50))
	if !tol.Available("BrokerA") {
		t.Fatal("BrokerA still unavailable after its 50 ms isolation")
	}
}

// testRemove: a removed broker is available again.
func TestRemoveMakesBrokerAvailable(t *testing.T) {
	tol, _, _ := newTol(t, Options{Table: tableOf(t, 10000, Rule{3000, 3000})})
	tol.Update("BrokerA", ms(3000), Success)
	wantAvailable(t, tol, map[string]bool{"BrokerA": false})
	tol.Remove("BrokerA")
	wantAvailable(t, tol, map[string]bool{"BrokerA": true})
	if _, ok := tol.Lookup("BrokerA"); ok {
		t.Error("BrokerA still known after Remove")
	}
}

// testIsReachable: update(A, 1000, 3000, true) is reachable, update(B, 1001, 3000, false) is not.
func TestReachableFlagFollowsTheUpdate(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	tol.Update("BrokerA", ms(1000), Success)
	tol.Update("BrokerB", ms(1001), BrokerError)
	if !tol.Reachable("BrokerA") || !tol.Entry("BrokerA").Reachable() {
		t.Error("BrokerA unreachable after a success")
	}
	if tol.Reachable("BrokerB") || tol.Entry("BrokerB").Reachable() {
		t.Error("BrokerB reachable after a broker error")
	}
	if !tol.Reachable("BrokerC") {
		t.Error("unknown BrokerC unreachable")
	}
}

// The proxy's SendMessageActivityTest.testSendNormalMessageQueueSelectorPipeLine: both brokers
// isolated for 10 s, one reachable and one not; flipping the flags flips which is reachable,
// because every update overwrites the flag.
func TestIsolatedBrokersKeepTheirOwnReachableFlag(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	tol.Update("B2", ms(1000), TransportError) // isolation=true, reachable=true
	tol.Update("B1", ms(1000), BrokerError)    // isolation=true, reachable=false
	wantAvailable(t, tol, map[string]bool{"B1": false, "B2": false})
	for _, b := range []string{"B1", "B2"} {
		if got := mustLookup(t, tol, b).Until; !got.Equal(t0.Add(10 * time.Second)) {
			t.Errorf("%s until %v, want t0+10s", b, got)
		}
	}
	if !tol.Reachable("B2") || tol.Reachable("B1") {
		t.Fatalf("reachable B1=%v B2=%v, want false/true", tol.Reachable("B1"), tol.Reachable("B2"))
	}
	tol.Update("B2", ms(1000), BrokerError)
	tol.Update("B1", ms(1000), TransportError)
	if tol.Reachable("B2") || !tol.Reachable("B1") {
		t.Fatalf("after flipping: reachable B1=%v B2=%v, want true/false", tol.Reachable("B1"), tol.Reachable("B2"))
	}
}

// The table of section 1.7: how each outcome isolates and sets the reachable flag.
func TestOutcomesMatchRocketMQ5(t *testing.T) {
	tests := []struct {
		name      string
		probing   bool
		latency   time.Duration
		outcome   Outcome
		isolation time.Duration
		reachable bool
		reason    Reason
		failures  int
	}{
		{"fast success", false, ms(10), Success, 0, true, "", 0},
		{"slow success", false, ms(600), Success, ms(2000), true, ReasonSlowSend, 0},
		{"very slow success", false, ms(16000), Success, ms(30000), true, ReasonSlowSend, 0},
		{"fast client error", false, ms(10), ClientError, 0, true, "", 0},
		{"slow client error uses measured latency", false, ms(6000), ClientError, ms(10000), true, ReasonSlowSend, 0},
		{"transport error", false, ms(3), TransportError, ms(10000), true, ReasonSendFailed, 1},
		{"transport error while probing", true, ms(3), TransportError, ms(10000), false, ReasonSendFailed, 1},
		{"broker error", false, ms(20), BrokerError, ms(10000), false, ReasonBrokerError, 1},
		{"slow broker error counts the failure latency only", false, ms(16000), BrokerError, ms(10000), false, ReasonBrokerError, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tol, _, _ := newTol(t, Options{Probing: tc.probing})
			tol.Update("A", tc.latency, tc.outcome)
			it := mustLookup(t, tol, "A")
			var want time.Time
			if tc.isolation > 0 {
				want = t0.Add(tc.isolation)
			}
			if !it.Until.Equal(want) {
				t.Errorf("Until = %v, want %v", it.Until, want)
			}
			if it.Reachable != tc.reachable {
				t.Errorf("Reachable = %v, want %v", it.Reachable, tc.reachable)
			}
			if it.Reason != tc.reason {
				t.Errorf("Reason = %q, want %q", it.Reason, tc.reason)
			}
			if it.ConsecutiveFailures != tc.failures {
				t.Errorf("ConsecutiveFailures = %d, want %d", it.ConsecutiveFailures, tc.failures)
			}
			if it.Latency != tc.latency {
				t.Errorf("Latency = %v, want the measured %v", it.Latency, tc.latency)
			}
			wantAvailable(t, tol, map[string]bool{"A": tc.isolation == 0 && (tc.reachable || !tc.probing)})
		})
	}
}

// updateNotAvailableDuration only extends: shorter isolations and fast successes leave the end
// alone; a longer one moves it.
func TestIsolationOnlyExtends(t *testing.T) {
	tol, clk, _ := newTol(t, Options{})
	until := func() time.Time { return mustLookup(t, tol, "A").Until }

	tol.Update("A", ms(3000), Success) // 6 s
	if !until().Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("until %v, want t0+6s", until())
	}
	clk.Advance(time.Second)
	tol.Update("A", ms(600), Success) // would end at t0+3s
	tol.Update("A", ms(10), Success)  // would end now: 4.x did that, 5.x does not
	tol.Update("A", ms(10), ClientError)
	if !until().Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("a shorter isolation moved until to %v", until())
	}
	if tol.Available("A") {
		t.Fatal("a fast success ended an active isolation")
	}
	if got := mustLookup(t, tol, "A").Reason; got != ReasonSlowSend {
		t.Errorf("reason %q, want SlowSend from the update that set the end", got)
	}
	tol.Update("A", ms(5), TransportError) // t0+1s+10s
	if !until().Equal(t0.Add(11 * time.Second)) {
		t.Fatalf("until %v, want t0+11s", until())
	}
	if got := mustLookup(t, tol, "A").Reason; got != ReasonSendFailed {
		t.Errorf("reason %q, want SendFailed", got)
	}
	tol.Update("A", ms(15000), Success) // t0+1s+30s
	if !until().Equal(t0.Add(31 * time.Second)) {
		t.Fatalf("until %v, want t0+31s", until())
	}
	if got := mustLookup(t, tol, "A").Reason; got != ReasonSlowSend {
		t.Errorf("reason %q, want SlowSend", got)
	}
	clk.Advance(30 * time.Second)
	if !tol.Available("A") {
		t.Error("A unavailable after its isolation ended")
	}
}

// Every update overwrites the reachable flag, as LatencyFaultToleranceImpl does.
func TestReachableFlagIsOverwrittenByEveryUpdate(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	steps := []struct {
		outcome Outcome
		want    bool
	}{
		{Success, true}, {BrokerError, false}, {TransportError, true}, {BrokerError, false},
		{ClientError, true}, {BrokerError, false}, {Success, true},
	}
	for i, s := range steps {
		tol.Update("A", ms(1), s.outcome)
		if got := tol.Reachable("A"); got != s.want {
			t.Errorf("step %d (%v): Reachable = %v, want %v", i, s.outcome, got, s.want)
		}
	}
}

// Since 5.2.0 (#7812) availability ignores the reachable flag: a broker that returned an error
// is available again when its isolation ends, though still unreachable.
func TestUnreachableBrokerBecomesAvailableWithoutProbing(t *testing.T) {
	tol, clk, _ := newTol(t, Options{})
	tol.Update("A", ms(20), BrokerError)
	clk.Advance(10 * time.Second)
	wantAvailable(t, tol, map[string]bool{"A": true})
	if tol.Reachable("A") {
		t.Error("A reachable though nothing proved it")
	}
}

// RocketMQ 4.x's table under 5.x rules (a custom policy, not the RocketMQ4 preset, which also
// takes 4.x's rules): a failure isolates for ten minutes, and updates only extend.
func TestRocketMQ4TableUnder5xRulesIsolatesFailuresForTenMinutesAndOnlyExtends(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Table: mustPreset(t, PresetRocketMQ4)})
	tol.Update("A", ms(1), TransportError)
	clk.Advance(time.Minute)
	tol.Update("A", ms(1), Success)
	if tol.Available("A") {
		t.Fatal("A available a minute into a ten-minute isolation")
	}
	clk.Advance(9*time.Minute - time.Nanosecond)
	if tol.Available("A") {
		t.Fatal("A available before ten minutes passed")
	}
	clk.Advance(time.Nanosecond)
	if !tol.Available("A") {
		t.Fatal("A unavailable after ten minutes")
	}
}

func TestConfigureSwitchesPolicyAndKeepsLearntState(t *testing.T) {
	tol, clk, _ := newTol(t, Options{})
	tol.Update("A", ms(1), TransportError) // 10 s under RocketMQ5
	tol.Update("B", ms(20), BrokerError)
	before := mustLookup(t, tol, "A")
	tol.Configure(Options{Table: mustPreset(t, PresetRocketMQ4)})
	if after := mustLookup(t, tol, "A"); after != before {
		t.Errorf("Configure changed A: %+v -> %+v", before, after)
	}
	if tol.Reachable("B") {
		t.Error("Configure reset B's reachable flag")
	}
	tol.Update("C", ms(1), TransportError)
	if got := mustLookup(t, tol, "C").Until; !got.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("C until %v, want t0+10m under the new table", got)
	}
	clk.Advance(10 * time.Second)
	wantAvailable(t, tol, map[string]bool{"A": true, "C": false})
	if got := tol.Options().Table.FailureLatency(); got != 30*time.Second {
		t.Errorf("Options().Table failure latency %v, want 30s", got)
	}
}

func TestUnknownOutcomeIsIgnored(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	tol.Update("A", ms(20000), Outcome(42))
	tol.Update("A", ms(20000), Outcome(-1))
	if _, ok := tol.Lookup("A"); ok {
		t.Error("an unknown outcome created an item")
	}
	if got := Outcome(42).String(); got != "Outcome(42)" {
		t.Errorf("String() = %q", got)
	}
}
