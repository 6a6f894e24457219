package fault

import (
	"slices"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// recorder collects OnChange calls.
type recorder struct {
	mu      sync.Mutex
	changes []Change
}

func (r *recorder) on(c Change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

// take returns and forgets the changes collected so far.
func (r *recorder) take() []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.changes
	r.changes = nil
	return out
}

// newTol builds a Tolerance on a manual clock at t0 with changes recorded.
func newTol(t testing.TB, opts Options) (*Tolerance, *ManualClock, *recorder) {
	t.Helper()
	clk := NewManualClock(t0)
	rec := &recorder{}
	opts.Clock = clk
	if opts.OnChange == nil {
		opts.OnChange = rec.on
	}
	return New(opts), clk, rec
}

func mustLookup(t testing.TB, tol *Tolerance, broker string) Item {
	t.Helper()
	it, ok := tol.Lookup(broker)
	if !ok {
		t.Fatalf("broker %s unknown", broker)
	}
	return it
}

// isolatedNames lists the brokers Isolated reports.
func isolatedNames(tol *Tolerance) []string {
	var out []string
	for _, it := range tol.Isolated() {
		out = append(out, it.Broker)
	}
	return out
}

// wantAvailable checks Available, the Entry handle and Isolated agree on every broker.
func wantAvailable(t testing.TB, tol *Tolerance, want map[string]bool) {
	t.Helper()
	iso := isolatedNames(tol)
	for b, w := range want {
		if got := tol.Available(b); got != w {
			t.Errorf("Available(%s) = %v, want %v", b, got, w)
		}
		// Entry would create unknown brokers and change the isolation limit's count, so look up
		// directly.
		if e := tol.lookup(b); e != nil && e.Available() != w {
			t.Errorf("Entry(%s).Available() = %v, want %v", b, !w, w)
		}
		if got := slices.Contains(iso, b); got == w {
			t.Errorf("Isolated() = %v: %s listed = %v, want %v", iso, b, got, !w)
		}
	}
}

// changeSummary renders changes as "+A" (isolated), "-A" (available again), "~A" (released).
func changeSummary(cs []Change) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		switch {
		case c.Released:
			out = append(out, "~"+c.Broker)
		case c.Isolated:
			out = append(out, "+"+c.Broker)
		default:
			out = append(out, "-"+c.Broker)
		}
	}
	return out
}
