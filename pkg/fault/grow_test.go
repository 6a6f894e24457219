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

// growStep is one event of a growth scenario, at an offset from t0, followed by checks of the
// broker's state.
type growStep struct {
	at   time.Duration
	do   func(tol *Tolerance)
	note string

	available bool
	episodes  int           // ConsecutiveFailures after the step
	until     time.Duration // if not 0, the isolation end as an offset from t0
}

func fail(o Outcome) func(*Tolerance) {
	return func(tol *Tolerance) { tol.Update("A", ms(400), o) }
}

func send(tol *Tolerance)    { tol.Update("A", ms(1), Success) }
func probeOK(tol *Tolerance) { tol.ProbeResult("A", true, ms(1)) }
func probeKO(tol *Tolerance) { tol.ProbeResult("A", false, ms(200)) }

func TestGrowOnRepeatCountsEpisodesThatDecayAfterProbation(t *testing.T) {
	const s = time.Second
	tcs := []struct {
		name  string
		opts  Options
		steps []growStep
	}{{
		name: "flapping broker's second isolation is longer and not ended by a probe",
		opts: Options{Probing: true, GrowOnRepeat: true},
		steps: []growStep{
			{at: 0, do: fail(TransportError), note: "first failure", episodes: 1, until: 10 * s},
			{at: 3 * s, do: probeOK, note: "first offence: a good probe ends it", available: true, episodes: 1, until: 3 * s},
			{at: 4 * s, do: send, note: "success does not reset", available: true, episodes: 1},
			{at: 5 * s, do: send, available: true, episodes: 1},
			{at: 6 * s, do: fail(TransportError), note: "fails again within probation", episodes: 2, until: 26 * s},
			{at: 6*s + 100*time.Millisecond, do: fail(TransportError), note: "same incident", episodes: 2, until: 26*s + 100*time.Millisecond},
			{at: 9 * s, do: probeOK, note: "repeat offender: reachable, timer still runs", episodes: 2, until: 26*s + 100*time.Millisecond},
			{at: 26 * s, do: send, note: "timer not yet out: a last-resort send does not end it", episodes: 2},
			{at: 26*s + 100*time.Millisecond, do: send, note: "timer out", available: true, episodes: 2},
			{at: 30 * s, do: fail(BrokerError), note: "third episode, capped at the table's 30s", episodes: 3, until: 60 * s},
			{at: 33 * s, do: probeOK, episodes: 3, until: 60 * s},
		},
	}, {
		name: "broker healthy for the probation returns to first-offence treatment",
		opts: Options{Probing: true, GrowOnRepeat: true},
		steps: []growStep{
			{at: 0, do: fail(TransportError), episodes: 1, until: 10 * s},
			{at: 2 * s, do: probeOK, available: true, episodes: 1, until: 2 * s},
			{at: 4 * s, do: fail(TransportError), note: "second episode", episodes: 2, until: 24 * s},
			{at: 5 * s, do: probeOK, episodes: 2, until: 24 * s},
			{at: 24 * s, do: send, note: "probation runs from the end of the grown isolation", available: true, episodes: 2},
			{at: 34*s - time.Millisecond, do: send, note: "probation not yet over", available: true, episodes: 2},
			{at: 34 * s, do: send, note: "probation over", available: true, episodes: 0},
			{at: 35 * s, do: fail(TransportError), note: "a first offence again", episodes: 1, until: 45 * s},
			{at: 36 * s, do: probeOK, available: true, episodes: 1, until: 36 * s},
		},
	}, {
		name: "probation passes even without sends in between",
		opts: Options{GrowOnRepeat: true},
		steps: []growStep{
			{at: 0, do: fail(BrokerError), episodes: 1, until: 10 * s},
			{at: 10 * s, do: fail(BrokerError), note: "right after the first episode", episodes: 2, until: 30 * s},
			{at: 40 * s, do: fail(TransportError), note: "10s after the second ended", episodes: 1, until: 50 * s},
		},
	}, {
		name: "concurrent failures in one incident count as one episode",
		opts: Options{Probing: true, GrowOnRepeat: true},
		steps: []growStep{
			{at: 0, do: fail(TransportError), episodes: 1, until: 10 * s},
			{at: 100 * time.Millisecond, do: fail(TransportError), episodes: 1, until: 10*s + 100*time.Millisecond},
			{at: 200 * time.Millisecond, do: fail(BrokerError), episodes: 1, until: 10*s + 200*time.Millisecond},
			{at: 1 * s, do: probeKO, note: "probes failing in the same incident", episodes: 1},
			{at: 2 * s, do: probeKO, episodes: 1},
			{at: 3 * s, do: probeOK, note: "still a first offence", available: true, episodes: 1, until: 3 * s},
		},
	}, {
		name: "concurrent failures count once without probing too",
		opts: Options{GrowOnRepeat: true},
		steps: []growStep{
			{at: 0, do: fail(TransportError), episodes: 1, until: 10 * s},
			{at: 300 * time.Millisecond, do: fail(TransportError), note: "extends, does not grow", episodes: 1, until: 10*s + 300*time.Millisecond},
			{at: 1 * s, do: probeKO, note: "a failed probe isolates nothing here", episodes: 1},
		},
	}, {
		name: "a failed probe under probing opens an episode",
		opts: Options{Probing: true, GrowOnRepeat: true},
		steps: []growStep{
			{at: 0, do: send, available: true},
			{at: 1 * s, do: probeKO, note: "held for proof", episodes: 1},
			{at: 2 * s, do: fail(TransportError), note: "same episode", episodes: 1, until: 12 * s},
			{at: 3 * s, do: probeOK, available: true, episodes: 1, until: 3 * s},
			{at: 4 * s, do: probeKO, note: "second episode", episodes: 2},
			{at: 5 * s, do: probeOK, note: "no timer to sit out", available: true, episodes: 2},
		},
	}, {
		name: "GrowOnRepeat off keeps counting attempts and ending isolations by probe",
		opts: Options{Probing: true},
		steps: []growStep{
			{at: 0, do: fail(TransportError), episodes: 1, until: 10 * s},
			{at: 100 * time.Millisecond, do: fail(TransportError), note: "every attempt counts", episodes: 2, until: 10*s + 100*time.Millisecond},
			{at: 3 * s, do: probeOK, available: true, episodes: 2, until: 3 * s},
			{at: 4 * s, do: send, note: "a success resets", available: true, episodes: 0},
			{at: 6 * s, do: fail(TransportError), episodes: 1, until: 16 * s},
			{at: 6*s + 100*time.Millisecond, do: fail(TransportError), note: "no growth", episodes: 2, until: 16*s + 100*time.Millisecond},
			{at: 7 * s, do: probeKO, episodes: 3},
			{at: 9 * s, do: probeOK, note: "ends the isolation whatever the count", available: true, episodes: 3, until: 9 * s},
		},
	}}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := newTol(t, tc.opts)
			for i, st := range tc.steps {
				clk.Set(t0.Add(st.at))
				st.do(tol)
				it := mustLookup(t, tol, "A")
				if got := tol.Available("A"); got != st.available {
					t.Errorf("step %d at %v (%s): available %v, want %v", i, st.at, st.note, got, st.available)
				}
				if it.ConsecutiveFailures != st.episodes {
					t.Errorf("step %d at %v (%s): ConsecutiveFailures %d, want %d", i, st.at, st.note, it.ConsecutiveFailures, st.episodes)
				}
				if st.until != 0 && !it.Until.Equal(t0.Add(st.until)) {
					t.Errorf("step %d at %v (%s): isolated until t0+%v, want t0+%v", i, st.at, st.note, it.Until.Sub(t0), st.until)
				}
			}
		})
	}
}

func TestGrowOnRepeatCountSurvivesRestore(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Probing: true, GrowOnRepeat: true})
	tol.Update("A", ms(1), TransportError)
	clk.Advance(2 * time.Second)
	tol.ProbeResult("A", true, ms(1))
	clk.Advance(time.Second)
	tol.Update("A", ms(1), TransportError) // second episode: 20 s
	saved := tol.Isolated()

	again, clk2, _ := newTol(t, Options{Probing: true, GrowOnRepeat: true})
	clk2.Set(clk.Now().Add(time.Second))
	again.Restore(saved)
	again.ProbeResult("A", true, ms(1))
	if again.Available("A") {
		t.Fatal("a restored repeat offender was readmitted by a probe")
	}
	clk2.Set(saved[0].Until)
	again.Update("A", ms(1), Success)
	clk2.Advance(time.Second)
	again.Update("A", ms(1), TransportError)
	if got := mustLookup(t, again, "A").Until.Sub(clk2.Now()); got != 30*time.Second {
		t.Errorf("third episode after restore isolated for %v, want 30s", got)
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
