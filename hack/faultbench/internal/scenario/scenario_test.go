package scenario

import (
	"slices"
	"testing"
	"time"
)

// TestHedgingScenariosShapeTheirFaults proves the scenarios made for hedging: hang-100 holds one
// send in a hundred where hang holds one in ten, and all-slow stops every broker together for
// one stall in the middle of the run, singles out no broker and is not in the default run.
func TestHedgingScenariosShapeTheirFaults(t *testing.T) {
	const d = 20 * time.Second
	tests := []struct {
		name      string
		hangEvery int
		kinds     []ActionKind
		at        []time.Duration
		noBad     bool
		inDefault bool
	}{
		{"hang", HangEvery, []ActionKind{ActHang}, []time.Duration{5 * time.Second}, false, true},
		{"hang-100", HangEveryRare, []ActionKind{ActHang}, []time.Duration{5 * time.Second}, false, false},
		{"all-slow", 0, []ActionKind{ActPauseAll, ActResumeAll}, []time.Duration{10 * time.Second, 10*time.Second + StallPause}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := BuildRealScenario(tc.name, d)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []ActionKind
			var at []time.Duration
			for _, a := range sc.Actions {
				kinds, at = append(kinds, a.Kind), append(at, a.At)
			}
			if sc.HangEvery != tc.hangEvery || sc.Gate != (tc.hangEvery > 0) || !slices.Equal(kinds, tc.kinds) || !slices.Equal(at, tc.at) {
				t.Errorf("hang every %d (gate %v), steps %v at %v; want %d, %v at %v", sc.HangEvery, sc.Gate, kinds, at, tc.hangEvery, tc.kinds, tc.at)
			}
			if sc.NoBadBroker != tc.noBad || (len(sc.Faulty) == 0) != tc.noBad {
				t.Errorf("no bad broker %v with faulty spans %v, want %v", sc.NoBadBroker, sc.Faulty, tc.noBad)
			}
			if slices.Contains(DefaultReal, tc.name) != tc.inDefault || !slices.Contains(RealNames, tc.name) {
				t.Errorf("in the default run %v, want %v (and every scenario among RealNames)", slices.Contains(DefaultReal, tc.name), tc.inDefault)
			}
		})
	}
}
