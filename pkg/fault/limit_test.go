package fault

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestIsolationLimit(t *testing.T) {
	tests := []struct {
		brokers, percent, want int
		capped                 bool
	}{
		{3, 0, 0, false},
		{3, 100, 0, false},
		{3, -5, 0, false},
		{3, 250, 0, false},
		{0, 50, 0, true},
		{1, 50, 0, true},  // a lone broker is never isolated under a cap
		{2, 10, 1, true},  // at least one may be isolated...
		{2, 99, 1, true},  // ...and at least one stays
		{3, 34, 1, true},  // rounded down
		{3, 67, 2, true},  //
		{10, 10, 1, true}, //
		{10, 25, 2, true},
		{10, 95, 9, true},
		{4, 99, 3, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d brokers at %d%%", tc.brokers, tc.percent), func(t *testing.T) {
			tol, _, _ := newTol(t, Options{MaxIsolatedPercent: tc.percent})
			for i := range tc.brokers {
				tol.Entry(fmt.Sprint("B", i))
			}
			tol.mu.Lock()
			got, capped := tol.isolationLimit()
			tol.mu.Unlock()
			if got != tc.want || capped != tc.capped {
				t.Errorf("isolationLimit() = %d, %v; want %d, %v", got, capped, tc.want, tc.capped)
			}
		})
	}
}

func threeBrokers(t *testing.T, opts Options) (*Tolerance, *ManualClock, *recorder) {
	t.Helper()
	tol, clk, rec := newTol(t, opts)
	for _, b := range []string{"A", "B", "C"} {
		tol.Update(b, ms(5), Success)
	}
	return tol, clk, rec
}

// A broker that dies while the cap is taken by a merely slow one is still avoided: the slow one
// is released.
func TestCapReleasesTheLeastBadForAWorseBroker(t *testing.T) {
	tol, _, rec := threeBrokers(t, Options{MaxIsolatedPercent: 34})
	tol.Update("A", ms(600), Success) // SlowSend, 2 s
	tol.Update("B", ms(1), TransportError)
	wantAvailable(t, tol, map[string]bool{"A": true, "B": false, "C": true})
	got := rec.take()
	if s := changeSummary(got); !slices.Equal(s, []string{"+A", "~A", "+B"}) {
		t.Fatalf("changes %v, want [+A ~A +B]", s)
	}
	if !got[1].Released || got[1].Isolated {
		t.Errorf("release change %+v, want Released and not Isolated", got[1])
	}
	if it := mustLookup(t, tol, "A"); !it.Until.Equal(t0) || it.Reason != ReasonSlowSend {
		t.Errorf("released A = %+v, want its isolation ended at t0", it)
	}
}

// When the newcomer is the least bad, its isolation is refused, but what it taught is kept.
func TestCapRefusesANewcomerThatIsLeastBad(t *testing.T) {
	tol, _, rec := threeBrokers(t, Options{MaxIsolatedPercent: 34})
	tol.Update("A", ms(1), BrokerError)
	rec.take()
	tol.Update("B", ms(3000), Success)
	wantAvailable(t, tol, map[string]bool{"A": false, "B": true, "C": true})
	if got := rec.take(); len(got) != 0 {
		t.Errorf("changes %v, want none for a refused isolation", changeSummary(got))
	}
	it := mustLookup(t, tol, "B")
	if it.Latency != ms(3000) || !it.Reachable {
		t.Errorf("B = %+v, want its latency recorded", it)
	}
	// B's first failure ties A on failures, and B (a transport error) stays reachable while A
	// (a broker error) is not, so B is still the least bad and is refused again.
	tol.Update("B", ms(1), TransportError)
	wantAvailable(t, tol, map[string]bool{"A": false, "B": true})
	// A second failure in a row makes B the worse one: A is released, B isolated.
	tol.Update("B", ms(1), TransportError)
	wantAvailable(t, tol, map[string]bool{"A": true, "B": false})
}

func TestCapKeepsAtLeastOneBrokerSelectable(t *testing.T) {
	for _, tc := range []struct {
		brokers, percent int
	}{{1, 50}, {2, 50}, {2, 99}, {3, 99}, {5, 80}, {5, 1}} {
		t.Run(fmt.Sprintf("%d brokers at %d%%", tc.brokers, tc.percent), func(t *testing.T) {
			tol, clk, _ := newTol(t, Options{MaxIsolatedPercent: tc.percent, Probing: true, GrowOnRepeat: true})
			var names []string
			for i := range tc.brokers {
				names = append(names, fmt.Sprint("B", i))
				tol.Entry(names[i])
			}
			for round := range 5 {
				for i, b := range names {
					tol.Update(b, ms(int64(i)), []Outcome{TransportError, BrokerError}[round%2])
				}
				clk.Advance(time.Duration(round) * time.Second)
				avail := 0
				for _, b := range names {
					if tol.Available(b) {
						avail++
					}
				}
				limit := max(min(max(tc.brokers*tc.percent/100, 1), tc.brokers-1), 0)
				if avail < 1 || tc.brokers-avail > limit {
					t.Fatalf("round %d: %d of %d available, want at least %d", round, avail, tc.brokers, tc.brokers-limit)
				}
			}
		})
	}
}

func TestNoCapIsolatesEveryBroker(t *testing.T) {
	for _, pct := range []int{0, 100} {
		tol, _, _ := threeBrokers(t, Options{MaxIsolatedPercent: pct})
		for _, b := range []string{"A", "B", "C"} {
			tol.Update(b, ms(1), TransportError)
		}
		wantAvailable(t, tol, map[string]bool{"A": false, "B": false, "C": false})
	}
}

func TestCapCountsPodMarksButNeverReleasesThem(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50, RespectPodHealth: true})
	tol.Update("B", ms(1), Success)
	tol.SetPodState("A", PodNotReady)
	tol.Update("B", ms(1), TransportError)
	wantAvailable(t, tol, map[string]bool{"A": false, "B": true})

	// A pod mark that breaks the isolation limit releases a latency isolation instead.
	tol2, _, rec := threeBrokers(t, Options{MaxIsolatedPercent: 34, RespectPodHealth: true})
	tol2.Update("B", ms(1), TransportError)
	tol2.SetPodState("A", PodTerminating)
	wantAvailable(t, tol2, map[string]bool{"A": false, "B": true, "C": true})
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"+B", "~B", "+A"}) {
		t.Errorf("changes %v, want [+B ~B +A]", got)
	}
}

func TestCapOnlyPodMarksLeftMayExceedIt(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50, RespectPodHealth: true})
	tol.SetPodState("A", PodNotReady)
	tol.SetPodState("B", PodTerminating)
	// Pods say both are going; the cap cannot bring them back, and selection falls back.
	wantAvailable(t, tol, map[string]bool{"A": false, "B": false})
}

func TestConfigureWithALowerCapReleasesTheLeastBad(t *testing.T) {
	tol, clk, rec := threeBrokers(t, Options{})
	tol.Update("C", ms(1), TransportError)
	tol.Update("C", ms(1), TransportError) // C: two failures, the worst
	clk.Advance(time.Second)
	tol.Update("A", ms(1), TransportError) // A ends later than B: worse than B
	tol.Update("B", ms(1), BrokerError)    // B: unreachable, worse than A
	rec.take()
	tol.Configure(Options{MaxIsolatedPercent: 34, OnChange: rec.on})
	wantAvailable(t, tol, map[string]bool{"A": true, "B": true, "C": false})
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"~A", "~B"}) {
		t.Errorf("changes %v, want [~A ~B] (least bad first)", got)
	}
}

func TestRemoveShrinksTheCap(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50})
	for _, b := range []string{"A", "B", "C", "D"} {
		tol.Entry(b)
	}
	tol.Update("A", ms(1), TransportError)
	tol.Update("B", ms(1), TransportError)
	tol.Update("B", ms(1), TransportError)
	wantAvailable(t, tol, map[string]bool{"A": false, "B": false})
	tol.Remove("C")
	tol.SetPodState("D", PodGone)
	wantAvailable(t, tol, map[string]bool{"A": true, "B": false})
}

func TestCapReleaseWaivesProofHold(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50, Probing: true})
	tol.Entry("A")
	tol.Update("B", ms(1), TransportError)
	tol.Update("B", ms(1), TransportError)
	tol.Update("A", ms(1), TransportError) // A is least bad: refused although unreachable
	wantAvailable(t, tol, map[string]bool{"A": true, "B": false})
	if tol.Reachable("A") {
		t.Error("refusing the isolation must not pretend A is reachable")
	}
}

// Pod marks may fill the cap beyond its limit; an isolation hidden under a pod mark starts to
// count when the mark goes, and the cap then releases it.
func TestCapCountsAnIsolationOnceItsPodMarkGoes(t *testing.T) {
	tol, _, rec := threeBrokers(t, Options{MaxIsolatedPercent: 34, RespectPodHealth: true})
	tol.SetPodState("A", PodNotReady)
	tol.SetPodState("B", PodNotReady)
	tol.Update("B", ms(1), TransportError) // B is already unavailable: no cap check
	wantAvailable(t, tol, map[string]bool{"A": false, "B": false, "C": true})
	rec.take()
	tol.SetPodState("B", PodReady)
	wantAvailable(t, tol, map[string]bool{"A": false, "B": true, "C": true})
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"~B"}) {
		t.Errorf("changes %v, want [~B]", got)
	}
}

// A broker that does not answer at all stays out when the cap is taken and a live broker answers
// "busy": the live one is the one readmitted, whether the silent one's evidence is a send without
// an answer or a failed probe, and even when the live one has failed more often.
func TestCapKeepsTheSilentBrokerOutOverOneThatAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		silent func(tol *Tolerance)
		busy   func(tol *Tolerance, clk *ManualClock)
	}{
		{"a send without an answer, then a busy answer", func(tol *Tolerance) {
			tol.Update("A", ms(400), TransportError)
		}, func(tol *Tolerance, _ *ManualClock) {
			tol.Update("B", ms(2), BrokerError)
		}},
		{"a failed probe, then a busy answer", func(tol *Tolerance) {
			tol.Update("A", ms(400), TransportError)
			tol.ProbeResult("A", false, ms(200))
		}, func(tol *Tolerance, _ *ManualClock) {
			tol.Update("B", ms(2), BrokerError)
		}},
		{"a failed probe, then a broker busy for the second time", func(tol *Tolerance) {
			tol.Update("A", ms(400), TransportError)
			tol.ProbeResult("A", false, ms(200))
		}, func(tol *Tolerance, clk *ManualClock) {
			tol.Update("B", ms(2), BrokerError)
			tol.ProbeResult("B", true, ms(1))
			clk.Advance(11 * time.Second)
			tol.Update("B", ms(2), BrokerError)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, _ := threeBrokers(t, Options{MaxIsolatedPercent: 34, Probing: true, GrowOnRepeat: true})
			tc.silent(tol)
			clk.Advance(100 * time.Millisecond) // the busy broker's isolation would end later
			tc.busy(tol, clk)
			wantAvailable(t, tol, map[string]bool{"A": false, "B": true, "C": true})
		})
	}
}
