package fault

import (
	"slices"
	"testing"
	"time"
)

// detourOptions are the Detour preset's fault options with the given probation.
func detourOptions(probation int) Options {
	return Options{Probing: true, GrowOnRepeat: true, MaxIsolatedPercent: 99, ProbationProbes: probation}
}

// TestProbationNeedsGoodProbesInARowAfterARepeatedIsolation proves that a broker whose isolation
// repeated (a probe found it failing while it was out) returns only after ProbationProbes good
// probes in a row, that a failure in between starts the count over, and that without probation
// one good probe readmits it as before.
func TestProbationNeedsGoodProbesInARowAfterARepeatedIsolation(t *testing.T) {
	cases := []struct {
		name      string
		probation int
		probes    []bool // after the failed send and one failed probe
		available []bool // after each probe
	}{
		{"no probation: the first good probe", 0, []bool{true}, []bool{true}},
		{"probation 1 is one good probe", 1, []bool{true}, []bool{true}},
		{"probation 3", 3, []bool{true, true, true}, []bool{false, false, true}},
		{"a failure starts probation over", 3,
			[]bool{true, true, false, true, true, true},
			[]bool{false, false, false, false, false, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, detourOptions(tc.probation))
			tol.Update("A", ms(400), TransportError)
			tol.Update("B", ms(1), Success)
			clk.Advance(time.Second)
			tol.ProbeResult("A", false, ms(200))
			for i, ok := range tc.probes {
				clk.Advance(time.Second)
				tol.ProbeResult("A", ok, ms(2))
				wantAvailable(t, tol, map[string]bool{"A": tc.available[i], "B": true})
			}
			if it := mustLookup(t, tol, "A"); !it.Reachable {
				t.Errorf("A unreachable after its last good probe")
			}
		})
	}
}

// TestFirstOffenderIsOnProbationAfterSilenceOrASlowAnswer proves which first isolations need
// ProbationProbes good probes in a row: a send that got no answer, a watch probe left unanswered
// and an answer slow enough to isolate (a send's or a watch probe's) do, since a broker that
// flaps or pauses answers a probe in its up phase; a broker error does not (the broker answered,
// and one good probe readmits it as before), nor does a client-side failure however long it took
// (it says nothing of the broker), and with a probation of one, one good probe still readmits
// every first offender.
func TestFirstOffenderIsOnProbationAfterSilenceOrASlowAnswer(t *testing.T) {
	cases := []struct {
		name      string
		probation int
		isolate   func(tol *Tolerance)
		reason    Reason
		probes    int // good probes after which the broker is available again
	}{
		{"send without an answer", 3, func(tol *Tolerance) { tol.Update("A", ms(400), TransportError) }, ReasonSendFailed, 3},
		{"watch probe without an answer", 3, func(tol *Tolerance) { tol.WatchFailed("A", ms(1000)) }, ReasonProbeFailed, 3},
		{"slow send", 3, func(tol *Tolerance) { tol.Update("A", ms(700), Success) }, ReasonSlowSend, 3},
		{"slow watch probe", 3, func(tol *Tolerance) { tol.WatchSlow("A", ms(700)) }, ReasonSlowProbe, 3},
		{"async transport failure (RocketMQ's flags)", 3, func(tol *Tolerance) { tol.UpdateFaultItem("A", ms(400), true, true) }, ReasonSendFailed, 3},
		{"broker error", 3, func(tol *Tolerance) { tol.Update("A", ms(3), BrokerError) }, ReasonBrokerError, 1},
		{"client error as slow as a stall", 3, func(tol *Tolerance) { tol.Update("A", ms(700), ClientError) }, ReasonSlowSend, 1},
		{"probation 1: send without an answer", 1, func(tol *Tolerance) { tol.Update("A", ms(400), TransportError) }, ReasonSendFailed, 1},
		{"probation 1: slow send", 1, func(tol *Tolerance) { tol.Update("A", ms(700), Success) }, ReasonSlowSend, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, detourOptions(tc.probation))
			tol.Update("B", ms(1), Success) // the cap never lets the only broker be held
			tc.isolate(tol)
			if it := mustLookup(t, tol, "A"); it.Reason != tc.reason || it.ConsecutiveFailures > 1 {
				t.Fatalf("after the first isolation %+v, want reason %s, a first offender", it, tc.reason)
			}
			for i := 1; i <= tc.probes; i++ {
				wantAvailable(t, tol, map[string]bool{"A": false})
				clk.Advance(time.Second)
				tol.ProbeResult("A", true, ms(2))
			}
			wantAvailable(t, tol, map[string]bool{"A": true})
		})
	}
}

// TestProbeAnswerIsProofOnlyUnderTheFirstThreshold proves that, with probation, a good probe
// answered at or above the table's first threshold (50 ms in RocketMQ 5's table) but under every
// isolating one proves nothing: it neither readmits a broker nor counts toward its probation, and
// it starts a probation over; an answer under the threshold counts. A table whose first threshold
// is under minProofLatency does not make every answer unproven, and without probation every good
// answer is proof, as before.
func TestProbeAnswerIsProofOnlyUnderTheFirstThreshold(t *testing.T) {
	tiny, err := NewTable([]Rule{{LatencyMillis: 1, IsolationMillis: 0}, {LatencyMillis: 550, IsolationMillis: 2000}}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	sendFailed := func(tol *Tolerance) { tol.Update("A", ms(400), TransportError) }
	cases := []struct {
		name      string
		probation int
		table     *Table
		isolate   func(tol *Tolerance)
		latencies []int64 // of good probes, in ms
		available []bool  // after each
	}{
		{"answers under the threshold count", 3, nil, sendFailed, []int64{49, 49, 49}, []bool{false, false, true}},
		{"an answer at the threshold starts probation over", 3, nil, sendFailed,
			[]int64{2, 2, 50, 2, 2, 2}, []bool{false, false, false, false, false, true}},
		{"answers that wait out a stall never readmit", 3, nil, sendFailed,
			[]int64{60, 150, 199, 300, 549}, []bool{false, false, false, false, false}},
		{"answers over the threshold count once the timer has run out", 3, nil, sendFailed,
			[]int64{60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60},
			[]bool{false, false, false, false, false, false, false, false, false, false, false, true}},
		{"a broker error's isolation is not ended by a slow answer", 3, nil,
			func(tol *Tolerance) { tol.Update("A", ms(3), BrokerError) }, []int64{60, 2}, []bool{false, true}},
		{"a threshold under the floor", 3, tiny, sendFailed, []int64{5, 9, 5, 10}, []bool{false, false, true, true}},
		{"probation 1: any good answer under the isolating thresholds", 1, nil, sendFailed, []int64{300}, []bool{true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := detourOptions(tc.probation)
			opts.Table = tc.table
			tol, clk, _ := newTol(t, opts)
			tol.Update("B", ms(1), Success)
			tc.isolate(tol)
			for i, l := range tc.latencies {
				clk.Advance(time.Second)
				tol.ProbeResult("A", true, ms(l))
				wantAvailable(t, tol, map[string]bool{"A": tc.available[i]})
			}
		})
	}
}

// TestProbationHoldsARepeatOffenderPastItsTimer proves a second episode needs the probation's
// good probes as well as its grown timer: when the timer runs out, the broker is still held
// until the probes have come.
func TestProbationHoldsARepeatOffenderPastItsTimer(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(2))
	tol.Update("B", ms(1), Success) // the cap never lets the only broker be held
	tol.Update("A", ms(400), TransportError)
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(2))
	tol.ProbeResult("A", true, ms(2)) // first offender, silent: readmitted after its probation
	wantAvailable(t, tol, map[string]bool{"A": true})
	clk.Advance(time.Second)
	tol.Update("A", ms(400), TransportError) // second episode: 20 s and probation
	clk.Advance(time.Minute)
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.ProbeResult("A", true, ms(2))
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.ProbeResult("A", true, ms(2))
	wantAvailable(t, tol, map[string]bool{"A": true})
}

// TestSlowProbeAnswerIsNoProof proves that a probe answered slower than a threshold counts as
// that latency (RocketMQ 5's table: 600 ms isolates for 2 s) with reason SlowProbe, does not
// readmit a held broker, and puts it on probation.
func TestSlowProbeAnswerIsNoProof(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(2))
	tol.Update("B", ms(1), Success) // the cap never lets the only broker be held
	tol.Update("A", ms(400), TransportError)
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(600))
	it := mustLookup(t, tol, "A")
	if it.Reason != ReasonSlowProbe || !it.Reachable {
		t.Fatalf("after a slow probe: reason %q reachable %v, want SlowProbe, reachable", it.Reason, it.Reachable)
	}
	clk.Advance(time.Hour) // past every timer: probation still holds it
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.ProbeResult("A", true, ms(2))
	tol.ProbeResult("A", true, ms(2))
	wantAvailable(t, tol, map[string]bool{"A": true})
}

// TestWatchSlowIsolatesAsASendOfThatLatency proves a watched broker that answers slower than a
// threshold is isolated for the table's time with reason SlowProbe and put on probation, and one
// that answers under every threshold is left alone.
func TestWatchSlowIsolatesAsASendOfThatLatency(t *testing.T) {
	cases := []struct {
		latency time.Duration
		until   time.Duration // 0: not isolated
	}{
		{ms(40), 0},
		{ms(549), 0},
		{ms(600), 2 * time.Second},
		{ms(2000), 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.latency.String(), func(t *testing.T) {
			tol, clk, _ := newTol(t, detourOptions(3))
			tol.Update("B", ms(1), Success)
			tol.WatchSlow("A", tc.latency)
			it, known := tol.Lookup("A")
			if tc.until == 0 {
				if known && !it.Until.IsZero() {
					t.Fatalf("isolated until %v, want nothing", it.Until)
				}
				wantAvailable(t, tol, map[string]bool{"A": true})
				return
			}
			if it.Reason != ReasonSlowProbe || !it.Reachable || !it.Until.Equal(t0.Add(tc.until)) {
				t.Fatalf("got %+v, want SlowProbe, reachable, until t0+%v", it, tc.until)
			}
			wantAvailable(t, tol, map[string]bool{"A": false})
			clk.Advance(tc.until)
			// A stall answered: held past its timer until its probation's good probes.
			wantAvailable(t, tol, map[string]bool{"A": false})
			for range 3 {
				tol.ProbeResult("A", true, ms(2))
			}
			wantAvailable(t, tol, map[string]bool{"A": true})
		})
	}
}

// TestIsolationLimitReleasesABrokerOnProbation proves probation is a hold the isolation limit may release:
// with every other broker out, the one on probation is the least bad and is selectable again.
func TestIsolationLimitReleasesABrokerOnProbation(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(3))
	tol.Update("A", ms(400), TransportError)
	clk.Advance(time.Second)
	tol.ProbeResult("A", false, ms(200))
	tol.ProbeResult("A", true, ms(2)) // answers: on probation, reachable
	tol.Update("B", ms(400), TransportError)
	tol.ProbeResult("B", false, ms(200)) // silent: the worse of the two
	wantAvailable(t, tol, map[string]bool{"A": true, "B": false})
}

// TestTurningProbationOffReleasesItsHolds proves a policy change that drops probation readmits
// brokers held only by it.
func TestTurningProbationOffReleasesItsHolds(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(3))
	tol.Update("A", ms(400), TransportError)
	tol.Update("B", ms(1), Success)
	clk.Advance(time.Second)
	tol.ProbeResult("A", false, ms(200))
	tol.ProbeResult("A", true, ms(2))
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.Configure(detourOptions(1))
	clk.Advance(time.Hour)
	wantAvailable(t, tol, map[string]bool{"A": true})
}

// TestBusyRefusalIsolatesUntilItsTimerWhateverProbesSay proves a busy refusal isolates the broker
// for the failure latency's time with reason BrokerBusy, leaves it reachable (it answered), and
// that good probes, which do not pass the send queue, do not end that isolation; the timer does.
func TestBusyRefusalIsolatesUntilItsTimerWhateverProbesSay(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(3))
	tol.Update("B", ms(1), Success)
	tol.Busy("A", ms(3))
	it := mustLookup(t, tol, "A")
	if it.Reason != ReasonBrokerBusy || !it.Reachable || !it.Until.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("after a busy refusal %+v, want BrokerBusy, reachable, until t0+10s", it)
	}
	for range 5 {
		clk.Advance(time.Second)
		tol.ProbeResult("A", true, ms(2))
	}
	wantAvailable(t, tol, map[string]bool{"A": false})
	clk.Set(t0.Add(10 * time.Second))
	wantAvailable(t, tol, map[string]bool{"A": true})
}

// TestPressureHoldsABrokerOutWithoutCountingAFailure proves Pressured holds a broker out for its
// time (extended by later figures, ended by neither a good probe nor a success), counts no
// failure, and is the first the isolation limit releases when a silent broker needs the room.
func TestPressureHoldsABrokerOutWithoutCountingAFailure(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(3))
	tol.Update("B", ms(1), Success)
	tol.Update("C", ms(1), Success)
	tol.Pressured("A", 2*time.Second)
	it := mustLookup(t, tol, "A")
	if it.Reason != ReasonBrokerPressure || !it.Reachable || it.ConsecutiveFailures != 0 || !it.Until.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("after pressure %+v, want BrokerPressure, reachable, no failure, until t0+2s", it)
	}
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(2))
	tol.Pressured("A", 2*time.Second) // still pressed a second later: until t0+3s
	wantAvailable(t, tol, map[string]bool{"A": false})
	clk.Advance(1500 * time.Millisecond)
	wantAvailable(t, tol, map[string]bool{"A": false})
	clk.Advance(500 * time.Millisecond)
	wantAvailable(t, tol, map[string]bool{"A": true})

	// With a cap of one broker in three, a silent broker takes the room from a pressed one.
	capped, _, _ := newTol(t, Options{Probing: true, GrowOnRepeat: true, MaxIsolatedPercent: 34})
	capped.Update("B", ms(1), Success)
	capped.Update("C", ms(1), Success)
	capped.Pressured("A", 2*time.Second)
	capped.Update("B", ms(400), TransportError)
	wantAvailable(t, capped, map[string]bool{"A": true, "B": false, "C": true})
}

// TestRestoredIsolationKeepsItsProbation proves a restart does not shorten probation: a restored
// broker isolated for silence or a slow answer, or a repeat offender, needs ProbationProbes good
// probes again, and one isolated for a broker error a single one, as before the restart.
func TestRestoredIsolationKeepsItsProbation(t *testing.T) {
	cases := []struct {
		name   string
		item   Item
		probes int
	}{
		{"send without an answer", Item{Reason: ReasonSendFailed, ConsecutiveFailures: 1}, 3},
		{"probe without an answer", Item{Reason: ReasonProbeFailed, ConsecutiveFailures: 1}, 3},
		{"slow send", Item{Reason: ReasonSlowSend, Reachable: true}, 3},
		{"repeat offender's broker error", Item{Reason: ReasonBrokerError, ConsecutiveFailures: 2}, 3},
		{"broker error", Item{Reason: ReasonBrokerError, ConsecutiveFailures: 1}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, detourOptions(3))
			tol.Update("B", ms(1), Success)
			it := tc.item
			it.Broker, it.Since, it.Until = "A", t0, t0.Add(time.Second)
			tol.Restore([]Item{it})
			clk.Advance(time.Hour) // past the restored timer and any decay
			for range tc.probes {
				wantAvailable(t, tol, map[string]bool{"A": false})
				tol.ProbeResult("A", true, ms(2))
			}
			wantAvailable(t, tol, map[string]bool{"A": true})
		})
	}
}

// TestHeldUntilProvenSaysAProbeMustReadmit proves Item.HeldUntilProven: set while a broker can
// return only on proof (probing and unreachable, or on probation with good probes to come), past
// its timer too, and clear for an isolation its timer ends or once the proof came.
func TestHeldUntilProvenSaysAProbeMustReadmit(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		isolate func(tol *Tolerance)
		probes  int  // good probes answered after the timer ran out
		held    bool // before the probes, past the timer
	}{
		{"probing, no answer: held past its timer", detourOptions(3), func(tol *Tolerance) { tol.Update("A", ms(400), TransportError) }, 0, true},
		{"probation, one good probe of three", detourOptions(3), func(tol *Tolerance) { tol.Update("A", ms(700), Success) }, 1, true},
		{"probation over after three good probes", detourOptions(3), func(tol *Tolerance) { tol.Update("A", ms(700), Success) }, 3, false},
		{"no probing: a timer isolation", Options{}, func(tol *Tolerance) { tol.Update("A", ms(700), Success) }, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, tc.opts)
			tol.Update("B", ms(1), Success) // the cap never lets the only broker be held
			tc.isolate(tol)
			if it := mustLookup(t, tol, "A"); !it.Until.After(clk.Now()) {
				t.Fatalf("A's timer %v is not running right after the isolation", it.Until)
			}
			clk.Advance(time.Minute) // past any timer of the table
			for range tc.probes {
				tol.ProbeResult("A", true, ms(2))
				clk.Advance(time.Second)
			}
			it := mustLookup(t, tol, "A")
			if it.HeldUntilProven != tc.held {
				t.Errorf("HeldUntilProven %v, want %v (item %+v)", it.HeldUntilProven, tc.held, it)
			}
			if isolated := slices.Contains(isolatedNames(tol), "A"); isolated != tc.held {
				t.Errorf("A isolated %v, want %v: held brokers are the isolated ones past their timer", isolated, tc.held)
			}
		})
	}
}
