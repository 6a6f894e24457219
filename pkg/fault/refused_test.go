package fault

import (
	"testing"
	"time"
)

// A broker that refused a message another broker stored is isolated as a failed attempt with its
// own reason, stays reachable (it answered), and only its timer (grown on repeat) readmits it: a
// good probe, which ends a first offender's isolation for any other failure, proves nothing about
// a store that refuses messages.
func TestRefusingValidMessagesIsolatesUntilTheTimerEvenThroughGoodProbes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		// first and second are the isolations of the first and of a repeated refusal (each
		// after the previous isolation ran out).
		first, second time.Duration
	}{
		{"RocketMQ5 table", Options{}, 10 * time.Second, 10 * time.Second},
		{"probing and growth (the Detour preset)", Options{Probing: true, GrowOnRepeat: true}, 10 * time.Second, 20 * time.Second},
		{"RocketMQ4 rules", Options{Semantics: SemanticsRocketMQ4, Table: mustPreset(t, PresetRocketMQ4)}, 10 * time.Minute, 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, rec := newTol(t, tc.opts)
			tol.RefusedValidMessage("A", ms(4))
			it := mustLookup(t, tol, "A")
			if it.Reason != ReasonRefusesValidMessages || !it.Reachable || it.Until.Sub(t0) != tc.first {
				t.Fatalf("after a refusal: %+v, want reason %s, reachable, isolated for %v", it, ReasonRefusesValidMessages, tc.first)
			}
			if got := changeSummary(rec.take()); len(got) != 1 || got[0] != "+A" {
				t.Errorf("changes %v, want [+A]", got)
			}

			clk.Advance(time.Second)
			tol.ProbeResult("A", true, ms(1))
			wantAvailable(t, tol, map[string]bool{"A": false})
			if got := mustLookup(t, tol, "A").Reason; got != ReasonRefusesValidMessages {
				t.Errorf("reason after a good probe %q, want %q", got, ReasonRefusesValidMessages)
			}

			clk.Set(t0.Add(tc.first))
			wantAvailable(t, tol, map[string]bool{"A": true})

			again := clk.Now()
			tol.RefusedValidMessage("A", ms(4))
			if got := mustLookup(t, tol, "A").Until.Sub(again); got != tc.second {
				t.Errorf("a repeated refusal isolated for %v, want %v", got, tc.second)
			}
		})
	}
}

// The contrast that makes the rule above a rule: under probing, a good probe readmits a first
// offender isolated by a refused send at once.
func TestGoodProbeStillEndsABrokerErrorIsolation(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Probing: true, GrowOnRepeat: true})
	tol.Update("A", ms(4), BrokerError)
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(1))
	wantAvailable(t, tol, map[string]bool{"A": true})
}

func TestRefusedValidMessageRecordsNothingWhenDisabled(t *testing.T) {
	tol, _, rec := newTol(t, Options{Semantics: SemanticsDisabled})
	tol.RefusedValidMessage("A", ms(4))
	if _, ok := tol.Lookup("A"); ok || len(rec.take()) != 0 {
		t.Fatal("fault tolerance off recorded a refusal")
	}
}

// A restored isolation for refusing valid messages keeps its reason and is as severe as any other
// failure for the isolation limit's "least bad" order, even from a status that carries no failure
// count.
func TestRestoredRefusalKeepsItsReasonAndSeverity(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50})
	for _, b := range []string{"A", "B", "C", "D"} {
		tol.Entry(b)
	}
	tol.Restore([]Item{
		{Broker: "A", Reason: ReasonRefusesValidMessages, Latency: ms(4), Until: t0.Add(5 * time.Second), Reachable: true},
		{Broker: "B", Reason: ReasonSlowSend, Latency: ms(600), Until: t0.Add(5 * time.Second), Reachable: true},
	})
	if got := mustLookup(t, tol, "A").Reason; got != ReasonRefusesValidMessages {
		t.Errorf("restored reason %q", got)
	}
	wantAvailable(t, tol, map[string]bool{"A": false, "B": false})
	// A third isolation breaks the cap of two: a broker that refuses messages is worse than a
	// slow one (its 4 ms answer is not its severity), so it stays out.
	tol.Update("C", ms(600), Success)
	if tol.Available("A") {
		t.Errorf("the cap released A, which refuses messages, before a slow broker: isolated %v", isolatedNames(tol))
	}
}
