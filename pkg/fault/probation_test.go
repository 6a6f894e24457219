package fault

import (
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

// TestFirstOffenderWhoseProbesNeverFailedReturnsAfterOneGoodProbe proves probation leaves a
// one-off failure alone: a broker that answers its first probe is readmitted by it.
func TestFirstOffenderWhoseProbesNeverFailedReturnsAfterOneGoodProbe(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(3))
	tol.Update("B", ms(1), Success)
	tol.Update("A", ms(400), TransportError)
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(2))
	wantAvailable(t, tol, map[string]bool{"A": true})
}

// TestProbationHoldsARepeatOffenderPastItsTimer proves a second episode needs the probation's
// good probes as well as its grown timer: when the timer runs out, the broker is still held
// until the probes have come.
func TestProbationHoldsARepeatOffenderPastItsTimer(t *testing.T) {
	tol, clk, _ := newTol(t, detourOptions(2))
	tol.Update("B", ms(1), Success) // the cap never lets the only broker be held
	tol.Update("A", ms(400), TransportError)
	clk.Advance(time.Second)
	tol.ProbeResult("A", true, ms(2)) // first offender: readmitted
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
// threshold is isolated for the table's time with reason SlowProbe, and one that answers under
// every threshold is left alone.
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
			wantAvailable(t, tol, map[string]bool{"A": true})
		})
	}
}

// TestCapReleasesABrokerOnProbation proves probation is a hold the cap may release: with every
// other broker out, the one on probation is the least bad and is selectable again.
func TestCapReleasesABrokerOnProbation(t *testing.T) {
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
// failure, and is the first the cap releases when a silent broker needs the room.
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
