package routecache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable clock for the cache's Now.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// eventually polls cond for up to ten seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

var errNotThere = errors.New("not there")

// source is what the tests load from: keys it knows, the loads it served, the values dropped.
type source struct {
	mu      sync.Mutex
	known   func(key string) bool
	gate    chan struct{} // when set, loads wait for it to close
	loads   map[string]int
	dropped map[string]int
}

func newSource(known func(string) bool) *source {
	return &source{known: known, loads: map[string]int{}, dropped: map[string]int{}}
}

func (s *source) load(key string) error {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	s.loads[key]++
	s.mu.Unlock()
	if !s.known(key) {
		return fmt.Errorf("%s: %w", key, errNotThere)
	}
	return nil
}

func (s *source) loadsOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[key]
}

func (s *source) totalLoads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.loads {
		n += v
	}
	return n
}

func (s *source) droppedOf(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped[key]
}

// newCache is a cache of keys (the value is the key itself) over src on clock clk.
func newCache(t *testing.T, src *source, clk *clock, opts Options[string]) *Cache[string] {
	opts.Load = src.load
	opts.IsMiss = func(err error) bool { return errors.Is(err, errNotThere) }
	opts.Drop = func(key string) {
		src.mu.Lock()
		src.dropped[key]++
		src.mu.Unlock()
	}
	opts.Now = clk.now
	c := New(opts)
	t.Cleanup(c.Close)
	return c
}

func use(c *Cache[string], key string) error {
	return c.Use(context.Background(), key, func() string { return key })
}

func TestConcurrentFirstUsesShareOneLoad(t *testing.T) {
	src := newSource(func(string) bool { return true })
	src.gate = make(chan struct{})
	c := newCache(t, src, newClock(), Options[string]{})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- use(c, "orders") })
	}
	eventually(t, func() bool { return c.Count(func(string) bool { return true }) == 1 })
	close(src.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("use: %v", err)
		}
	}
	if n := src.loadsOf("orders"); n != 1 {
		t.Fatalf("50 first uses at once loaded %d times, want 1", n)
	}
}

func TestMissIsRememberedForItsTTLThenAskedAgain(t *testing.T) {
	var exists atomic.Bool
	src := newSource(func(string) bool { return exists.Load() })
	clk := newClock()
	c := newCache(t, src, clk, Options[string]{MissTTL: 5 * time.Second})
	for i := range 10 {
		if err := use(c, "later"); !errors.Is(err, errNotThere) {
			t.Fatalf("use %d of a missing key: %v, want the miss", i, err)
		}
	}
	if n := src.loadsOf("later"); n != 1 {
		t.Fatalf("10 uses of a missing key within its TTL loaded %d times, want 1", n)
	}
	if n := c.Stats().Misses; n != 1 {
		t.Fatalf("misses remembered: %d, want 1", n)
	}
	exists.Store(true)
	clk.advance(5 * time.Second)
	if err := use(c, "later"); err != nil {
		t.Fatalf("use after the TTL, the key now there: %v", err)
	}
	if n := src.loadsOf("later"); n != 2 {
		t.Fatalf("loads after the TTL: %d, want 2", n)
	}
}

func TestRouteCacheBoundAgainstRandomKeys(t *testing.T) {
	tests := []struct {
		name  string
		known func(string) bool
	}{
		// A client naming topics nobody created: every answer is a miss.
		{name: "unknown keys", known: func(string) bool { return false }},
		// A client cycling through more real topics than the cache holds.
		{name: "known keys", known: func(string) bool { return true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := newSource(tt.known)
			clk := newClock()
			opts := Options[string]{MaxKeys: 100, MaxMisses: 50, LoadsPerSecond: 1000, LoadBurst: 200}
			c := newCache(t, src, clk, opts)
			const keys, perSecond = 100000, 5000
			busy := 0
			for i := range keys {
				if i%perSecond == 0 {
					clk.advance(time.Second)
				}
				err := use(c, fmt.Sprintf("random-%d", i))
				if errors.Is(err, ErrBusy) {
					busy++
				}
				if s := c.Stats(); s.Keys > opts.MaxKeys || s.Misses > opts.MaxMisses {
					t.Fatalf("after %d keys the cache holds %d values and %d misses, bounds %d and %d",
						i+1, s.Keys, s.Misses, opts.MaxKeys, opts.MaxMisses)
				}
			}
			seconds := keys / perSecond
			bound := opts.LoadBurst + seconds*int(opts.LoadsPerSecond)
			if n := src.totalLoads(); n > bound {
				t.Fatalf("%d keys over %d s loaded %d times, more than the burst and rate allow (%d)", keys, seconds, n, bound)
			}
			if busy == 0 {
				t.Fatal("no key was refused as busy, yet the keys came faster than the rate")
			}
		})
	}
}

func TestEvictedAndIdleValuesAreDropped(t *testing.T) {
	src := newSource(func(string) bool { return true })
	clk := newClock()
	c := newCache(t, src, clk, Options[string]{MaxKeys: 2, IdleAfter: time.Minute})
	for _, k := range []string{"a", "b"} {
		if err := use(c, k); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(time.Second)
	if err := use(c, "a"); err != nil { // a is now the most recently used
		t.Fatal(err)
	}
	clk.advance(time.Second)
	if err := use(c, "c"); err != nil {
		t.Fatal(err)
	}
	if src.droppedOf("b") != 1 || src.droppedOf("a") != 0 {
		t.Fatalf("a full cache dropped a %d and b %d times; want the least recently used, b, once", src.droppedOf("a"), src.droppedOf("b"))
	}
	clk.advance(30 * time.Second)
	if err := use(c, "c"); err != nil {
		t.Fatal(err)
	}
	clk.advance(31 * time.Second)
	c.Sweep()
	if src.droppedOf("a") != 1 || src.droppedOf("c") != 0 {
		t.Fatalf("after a minute unused a was dropped %d times, c (used 31 s ago) %d; want 1 and 0", src.droppedOf("a"), src.droppedOf("c"))
	}
	if s := c.Stats(); s.Evicted != 1 || s.Expired != 1 || s.Keys != 1 {
		t.Fatalf("stats %+v, want one evicted, one expired, one held", s)
	}
}

func TestUseRefreshesAValueOlderThanItsPeriod(t *testing.T) {
	src := newSource(func(string) bool { return true })
	clk := newClock()
	c := newCache(t, src, clk, Options[string]{RefreshAfter: func(string) time.Duration { return 20 * time.Second }})
	if err := use(c, "orders"); err != nil {
		t.Fatal(err)
	}
	clk.advance(19 * time.Second)
	if err := use(c, "orders"); err != nil {
		t.Fatal(err)
	}
	if n := src.loadsOf("orders"); n != 1 {
		t.Fatalf("a use within the period loaded again: %d loads", n)
	}
	clk.advance(time.Second)
	if err := use(c, "orders"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return src.loadsOf("orders") == 2 })
	c.Refresh("orders")
	eventually(t, func() bool { return src.loadsOf("orders") == 3 })
}

func TestCanceledWaiterLeavesTheLoadToOthers(t *testing.T) {
	src := newSource(func(string) bool { return true })
	src.gate = make(chan struct{})
	c := newCache(t, src, newClock(), Options[string]{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Use(ctx, "orders", func() string { return "orders" }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled first use: %v, want context.Canceled", err)
	}
	close(src.gate)
	if err := use(c, "orders"); err != nil {
		t.Fatalf("the next use: %v", err)
	}
	if n := src.loadsOf("orders"); n != 1 {
		t.Fatalf("loads: %d, want the one the canceled use started", n)
	}
}

func TestForgetDropsMatchingValuesAndMisses(t *testing.T) {
	src := newSource(func(k string) bool { return k != "x/missing" })
	c := newCache(t, src, newClock(), Options[string]{})
	for _, k := range []string{"x/a", "x/b", "y/a"} {
		if err := use(c, k); err != nil {
			t.Fatal(err)
		}
	}
	_ = use(c, "x/missing")
	c.Forget(func(k string) bool { return k[0] == 'x' })
	if got := c.Count(func(string) bool { return true }); got != 1 {
		t.Fatalf("held after forgetting x: %d, want 1", got)
	}
	if n := c.Stats().Misses; n != 0 {
		t.Fatalf("misses after forgetting x: %d, want 0", n)
	}
	if src.droppedOf("x/a") != 1 || src.droppedOf("y/a") != 0 {
		t.Fatal("Forget dropped the wrong values")
	}
}
