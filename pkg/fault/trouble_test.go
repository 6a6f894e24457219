package fault

import (
	"testing"
	"time"
)

// detourStall are the Detour preset's options for stalls and probation, without the isolation
// limit and growth, so each test below sees the one rule it proves.
var detourStall = Options{Probing: true, ProbationProbes: 3, StallAfter: 100 * time.Millisecond, StallFactor: 4,
	StallProbation: true, ProbationSpan: 10 * time.Second}

// troubleStep is one moment of a broker's trouble: at that time since t0, broker-a stalls (a
// stalled attempt held, then cut while held), or a probe of it is answered well or fails, or it
// answers a send; avail is whether it is available afterwards.
type troubleStep struct {
	at    time.Duration
	do    string // "stall", "good", "fail" or "send"
	avail bool
}

// runTrouble plays steps on a table with opts and fails at the first step whose availability
// differs.
func runTrouble(t *testing.T, opts Options, steps []troubleStep) {
	t.Helper()
	tol, clk, _ := newTol(t, opts)
	e := tol.Entry("broker-a")
	tol.Update("broker-a", time.Millisecond, Success)
	for i, st := range steps {
		clk.Set(t0.Add(st.at))
		switch st.do {
		case "stall":
			tol.Stalled("broker-a", 200*time.Millisecond)
			tol.Stalled("broker-a", 200*time.Millisecond)
		case "good":
			tol.ProbeResult("broker-a", true, 2*time.Millisecond)
		case "fail":
			tol.ProbeResult("broker-a", false, 200*time.Millisecond)
		case "send":
			tol.Update("broker-a", time.Millisecond, Success)
		}
		if e.Available() != st.avail {
			t.Fatalf("step %d (%s at %v): available %v, want %v: %+v", i, st.do, st.at, e.Available(), st.avail, mustLookup(t, tol, "broker-a"))
		}
	}
}

// TestAStallHoldEndsByProbationNotAtTheNextAnswer: with StallProbation a broker held out for a
// stalled attempt is not readmitted by its next answer (a broker that hangs one attempt in ten
// answers the other nine) but by its probation's good probes; without it (the canary) its next
// answer readmits it, as before.
func TestAStallHoldEndsByProbationNotAtTheNextAnswer(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		// hold is how broker-a is held out: by the scan of attempts in flight, or by an
		// attempt's adaptive deadline.
		hold  func(tol *Tolerance, e *Entry, clk *ManualClock)
		steps []troubleStep
	}{
		{name: "held by the scan", opts: detourStall, steps: []troubleStep{{at: ms(300), do: "send"}, {at: ms(600), do: "good"}, {at: ms(1600), do: "good"}, {at: ms(2600), do: "good", avail: true}}},
		{name: "held by the attempt deadline", opts: detourStall, hold: func(tol *Tolerance, _ *Entry, _ *ManualClock) { tol.Stalled("broker-a", 200*time.Millisecond) },
			steps: []troubleStep{{at: ms(300), do: "send"}, {at: ms(600), do: "good"}, {at: ms(1600), do: "good"}, {at: ms(2600), do: "good", avail: true}}},
		{name: "canary: without StallProbation the next answer readmits", opts: Options{Probing: true, ProbationProbes: 3, StallAfter: 100 * time.Millisecond, StallFactor: 4},
			steps: []troubleStep{{at: ms(300), do: "send", avail: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, tc.opts)
			e := tol.Entry("broker-a")
			tol.Entry("broker-b")
			tol.Update("broker-a", time.Millisecond, Success)
			if tc.hold != nil {
				tc.hold(tol, e, clk)
			} else {
				e.AttemptStarted()
				clk.Advance(150 * time.Millisecond)
				if held := tol.IsolateStalled(); len(held) != 1 {
					t.Fatalf("the scan held %v, want broker-a", held)
				}
				e.AttemptEnded()
			}
			if it := mustLookup(t, tol, "broker-a"); e.Available() || it.Reason != ReasonSendStalled || it.ConsecutiveFailures != 0 {
				t.Fatalf("not held as stalled with no failure counted: %+v", it)
			}
			for i, st := range tc.steps {
				clk.Set(t0.Add(st.at))
				if st.do == "send" {
					tol.Update("broker-a", time.Millisecond, Success)
				} else {
					tol.ProbeResult("broker-a", true, 2*time.Millisecond)
				}
				if e.Available() != st.avail {
					t.Fatalf("step %d (%s at %v): available %v, want %v: %+v", i, st.do, st.at, e.Available(), st.avail, mustLookup(t, tol, "broker-a"))
				}
			}
		})
	}
}

// TestAStalledBrokerIsReleasedBeforeOneRefusingConnections: under the isolation limit, a broker
// that stopped answering (held for stalled attempts, its stall cut by the attempt deadline and
// counted as a failure, even stalled twice) is released before one that refuses connections,
// which is certain to fail the next send: its stall keeps reason SendStalled. The lesson of the
// stall recall taken back on 2026-12-06, whose stalls counted as failures made a broker warming up
// after a restart look worse than one refusing every connection. The canary row proves the order
// is the ranking's, not the names': a stalled broker whose probe then also went unanswered is
// silent for sure, and the refusing broker is released first.
func TestAStalledBrokerIsReleasedBeforeOneRefusingConnections(t *testing.T) {
	detour := detourStall
	detour.GrowOnRepeat, detour.MaxIsolatedPercent = true, 99
	cases := []struct {
		name       string
		stalls     int
		probeFails bool
		released   string
	}{
		{name: "held once for a stall", stalls: 1, released: "broker-a"},
		{name: "stalled twice within a minute", stalls: 2, released: "broker-a"},
		{name: "canary: stalled, then a probe found it silent", stalls: 1, probeFails: true, released: "broker-b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, detour)
			a, b := tol.Entry("broker-a"), tol.Entry("broker-b")
			for i := range tc.stalls {
				if i > 0 {
					for range 3 {
						clk.Advance(time.Second)
						tol.ProbeResult("broker-a", true, 2*time.Millisecond)
					}
					if !a.Available() {
						t.Fatalf("not back after its probation: %+v", mustLookup(t, tol, "broker-a"))
					}
				}
				clk.Advance(time.Second)
				tol.Stalled("broker-a", 200*time.Millisecond) // held
				tol.Stalled("broker-a", 200*time.Millisecond) // cut while held: a failure
			}
			if it := mustLookup(t, tol, "broker-a"); it.Reason != ReasonSendStalled || it.ConsecutiveFailures == 0 {
				t.Fatalf("stall not counted as a failure with reason %s: %+v", ReasonSendStalled, it)
			}
			if tc.probeFails {
				tol.ProbeResult("broker-a", false, 200*time.Millisecond)
			}
			clk.Advance(time.Second)
			tol.Update("broker-b", time.Millisecond, TransportError) // connection refused
			released, held := a, b
			if tc.released == "broker-b" {
				released, held = b, a
			}
			if !released.Available() || held.Available() {
				t.Errorf("want %s released: broker-a %+v, broker-b %+v", tc.released, mustLookup(t, tol, "broker-a"), mustLookup(t, tol, "broker-b"))
			}
		})
	}
}

// TestProbationLastsAsLongAsTheTrouble: with ProbationSpan a probation after silence lasts as long
// as the broker's trouble has, from its first silence within TroubleWindow: a broker that flaps
// (1.8 s stopped, 1.8 s running) is not readmitted by three good probes within one up phase, and
// one that hung twice needs good probes across its whole last cycle, while one silent once for a
// moment comes back after its three probes, as does one silent once for longer than the span (an
// outage that ended), a trouble older than the window is forgotten, and no probation lasts beyond
// ProbationSpan. The canary, without ProbationSpan, readmits the flapping
// broker within its first up phase.
func TestProbationLastsAsLongAsTheTrouble(t *testing.T) {
	noSpan := detourStall
	noSpan.ProbationSpan = 0
	flap := []troubleStep{{at: 0, do: "stall"}, {at: ms(500), do: "fail"}, {at: ms(1300), do: "fail"},
		{at: ms(1900), do: "good"}, {at: ms(2500), do: "good"}, {at: ms(3100), do: "good"}, {at: ms(3500), do: "good"}, // up 1.8-3.6 s
		{at: ms(3900), do: "fail"}, {at: ms(5500), do: "good"}, {at: ms(6300), do: "good"}, {at: ms(7100), do: "good"}} // up 5.4-7.2 s
	cases := []struct {
		name  string
		opts  Options
		steps []troubleStep
	}{
		{name: "flapping: not back within an up phase", opts: detourStall, steps: flap},
		{name: "canary: without a span, back within the first up phase", opts: noSpan, steps: []troubleStep{
			{at: 0, do: "stall"}, {at: ms(500), do: "fail"}, {at: ms(1300), do: "fail"}, {at: ms(1900), do: "good"}, {at: ms(2500), do: "good"}, {at: ms(3100), do: "good", avail: true}}},
		{name: "silent once for a moment: back after its probes", opts: detourStall, steps: []troubleStep{
			{at: 0, do: "stall"}, {at: ms(300), do: "good"}, {at: ms(1300), do: "good"}, {at: ms(2300), do: "good", avail: true}}},
		{name: "hung twice: the second probation spans the whole cycle", opts: detourStall, steps: []troubleStep{
			{at: 0, do: "stall"}, {at: ms(300), do: "good"}, {at: ms(1300), do: "good"}, {at: ms(2300), do: "good", avail: true},
			{at: ms(2500), do: "stall"}, {at: ms(2800), do: "good"}, {at: ms(3800), do: "good"}, {at: ms(4800), do: "good"},
			{at: ms(5500), do: "good"}, {at: ms(5700), do: "good", avail: true}}},
		{name: "a trouble older than the window is forgotten", opts: detourStall, steps: []troubleStep{
			{at: 0, do: "stall"}, {at: ms(300), do: "good"}, {at: ms(1300), do: "good"}, {at: ms(2300), do: "good", avail: true},
			{at: time.Minute + ms(2400), do: "stall"}, {at: time.Minute + ms(2700), do: "good"}, {at: time.Minute + ms(3700), do: "good"},
			{at: time.Minute + ms(4700), do: "good", avail: true}}},
		{name: "one outage longer than ProbationSpan: back after its probes", opts: detourStall, steps: []troubleStep{
			{at: 0, do: "stall"}, {at: 10 * time.Second, do: "fail"}, {at: 20 * time.Second, do: "fail"}, {at: 30 * time.Second, do: "good"},
			{at: 31 * time.Second, do: "good"}, {at: 32 * time.Second, do: "good", avail: true}}},
		{name: "a relapse: never longer than ProbationSpan", opts: detourStall, steps: []troubleStep{
			{at: 0, do: "stall"}, {at: ms(300), do: "good"}, {at: ms(1300), do: "good"}, {at: ms(2300), do: "good", avail: true},
			{at: ms(2500), do: "stall"}, {at: 10 * time.Second, do: "fail"}, {at: 20 * time.Second, do: "fail"}, {at: 30 * time.Second, do: "good"},
			{at: 31 * time.Second, do: "good"}, {at: 32 * time.Second, do: "good"}, {at: 39 * time.Second, do: "good"}, {at: 40 * time.Second, do: "good", avail: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runTrouble(t, tc.opts, tc.steps) })
	}
}

// TestAStallAfterComingBackIsARepeatEpisode: with StallProbation and growth, a stall hold is an
// isolation episode, so a broker that hangs again soon after its probation readmitted it has a
// second episode and sits out its grown isolation whatever its probes say, while a stall after a
// calm as long as the failure isolation is a first episode again. The canary, without
// StallProbation, counts the second stall in the episode its hold opened (the hold's wait for
// proof hides it), so the broker is a first offender every time.
func TestAStallAfterComingBackIsARepeatEpisode(t *testing.T) {
	detour := detourStall
	detour.GrowOnRepeat, detour.ProbationSpan = true, 0 // the span rule aside: this proves the episode
	canary := detour
	canary.StallProbation = false
	cases := []struct {
		name     string
		opts     Options
		calm     time.Duration // from coming back to the second stall
		failures int           // episodes counted after the second stall
		// back is whether three good probes a second apart readmit it after the second stall.
		back bool
	}{
		{name: "hung again soon after", opts: detour, calm: ms(300), failures: 2},
		{name: "hung again after a long calm", opts: detour, calm: 11 * time.Second, failures: 1, back: true},
		{name: "canary: the hold hides the episode", opts: canary, calm: ms(300), failures: 1, back: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, tc.opts)
			e := tol.Entry("broker-a")
			tol.Update("broker-a", time.Millisecond, Success)
			stallAndProbe := func() {
				tol.Stalled("broker-a", 200*time.Millisecond)
				tol.Stalled("broker-a", 200*time.Millisecond)
				for range 3 {
					clk.Advance(time.Second)
					tol.ProbeResult("broker-a", true, 2*time.Millisecond)
				}
			}
			stallAndProbe()
			if !e.Available() {
				t.Fatalf("not back after its first probation: %+v", mustLookup(t, tol, "broker-a"))
			}
			clk.Advance(tc.calm)
			stallAndProbe()
			if it := mustLookup(t, tol, "broker-a"); it.ConsecutiveFailures != tc.failures || e.Available() != tc.back {
				t.Errorf("after the second stall: %+v, available %v; want %d episodes, available %v", it, e.Available(), tc.failures, tc.back)
			}
		})
	}
}

// TestARequestLeftUnansweredWhileOthersAreIsNoProbesToClear: an attempt cut by its deadline while
// its broker ended other attempts (Entry.EndedSince: a request held or lost while the broker
// serves the rest, one in ten hanging) holds the broker out for its episode's failure isolation,
// which good probes do not end (they pass where the request did not), and then its probation;
// an attempt cut while nothing else ended (a pause) is the plain stall hold its probation ends.
// It stays SendStalled, so the isolation limit ranks it as any stall. The canary,
// without StallProbation, is the old hold its next answer ends.
func TestARequestLeftUnansweredWhileOthersAreIsNoProbesToClear(t *testing.T) {
	detour := detourStall
	detour.GrowOnRepeat, detour.MaxIsolatedPercent = true, 99
	canary := detour
	canary.StallProbation, canary.ProbationSpan = false, 0
	cases := []struct {
		name string
		opts Options
		// othersEnd is whether another attempt ends while the cut one waits.
		othersEnd bool
		// backAfterProbes and backAfterTimer say whether broker-a is available after three good
		// probes a second apart, and after its failure isolation (10 s) and one more.
		backAfterProbes, backAfterTimer bool
	}{
		{name: "hung while others were answered", opts: detour, othersEnd: true, backAfterTimer: true},
		{name: "cut in a pause", opts: detour, backAfterProbes: true, backAfterTimer: true},
		{name: "canary: without StallProbation", opts: canary, othersEnd: true, backAfterProbes: true, backAfterTimer: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, tc.opts)
			e := tol.Entry("broker-a")
			tol.Entry("broker-b")
			tol.Entry("broker-c")
			tol.Update("broker-a", time.Millisecond, Success)
			mark := e.AttemptStarted()
			if tc.othersEnd {
				e.AttemptStarted()
				clk.Advance(2 * time.Millisecond)
				e.AttemptEnded()
			}
			clk.Advance(200 * time.Millisecond)
			if got := e.EndedSince(mark); got != tc.othersEnd {
				t.Fatalf("EndedSince: %v, want %v", got, tc.othersEnd)
			}
			if tc.othersEnd {
				tol.StalledAnswering("broker-a", 200*time.Millisecond)
			} else {
				tol.Stalled("broker-a", 200*time.Millisecond)
			}
			e.AttemptEnded()
			for range 3 {
				clk.Advance(time.Second)
				tol.ProbeResult("broker-a", true, 2*time.Millisecond)
			}
			if e.Available() != tc.backAfterProbes {
				t.Fatalf("after three good probes: available %v, want %v: %+v", e.Available(), tc.backAfterProbes, mustLookup(t, tol, "broker-a"))
			}
			clk.Advance(8 * time.Second)
			tol.ProbeResult("broker-a", true, 2*time.Millisecond)
			if e.Available() != tc.backAfterTimer {
				t.Fatalf("after its failure isolation: available %v, want %v: %+v", e.Available(), tc.backAfterTimer, mustLookup(t, tol, "broker-a"))
			}
		})
	}
}
