package fault

import (
	"sync"
	"testing"
	"time"
)

func TestManualClockMovesOnlyWhenTold(t *testing.T) {
	clk := NewManualClock(t0)
	if !clk.Now().Equal(t0) || !clk.Now().Equal(t0) {
		t.Fatal("manual clock moved by itself")
	}
	if got := clk.Advance(1500 * time.Millisecond); !got.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Errorf("Advance returned %v", got)
	}
	clk.Advance(-500 * time.Millisecond)
	if got := clk.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("Now() = %v, want t0+1s", got)
	}
	later := t0.Add(72 * time.Hour)
	clk.Set(later)
	if got := clk.Now(); !got.Equal(later) {
		t.Errorf("after Set, Now() = %v, want %v", got, later)
	}
}

func TestManualClockIsSafeForConcurrentUse(t *testing.T) {
	clk := NewManualClock(t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				clk.Advance(time.Millisecond)
				_ = clk.Now()
			}
		})
	}
	wg.Wait()
	if got := clk.Now(); !got.Equal(t0.Add(8 * time.Second)) {
		t.Errorf("Now() = %v, want t0+8s", got)
	}
}

// With the real clock, isolation is measured on the monotonic clock; no test waits for it.
func TestRealClockIsolation(t *testing.T) {
	tol := New(Options{})
	before := time.Now()
	tol.Update("A", ms(16000), Success)
	after := time.Now()
	if tol.Available("A") || tol.Entry("A").Available() {
		t.Fatal("A available right after a 16 s send")
	}
	it := mustLookup(t, tol, "A")
	if it.Until.Before(before.Add(30*time.Second)) || it.Until.After(after.Add(30*time.Second)) {
		t.Errorf("until %v not 30 s after the update (between %v and %v)", it.Until, before, after)
	}
	if it.Since.Before(before.Round(0)) || it.Since.After(after.Round(0)) {
		t.Errorf("since %v not at the update", it.Since)
	}
	if _, ok := (New(Options{Clock: RealClock{}})).clock.(RealClock); !ok {
		t.Error("RealClock not recognised")
	}
}

// A manual clock set back before its start keeps working: ticks stay positive.
func TestClockSetBackwards(t *testing.T) {
	tol, clk, _ := newTol(t, Options{})
	clk.Set(t0.Add(-24 * time.Hour))
	tol.Update("A", ms(1), TransportError)
	if tol.Available("A") {
		t.Fatal("A available after a failure")
	}
	clk.Advance(10 * time.Second)
	if !tol.Available("A") {
		t.Fatal("A unavailable after its isolation")
	}
}
