package fault

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// latest keeps, per broker, the change with the highest sequence number: the way a consumer of
// OnChange reconstructs state when callbacks of concurrent calls arrive out of order.
type latest struct {
	mu   sync.Mutex
	last map[string]Change
}

func (l *latest) on(c Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.last[c.Broker]; !ok || c.Seq > old.Seq {
		l.last[c.Broker] = c
	}
}

func (l *latest) isolated() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for b, c := range l.last {
		if c.Isolated {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// Everything at once, for the race detector, then the invariants once the dust settles.
func TestConcurrentUseKeepsInvariants(t *testing.T) {
	brokers := []string{"A", "B", "C", "D", "E"}
	clk := NewManualClock(t0)
	lat := &latest{last: map[string]Change{}}
	base := Options{Clock: clk, MaxIsolatedPercent: 40, RespectPodHealth: true, OnChange: lat.on}
	tol := New(base)
	entries := make([]*Entry, len(brokers))
	for i, b := range brokers {
		entries[i] = tol.Entry(b)
	}

	var stop atomic.Bool
	var readers, workers sync.WaitGroup
	// Readers: the selection path. Handles must stay the same objects while brokers are removed
	// and come back.
	for r := range 4 {
		readers.Go(func() {
			for i := 0; !stop.Load(); i++ {
				e := entries[(i+r)%len(entries)]
				_ = e.Available()
				_ = e.Reachable()
				_ = tol.Available(brokers[i%len(brokers)])
				_ = tol.Reachable(brokers[i%len(brokers)])
				if i%64 == 0 && tol.lookup(e.Name()) != e {
					t.Errorf("the handle of %s was replaced", e.Name())
					return
				}
			}
		})
	}
	// Writers: send outcomes, probes, pod marks.
	for w := range 4 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 3000 {
				b := brokers[rng.IntN(len(brokers)-1)] // E only gets pod marks
				switch rng.IntN(10) {
				case 0, 1, 2, 3:
					tol.Update(b, ms(int64(rng.IntN(100))), Success)
				case 4:
					tol.Update(b, ms(int64(rng.IntN(20000))), Success)
				case 5:
					tol.Update(b, ms(3), TransportError)
				case 6:
					tol.Update(b, ms(3), BrokerError)
				case 7:
					tol.Update(b, ms(3), ClientError)
				case 8:
					tol.ProbeResult(b, rng.IntN(2) == 0, ms(1))
				case 9:
					tol.SetPodState("E", PodState(rng.IntN(3)))
				}
			}
		})
	}
	// Control plane: policy switches, snapshots, restore, time.
	workers.Go(func() {
		rng := rand.New(rand.NewPCG(99, 7))
		for i := range 300 {
			opts := base
			opts.Probing = rng.IntN(2) == 0
			opts.GrowOnRepeat = rng.IntN(2) == 0
			tol.Configure(opts)
			tol.Restore(tol.Isolated())
			tol.Expire()
			_, _ = tol.NextExpiry()
			_ = tol.Brokers()
			clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
			if i%50 == 0 {
				tol.Remove("D")
			}
		}
	})
	workers.Wait()
	stop.Store(true)
	readers.Wait()

	tol.Expire()
	got := isolatedNames(tol)
	if want := lat.isolated(); !slices.Equal(got, want) {
		t.Errorf("Isolated() = %v, but the latest changes say %v", got, want)
	}
	n := len(tol.Brokers())
	if limit := max(n*40/100, 1); len(got) > limit {
		t.Errorf("%d of %d brokers isolated under a 40%% cap (limit %d): %+v", len(got), n, limit, tol.Isolated())
	}
}

func TestConcurrentFastAndSlowUpdatesOfOneBroker(t *testing.T) {
	tol := New(Options{Clock: NewManualClock(t0)})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 2000 {
				if g == 0 && i%10 == 0 {
					tol.Update("A", ms(1), BrokerError)
				} else {
					tol.Update("A", ms(int64(i%40)), Success)
				}
			}
		})
	}
	wg.Wait()
	tol.Update("A", ms(1), Success)
	it := mustLookup(t, tol, "A")
	if !it.Reachable || it.ConsecutiveFailures != 0 || it.Latency != ms(1) {
		t.Errorf("after a final success: %+v", it)
	}
	// Until was set by the broker errors and stays: successes never shorten it.
	if !it.Until.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("until %v, want t0+10s", it.Until)
	}
}

func TestConcurrentLookupsWhileBrokersComeAndGo(t *testing.T) {
	tol := New(Options{Clock: NewManualClock(t0)})
	names := make([]string, 128)
	for i := range names {
		names[i] = fmt.Sprint("B", i)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				// B0..B63 come and go; B64..B127 are never updated and must read available
				// and reachable through every map swap.
				_ = tol.Available(names[i%64])
				if b := names[64+i%64]; !tol.Available(b) || !tol.Reachable(b) {
					t.Errorf("%s, never updated, reads unavailable or unreachable", b)
					return
				}
			}
		})
	}
	for i := range 64 {
		b := names[i]
		tol.Update(b, ms(1), TransportError)
		if i%3 == 0 {
			tol.Remove(b)
		}
	}
	stop.Store(true)
	wg.Wait()
	if got := len(tol.Brokers()); got != 64-22 {
		t.Errorf("%d brokers known, want %d", got, 64-22)
	}
}

// TestEntryOfARemovedBrokerWhileAnUpdateBringsItBack has a route being compiled (Entry) race a
// probe's outcome (WatchFailed) for a broker the table removed: both bring the tombstone back, and
// under -race the handle's presence must never be read without the table's lock.
func TestEntryOfARemovedBrokerWhileAnUpdateBringsItBack(t *testing.T) {
	tol := New(Options{Probing: true})
	for i := 0; i < 200; i++ {
		tol.Entry("broker-a")
		tol.Remove("broker-a")
		var wg sync.WaitGroup
		wg.Add(2)
		var got *Entry
		go func() { defer wg.Done(); got = tol.Entry("broker-a") }()
		go func() { defer wg.Done(); tol.WatchFailed("broker-a", time.Second) }()
		wg.Wait()
		if got == nil || got.Name() != "broker-a" {
			t.Fatalf("Entry returned %v", got)
		}
		if bs := tol.Brokers(); !slices.Equal(bs, []string{"broker-a"}) {
			t.Fatalf("brokers %v after Entry and an update brought broker-a back", bs)
		}
	}
}
