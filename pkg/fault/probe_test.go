package fault

import (
	"testing"
	"time"
)

func TestProbingKeepsUnreachableBrokerUnavailableUntilProof(t *testing.T) {
	for _, outcome := range []Outcome{TransportError, BrokerError} {
		t.Run(outcome.String(), func(t *testing.T) {
			tol, clk, _ := newTol(t, Options{Probing: true})
			tol.Update("A", ms(5), outcome)
			clk.Advance(time.Hour) // far past the 10 s timer
			wantAvailable(t, tol, map[string]bool{"A": false})
			if tol.Reachable("A") {
				t.Fatal("A reachable without proof")
			}
			if _, ok := tol.NextExpiry(); ok {
				t.Error("NextExpiry reports a time for a broker that waits for proof")
			}

			tol.ProbeResult("A", false, 200*time.Millisecond)
			it := mustLookup(t, tol, "A")
			if it.Reason != ReasonProbeFailed || it.Reachable {
				t.Fatalf("after a failed probe: reason %q reachable %v, want ProbeFailed/false", it.Reason, it.Reachable)
			}
			wantAvailable(t, tol, map[string]bool{"A": false})

			tol.ProbeResult("A", true, ms(3))
			wantAvailable(t, tol, map[string]bool{"A": true})
			if !tol.Reachable("A") {
				t.Error("A unreachable after a successful probe")
			}
		})
	}
}

func TestSuccessfulProbeEndsIsolationEarly(t *testing.T) {
	tol, clk, rec := newTol(t, Options{Probing: true})
	tol.Update("A", ms(3000), Success) // SlowSend: 6 s, still reachable
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(2))
	wantAvailable(t, tol, map[string]bool{"A": true})
	if got := mustLookup(t, tol, "A").Until; !got.Equal(t0.Add(time.Second)) {
		t.Errorf("until %v, want the probe's time t0+1s", got)
	}
	if got := changeSummary(rec.take()); len(got) != 2 || got[0] != "+A" || got[1] != "-A" {
		t.Errorf("changes %v, want [+A -A]", got)
	}
}

func TestSuccessfulSendProvesReachabilityButKeepsTheTimer(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Probing: true})
	tol.Update("A", ms(1), TransportError)
	clk.Advance(time.Second)
	tol.Update("A", ms(1), Success) // e.g. picked by the last-resort selection pass
	if !tol.Reachable("A") {
		t.Fatal("A unreachable after a successful send")
	}
	wantAvailable(t, tol, map[string]bool{"A": false})
	clk.Set(t0.Add(10 * time.Second))
	wantAvailable(t, tol, map[string]bool{"A": true})
}

func TestClientErrorIsNoProofWhenProbing(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Probing: true})
	tol.Update("A", ms(1), TransportError)
	tol.Update("A", ms(1), ClientError)
	clk.Advance(time.Minute)
	if tol.Reachable("A") || tol.Available("A") {
		t.Errorf("after a client error: reachable %v available %v, want false/false", tol.Reachable("A"), tol.Available("A"))
	}
}

// Without probing, ProbeResult only sets the flag, as RocketMQ's detector does; isolation and
// availability follow the timer alone.
func TestProbeWithoutProbingOnlySetsReachableFlag(t *testing.T) {
	tol, clk, _ := newTol(t, Options{})
	tol.Update("A", ms(1), BrokerError)
	tol.ProbeResult("A", true, ms(1))
	if !tol.Reachable("A") {
		t.Fatal("successful probe did not mark A reachable")
	}
	wantAvailable(t, tol, map[string]bool{"A": false})
	clk.Advance(10 * time.Second)
	tol.ProbeResult("A", false, ms(200))
	if tol.Reachable("A") {
		t.Fatal("failed probe left A reachable")
	}
	wantAvailable(t, tol, map[string]bool{"A": true})
	if got := mustLookup(t, tol, "A").Reason; got != ReasonProbeFailed {
		t.Errorf("reason %q, want ProbeFailed", got)
	}
}

func TestProbeOfUnknownBrokerIsIgnored(t *testing.T) {
	tol, _, _ := newTol(t, Options{Probing: true})
	tol.ProbeResult("ghost", false, ms(1))
	tol.Update("A", ms(1), TransportError)
	tol.Remove("A")
	tol.ProbeResult("A", false, ms(1))
	if got := tol.Brokers(); len(got) != 0 {
		t.Errorf("Brokers() = %v, want none: probes must not create or revive brokers", got)
	}
}

func TestConfigureTogglesProbingHolds(t *testing.T) {
	tol, clk, rec := newTol(t, Options{})
	tol.Update("A", ms(1), BrokerError)
	clk.Advance(time.Minute)
	wantAvailable(t, tol, map[string]bool{"A": true})
	tol.Expire()
	rec.take()

	tol.Configure(Options{Probing: true, OnChange: rec.on})
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.Configure(Options{OnChange: rec.on})
	wantAvailable(t, tol, map[string]bool{"A": true})
	if got := changeSummary(rec.take()); len(got) != 2 || got[0] != "+A" || got[1] != "-A" {
		t.Errorf("changes %v, want [+A -A]", got)
	}
}

// TestWatchFailedCountsAsAFailedAttempt proves an unanswered watch probe of a broker no send
// measured is judged as a failed send attempt with reason ProbeFailed: isolated for the failure
// latency's time; with probing unreachable and readmitted by a good probe as a first offender,
// while a repeat offender (with growth) sits out its doubled isolation; without probing
// readmitted by the clock alone.
func TestWatchFailedCountsAsAFailedAttempt(t *testing.T) {
	t.Run("probing: a good probe readmits a first offender", func(t *testing.T) {
		tol, _, rec := newTol(t, Options{Probing: true})
		tol.WatchFailed("A", ms(1000))
		it := mustLookup(t, tol, "A")
		if it.Reason != ReasonProbeFailed || it.Reachable || !it.Until.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("after an unanswered watch: %+v, want ProbeFailed, unreachable, until t0+10s", it)
		}
		if items := tol.Isolated(); len(items) != 1 || items[0].Broker != "A" {
			t.Fatalf("isolated %+v, want A alone (what the recovery probes visit)", items)
		}
		tol.ProbeResult("A", true, ms(2))
		wantAvailable(t, tol, map[string]bool{"A": true})
		if got := changeSummary(rec.take()); len(got) != 2 || got[0] != "+A" || got[1] != "-A" {
			t.Errorf("changes %v, want [+A -A]", got)
		}
	})
	t.Run("probing with growth: a repeat offender sits out its grown isolation", func(t *testing.T) {
		tol, clk, _ := newTol(t, Options{Probing: true, GrowOnRepeat: true})
		tol.WatchFailed("A", ms(1000))
		tol.ProbeResult("A", true, ms(2))
		wantAvailable(t, tol, map[string]bool{"A": true})
		clk.Advance(time.Second)
		tol.WatchFailed("A", ms(1000)) // the stall is back
		tol.ProbeResult("A", true, ms(2))
		wantAvailable(t, tol, map[string]bool{"A": false})
		if it := mustLookup(t, tol, "A"); !it.Until.Equal(t0.Add(21 * time.Second)) {
			t.Fatalf("second episode until %v, want t0+21s (twice the failure isolation)", it.Until)
		}
		clk.Advance(20 * time.Second)
		wantAvailable(t, tol, map[string]bool{"A": true})
	})
	t.Run("no probing: the clock readmits", func(t *testing.T) {
		tol, clk, _ := newTol(t, Options{})
		tol.WatchFailed("A", ms(1000))
		wantAvailable(t, tol, map[string]bool{"A": false})
		if it := mustLookup(t, tol, "A"); it.Reason != ReasonProbeFailed || !it.Reachable {
			t.Fatalf("after an unanswered watch: %+v, want ProbeFailed and reachable (no probing)", it)
		}
		clk.Advance(10 * time.Second)
		wantAvailable(t, tol, map[string]bool{"A": true})
	})
}
