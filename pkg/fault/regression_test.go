package fault

import (
	"testing"
	"time"
)

// Regression tests for the findings of the fault-semantics audit of 2026-11: each proves the
// behaviour that replaced a deviation from RocketMQ or from this package's documentation.

// RocketMQ 4.x isolates a broker after a client-side failure (MQClientException) for the failure
// latency's 600 s, as sendDefaultImpl of 4.9.8 calls updateFaultItem(broker, latency, true).
func TestRocketMQ4IsolatesClientErrorsForTenMinutes(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4, Table: mustPreset(t, PresetRocketMQ4)})
	tol.Update("A", 5*time.Millisecond, ClientError)
	if tol.Available("A") {
		t.Fatal("A available right after a client error")
	}
	clk.Advance(10*time.Minute - time.Millisecond)
	if tol.Available("A") {
		t.Fatal("A available before ten minutes")
	}
	clk.Advance(time.Millisecond)
	if !tol.Available("A") {
		t.Fatal("A unavailable after ten minutes")
	}
}

// GrowOnRepeat, as documented: the isolation of each new failure episode doubles, is capped at
// the table's longest isolation (so RocketMQ4's table, whose failure isolation already is its
// longest, never grows), and successes between episodes do not reset the count.
func TestGrowthIsCappedAtTheTablesMaximumAndNotResetBySuccesses(t *testing.T) {
	tests := []struct {
		preset string
		want   []time.Duration
	}{
		{PresetRocketMQ5, []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}},
		{PresetRocketMQ4, []time.Duration{10 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			tol, clk, _ := newTol(t, Options{Table: mustPreset(t, tc.preset), GrowOnRepeat: true})
			for i, want := range tc.want {
				tol.Update("A", 0, TransportError)
				it := mustLookup(t, tol, "A")
				if got := it.Until.Sub(clk.Now()); got != want {
					t.Errorf("episode %d isolated for %v, want %v", i+1, got, want)
				}
				clk.Set(it.Until)                          // the isolation runs out
				tol.Update("A", time.Millisecond, Success) // a success before the next failure
			}
		})
	}
}

// computeNotAvailableDuration's boundaries: a latency at a threshold takes that threshold's
// isolation (>=), one millisecond below takes the one before, for both presets' tables.
func TestThresholdBoundariesOfBothPresets(t *testing.T) {
	tab5, tab4 := mustPreset(t, PresetRocketMQ5), mustPreset(t, PresetRocketMQ4)
	tests := []struct{ ms, want5, want4 int64 }{
		{-1, 0, 0}, {49, 0, 0}, {50, 0, 0}, {549, 0, 0}, {550, 2000, 30000}, {999, 2000, 30000},
		{1000, 2000, 60000}, {1799, 2000, 60000}, {1800, 5000, 60000}, {2000, 5000, 120000},
		{2999, 5000, 120000}, {3000, 6000, 180000}, {4999, 6000, 180000}, {5000, 10000, 180000},
		{14999, 10000, 180000}, {15000, 30000, 600000}, {30000, 30000, 600000},
	}
	for _, tc := range tests {
		d := time.Duration(tc.ms) * time.Millisecond
		if got := tab5.IsolationFor(d).Milliseconds(); got != tc.want5 {
			t.Errorf("RocketMQ5 %d ms isolates %d ms, want %d", tc.ms, got, tc.want5)
		}
		if got := tab4.IsolationFor(d).Milliseconds(); got != tc.want4 {
			t.Errorf("RocketMQ4 %d ms isolates %d ms, want %d", tc.ms, got, tc.want4)
		}
	}
	if tab5.FailureIsolation() != 10*time.Second || tab4.FailureIsolation() != 10*time.Minute {
		t.Errorf("failure isolation RocketMQ5 %v, RocketMQ4 %v", tab5.FailureIsolation(), tab4.FailureIsolation())
	}
}

// A policy restored after a restart knows only the brokers its status names; a cap computed over
// those alone would release them. The isolations stay until the route makes the other brokers
// known, and the cap then applies over all of them.
func TestRestoreIntoAFreshTableKeepsIsolationsUntilTheBrokersAreKnown(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50})
	tol.Restore([]Item{{Broker: "A", Reason: ReasonSlowSend, Until: t0.Add(time.Minute), Reachable: true}})
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.Entry("B")
	tol.Entry("C")
	wantAvailable(t, tol, map[string]bool{"A": false, "B": true, "C": true})

	tol2, _, _ := newTol(t, Options{MaxIsolatedPercent: 50})
	tol2.Restore([]Item{
		{Broker: "A", Reason: ReasonSendFailed, Until: t0.Add(time.Minute), Reachable: true, ConsecutiveFailures: 3},
		{Broker: "B", Reason: ReasonSlowSend, Until: t0.Add(time.Minute), Reachable: true},
	})
	wantAvailable(t, tol2, map[string]bool{"A": false, "B": false})
	tol2.Entry("C") // three known: at most one isolated, and B is the least bad
	wantAvailable(t, tol2, map[string]bool{"A": false, "B": true, "C": true})
}

// Re-applying the same options (a controller re-pushing an unchanged policy) releases nothing, so
// a restored isolation survives until the brokers the policy governs are known; a new cap is
// enforced at once.
func TestConfigureEnforcesTheCapOnlyWhenTheChangeCouldBreakIt(t *testing.T) {
	opts := Options{MaxIsolatedPercent: 50}
	tol, _, _ := newTol(t, opts)
	tol.Restore([]Item{{Broker: "A", Reason: ReasonSlowSend, Until: t0.Add(time.Minute), Reachable: true}})
	tol.Configure(opts)
	wantAvailable(t, tol, map[string]bool{"A": false})
	opts.MaxIsolatedPercent = 40
	tol.Configure(opts) // one broker known: the cap keeps none of it isolated
	wantAvailable(t, tol, map[string]bool{"A": true})
}
