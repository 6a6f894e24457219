package fault

import (
	"slices"
	"testing"
	"time"
)

// stallStep is one moment of a stall scenario: attempts start or end, time passes, then the table
// is scanned.
type stallStep struct {
	start, end int // attempts to broker-a started, ended
	advance    time.Duration
	// successes feed broker-a's usual latency before the step's attempts.
	successes []time.Duration
	// held is whether the scan after the step holds broker-a out.
	held bool
}

// TestAStalledBrokerIsHeldOutBeforeAnyAttemptTimesOut proves stall detection: a broker whose
// oldest attempt in flight has gone unanswered past max(StallAfter, StallFactor × usual latency)
// is held out with reason SendStalled, while one that keeps answering some attempts, one that is
// slow as usual, or one with nothing in flight is not; the hold ends with the broker's next
// answer and counts no failure.
func TestAStalledBrokerIsHeldOutBeforeAnyAttemptTimesOut(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		steps []stallStep
	}{
		{name: "one attempt unanswered past StallAfter", opts: Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true},
			steps: []stallStep{{successes: steady(time.Millisecond, 3), start: 1, advance: 99 * time.Millisecond}, {advance: 2 * time.Millisecond, held: true}}},
		{name: "a broker never heard gets StallFactor times StallAfter", opts: Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true},
			steps: []stallStep{{start: 1, advance: 399 * time.Millisecond}, {advance: 2 * time.Millisecond, held: true}}},
		{name: "nothing in flight, however long", opts: Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true},
			steps: []stallStep{{start: 1, end: 1, advance: time.Hour}}},
		{name: "answers to other attempts are signs of life", opts: Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true},
			steps: []stallStep{{successes: steady(time.Millisecond, 3), start: 3, advance: 90 * time.Millisecond}, {end: 1, advance: 90 * time.Millisecond}, {end: 1, advance: 90 * time.Millisecond},
				{advance: 20 * time.Millisecond, held: true}}},
		{name: "a broker slow as usual is not stalled", opts: Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true},
			steps: []stallStep{{successes: []time.Duration{80 * time.Millisecond, 80 * time.Millisecond, 80 * time.Millisecond}, start: 1, advance: 300 * time.Millisecond}}},
		{name: "off without StallAfter, as in RocketMQ", opts: Options{Probing: true},
			steps: []stallStep{{start: 1, advance: time.Hour}}},
		{name: "off under SemanticsDisabled", opts: Options{StallAfter: 100 * time.Millisecond, Semantics: SemanticsDisabled},
			steps: []stallStep{{start: 1, advance: time.Hour}}},
		{name: "without probing: held for the failure isolation", opts: Options{StallAfter: 100 * time.Millisecond, StallFactor: 4},
			steps: []stallStep{{successes: steady(time.Millisecond, 3), start: 1, advance: 101 * time.Millisecond, held: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, tc.opts)
			e := tol.Entry("broker-a")
			for i, st := range tc.steps {
				for _, l := range st.successes {
					tol.Update("broker-a", l, Success)
				}
				for range st.start {
					e.AttemptStarted()
				}
				for range st.end {
					e.AttemptEnded()
				}
				clk.Advance(st.advance)
				held := slices.Contains(tol.IsolateStalled(), "broker-a")
				if held != st.held || e.Available() == st.held {
					t.Fatalf("step %d: held %v, available %v; want held %v", i, held, e.Available(), st.held)
				}
				if st.held {
					it := mustLookup(t, tol, "broker-a")
					if it.Reason != ReasonSendStalled || it.ConsecutiveFailures != 0 {
						t.Errorf("step %d: item %+v, want reason %s and no failure counted", i, it, ReasonSendStalled)
					}
				}
			}
		})
	}
}

// TestAStalledBrokerReturnsWithItsNextAnswer: under probing, the first answer after the stall (an
// attempt's success) readmits the broker; a stall already held is not held again.
func TestAStalledBrokerReturnsWithItsNextAnswer(t *testing.T) {
	tol, clk, rec := newTol(t, Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true})
	e := tol.Entry("broker-a")
	tol.Update("broker-a", time.Millisecond, Success)
	e.AttemptStarted()
	clk.Advance(150 * time.Millisecond)
	if got := tol.IsolateStalled(); !slices.Equal(got, []string{"broker-a"}) {
		t.Fatalf("held %v, want broker-a", got)
	}
	clk.Advance(150 * time.Millisecond)
	if got := tol.IsolateStalled(); len(got) != 0 {
		t.Fatalf("held again: %v", got)
	}
	e.AttemptEnded()
	tol.Update("broker-a", 3*time.Millisecond, Success)
	if !e.Available() {
		t.Fatalf("still held after an answer: %+v", mustLookup(t, tol, "broker-a"))
	}
	changes := rec.take()
	if len(changes) != 2 || !changes[0].Isolated || changes[0].Item.Reason != ReasonSendStalled || changes[1].Isolated {
		t.Errorf("changes %+v, want held as SendStalled, then back", changes)
	}
}

// TestFailuresNeverLookFast: the usual latency learns from successes only, so a broker that
// fails at once (a refused connection, an error code) keeps the usual latency of its answers.
func TestFailuresNeverLookFast(t *testing.T) {
	tol, _, _ := newTol(t, Options{Probing: true})
	e := tol.Entry("broker-a")
	if e.UsualLatency() != 0 {
		t.Fatalf("usual latency %v before any success", e.UsualLatency())
	}
	for range 20 {
		tol.Update("broker-a", 40*time.Millisecond, Success)
	}
	before := e.UsualLatency()
	if before < 40*time.Millisecond || before > 80*time.Millisecond {
		t.Fatalf("usual latency %v after steady 40 ms answers", before)
	}
	for _, o := range []Outcome{TransportError, BrokerError, ClientError} {
		tol.Update("broker-a", 0, o)
	}
	if got := e.UsualLatency(); got != before {
		t.Errorf("usual latency %v after fast failures, want %v as before", got, before)
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

// TestASilenceThatGoesOnIsAFailure: an attempt cut by the adaptive cap holds an available broker
// out as stalled, no failure counted; a second one while it is held counts as a failed attempt
// (reason SendFailed, unreachable, on probation), as a broker that stopped answering is.
func TestASilenceThatGoesOnIsAFailure(t *testing.T) {
	tol, _, _ := newTol(t, Options{StallAfter: 100 * time.Millisecond, StallFactor: 4, Probing: true, ProbationProbes: 3})
	tol.Update("broker-a", time.Millisecond, Success)
	tol.Stalled("broker-a", 200*time.Millisecond)
	if it := mustLookup(t, tol, "broker-a"); it.Reason != ReasonSendStalled || it.ConsecutiveFailures != 0 {
		t.Fatalf("after the first cut: %+v, want held as %s with no failure counted", it, ReasonSendStalled)
	}
	tol.Stalled("broker-a", 200*time.Millisecond)
	if it := mustLookup(t, tol, "broker-a"); it.Reason != ReasonSendFailed || it.ConsecutiveFailures != 1 || it.Reachable {
		t.Fatalf("after the second cut: %+v, want a failed attempt counted, unreachable", it)
	}
	tol.Stalled("broker-b", time.Second) // unknown: left alone
	if _, ok := tol.Lookup("broker-b"); ok {
		t.Error("an unknown broker was made known by a stall")
	}
}
