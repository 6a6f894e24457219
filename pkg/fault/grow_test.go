package fault

import (
	"testing"
	"time"
)

// isolationOf runs one update after every earlier isolation has ended and returns how long it
// isolates the broker.
func isolationOf(t testing.TB, tol *Tolerance, clk *ManualClock, broker string, outcome Outcome) time.Duration {
	t.Helper()
	if it, ok := tol.Lookup(broker); ok && it.Until.After(clk.Now()) {
		clk.Set(it.Until)
	}
	now := clk.Now()
	tol.Update(broker, ms(1), outcome)
	until := mustLookup(t, tol, broker).Until
	if !until.After(now) {
		return 0
	}
	return until.Sub(now)
}

func TestGrowOnRepeatDoublesUpToTheTablesMaximum(t *testing.T) {
	tol, clk, _ := newTol(t, Options{GrowOnRepeat: true})
	// RocketMQ5: a failure isolates for 10 s and the table's longest isolation is 30 s.
	want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		outcome := TransportError
		if i%2 == 1 {
			outcome = BrokerError // both kinds of failure count
		}
		if got := isolationOf(t, tol, clk, "A", outcome); got != w {
			t.Errorf("failure %d isolated for %v, want %v", i+1, got, w)
		}
	}
	if got := mustLookup(t, tol, "A").ConsecutiveFailures; got != len(want) {
		t.Errorf("ConsecutiveFailures = %d, want %d", got, len(want))
	}
}

func TestGrowOnRepeatStopsAtEightTimes(t *testing.T) {
	tab := tableOf(t, 1000, Rule{100, 0}, Rule{1000, 1000}, Rule{MaxMillis, MaxMillis})
	tol, clk, _ := newTol(t, Options{Table: tab, GrowOnRepeat: true})
	want := []time.Duration{1, 2, 4, 8, 8, 8}
	for i, w := range want {
		if got := isolationOf(t, tol, clk, "A", TransportError); got != w*time.Second {
			t.Errorf("failure %d isolated for %v, want %v", i+1, got, w*time.Second)
		}
	}
}

func TestGrowOnRepeatIsResetBySuccessfulSendOnly(t *testing.T) {
	tol, clk, _ := newTol(t, Options{GrowOnRepeat: true, Probing: true})
	isolationOf(t, tol, clk, "A", TransportError)
	tol.ProbeResult("A", true, ms(1))
	tol.Update("A", ms(1), ClientError) // neither a broker failure nor a success
	if got := isolationOf(t, tol, clk, "A", TransportError); got != 20*time.Second {
		t.Fatalf("second failure after a successful probe isolated for %v, want 20s", got)
	}
	tol.Update("A", ms(1), Success)
	if got := mustLookup(t, tol, "A").ConsecutiveFailures; got != 0 {
		t.Fatalf("ConsecutiveFailures = %d after a success, want 0", got)
	}
	if got := isolationOf(t, tol, clk, "A", TransportError); got != 10*time.Second {
		t.Errorf("failure after a success isolated for %v, want 10s", got)
	}
}

func TestIsolationDoesNotGrowWhenGrowOnRepeatIsOff(t *testing.T) {
	tol, clk, _ := newTol(t, Options{})
	for i := range 4 {
		if got := isolationOf(t, tol, clk, "A", TransportError); got != 10*time.Second {
			t.Errorf("failure %d isolated for %v, want 10s", i+1, got)
		}
	}
	if got := mustLookup(t, tol, "A").ConsecutiveFailures; got != 4 {
		t.Errorf("ConsecutiveFailures = %d, want 4 (counted even without growth)", got)
	}
}

func TestGrowthDoesNotApplyToSlowSuccesses(t *testing.T) {
	tol, clk, _ := newTol(t, Options{GrowOnRepeat: true})
	isolationOf(t, tol, clk, "A", TransportError)
	isolationOf(t, tol, clk, "A", TransportError)
	clk.Set(mustLookup(t, tol, "A").Until)
	now := clk.Now()
	tol.Update("A", ms(600), Success)
	if got := mustLookup(t, tol, "A").Until.Sub(now); got != 2*time.Second {
		t.Errorf("slow success after failures isolated for %v, want the table's 2s", got)
	}
}
