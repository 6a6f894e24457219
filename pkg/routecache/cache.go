// Package routecache keeps values loaded on first use, as a RocketMQ Proxy keeps the routes of
// the topics its clients use: loaded once however many callers ask at the same moment, refreshed
// on use once older than a period, dropped after a while unused, at most a set number at once,
// and a key the source does not know remembered briefly. Callers choose the keys (a client names
// any topic it likes), so nothing a caller does can grow the cache past its bound or make it
// load faster than its rate: a key beyond the rate is answered ErrBusy without a load.
//
// The cache knows nothing of what it holds: the owner makes a value for a key, loads it (a load
// installs whatever the value stands for) and is told when the value leaves.
package routecache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults, those of RocketMQ Proxy's route cache where it has one (at most 20,000 topics,
// dropped after 300 s unused).
const (
	DefaultMaxKeys   = 20000
	DefaultIdleAfter = 300 * time.Second
	DefaultRefresh   = 30 * time.Second
	// DefaultMissTTL is how long a key the source does not know is answered from memory: long
	// enough that a client retrying a missing topic costs the name servers little, short enough
	// that a topic created a moment later is found soon.
	DefaultMissTTL = 5 * time.Second
	// DefaultFailTTL is how long a failed load (the source unreachable) is answered from memory,
	// so that requests arriving while the source is down do not each ask it again.
	DefaultFailTTL = time.Second
	// DefaultMaxMisses bounds the remembered misses and failures.
	DefaultMaxMisses = 4096
	// DefaultLoadsPerSecond and DefaultLoadBurst bound the first loads of new keys: a client
	// naming a million random topics costs the source at most this many queries a second.
	DefaultLoadsPerSecond = 200
	DefaultLoadBurst      = 1000
	// DefaultWorkers is how many refreshes run at once.
	DefaultWorkers = 4
)

// ErrBusy is returned for a new key while the first loads of other keys have used up the rate:
// the caller should try again shortly. Nothing was loaded and nothing was remembered.
var ErrBusy = errors.New("too many new keys at once")

// Options configures a Cache. Zero fields take the defaults above.
type Options[V any] struct {
	// MaxKeys bounds the values held; a new key beyond it drops the least recently used of a
	// sample of the others.
	MaxKeys int
	// IdleAfter is how long a value stays unused before it is dropped.
	IdleAfter time.Duration
	// MissTTL and FailTTL are how long a first load's miss (IsMiss) or other failure is answered
	// from memory; MaxMisses bounds how many are remembered.
	MissTTL, FailTTL time.Duration
	MaxMisses        int
	// LoadsPerSecond and LoadBurst are the token bucket of first loads.
	LoadsPerSecond float64
	LoadBurst      int
	// Workers is how many refreshes run at once; refreshes beyond what they keep up with wait
	// for the next use.
	Workers int
	// RefreshAfter is how old a value's last load may be before a use refreshes it; nil means
	// DefaultRefresh for every value.
	RefreshAfter func(V) time.Duration
	// Load loads or refreshes a value, blocking; a first load's error is the answer to every
	// caller waiting for it. A refresh's error is the owner's to keep (the last value stays).
	Load func(V) error
	// IsMiss reports whether a load's error says the source does not know the key; nil means
	// no error is a miss.
	IsMiss func(error) bool
	// Drop is told that a value left the cache (unused, evicted, forgotten, or its first load
	// failed). It is never called with the cache's lock held, and may be called while a load of
	// the same value still runs: the owner must then keep the load from taking effect.
	Drop func(V)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// entry is one key's value and its state.
type entry[V any] struct {
	key   string
	value V
	// ready is closed when the first load has ended; err is its error, set before.
	ready chan struct{}
	err   error
	// lastUse and loadedAt are Unix nanoseconds.
	lastUse, loadedAt atomic.Int64
	refreshing        atomic.Bool
}

// miss is a remembered first load that found nothing, or failed.
type miss struct {
	err   error
	until time.Time
}

// Cache holds values by key. Its methods are safe for concurrent use.
type Cache[V any] struct {
	opts Options[V]

	mu      sync.RWMutex
	entries map[string]*entry[V]
	misses  map[string]miss
	tokens  float64
	filled  time.Time

	refreshes chan *entry[V]
	stop      chan struct{}
	wg        sync.WaitGroup
	closed    bool

	loads, busy, evicted, expired atomic.Uint64
}

// New starts a Cache: its refresh workers and the sweep that drops unused values.
func New[V any](opts Options[V]) *Cache[V] {
	fill(&opts)
	c := &Cache[V]{opts: opts, entries: map[string]*entry[V]{}, misses: map[string]miss{},
		tokens: float64(opts.LoadBurst), filled: opts.Now(),
		refreshes: make(chan *entry[V], opts.Workers*64), stop: make(chan struct{})}
	for range opts.Workers {
		c.wg.Add(1)
		go c.refreshWorker()
	}
	c.wg.Add(1)
	go c.sweepLoop()
	return c
}

// fill puts the defaults into the zero fields.
func fill[V any](o *Options[V]) {
	setDefault(&o.MaxKeys, DefaultMaxKeys)
	setDefault(&o.IdleAfter, DefaultIdleAfter)
	setDefault(&o.MissTTL, DefaultMissTTL)
	setDefault(&o.FailTTL, DefaultFailTTL)
	setDefault(&o.MaxMisses, DefaultMaxMisses)
	setDefault(&o.LoadsPerSecond, DefaultLoadsPerSecond)
	setDefault(&o.LoadBurst, DefaultLoadBurst)
	setDefault(&o.Workers, DefaultWorkers)
	if o.RefreshAfter == nil {
		o.RefreshAfter = func(V) time.Duration { return DefaultRefresh }
	}
	if o.IsMiss == nil {
		o.IsMiss = func(error) bool { return false }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Load == nil {
		o.Load = func(V) error { return nil }
	}
	if o.Drop == nil {
		o.Drop = func(V) {}
	}
}

func setDefault[T int | float64 | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Use returns once key's value is loaded, loading it first when the cache does not hold it
// (newValue creates the value then; callers asking for the same key meanwhile share that one load).
// It returns the first load's error, a remembered miss or failure, ErrBusy when the first-load
// rate is used up, or ctx's error when ctx ends first (the load goes on for the others).
// A value older than its refresh period is refreshed in the background: the call does not wait.
func (c *Cache[V]) Use(ctx context.Context, key string, newValue func() V) error {
	c.mu.RLock()
	e := c.entries[key]
	c.mu.RUnlock()
	if e == nil {
		var err error
		if e, err = c.admit(key, newValue); e == nil {
			return err
		}
	}
	return c.await(ctx, e)
}

// await marks e used, waits for its first load and starts a refresh when it is due.
func (c *Cache[V]) await(ctx context.Context, e *entry[V]) error {
	now := c.opts.Now()
	e.lastUse.Store(now.UnixNano())
	select {
	case <-e.ready:
	default:
		select {
		case <-e.ready:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if e.err != nil {
		return e.err
	}
	if now.UnixNano()-e.loadedAt.Load() >= int64(c.opts.RefreshAfter(e.value)) {
		c.queueRefresh(e)
	}
	return nil
}

// admit makes key's entry and starts its first load, unless the key is remembered as missing,
// the rate is used up, or another caller admitted it meanwhile (that entry is returned).
func (c *Cache[V]) admit(key string, newValue func() V) (*entry[V], error) {
	now := c.opts.Now()
	c.mu.Lock()
	if e := c.entries[key]; e != nil {
		c.mu.Unlock()
		return e, nil
	}
	if m, ok := c.misses[key]; ok && now.Before(m.until) {
		c.mu.Unlock()
		return nil, m.err
	}
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("routecache: closed")
	}
	if !c.takeToken(now) {
		c.mu.Unlock()
		c.busy.Add(1)
		return nil, fmt.Errorf("%w: more than %d first loads, then %g a second; try again shortly", ErrBusy,
			c.opts.LoadBurst, c.opts.LoadsPerSecond)
	}
	delete(c.misses, key)
	var evicted []*entry[V]
	if len(c.entries) >= c.opts.MaxKeys {
		evicted = c.evictLocked()
	}
	e := &entry[V]{key: key, value: newValue(), ready: make(chan struct{})}
	e.lastUse.Store(now.UnixNano())
	c.entries[key] = e
	c.wg.Add(1)
	c.mu.Unlock()
	c.dropAll(evicted)
	c.loads.Add(1)
	go c.firstLoad(e)
	return e, nil
}

// takeToken spends one first-load token, refilling the bucket for the time passed.
func (c *Cache[V]) takeToken(now time.Time) bool {
	if d := now.Sub(c.filled); d > 0 {
		c.tokens = min(float64(c.opts.LoadBurst), c.tokens+d.Seconds()*c.opts.LoadsPerSecond)
		c.filled = now
	}
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// evictSample is how many entries an eviction compares: enough that the one dropped is almost
// always among the least recently used, few enough that a full cache admits a key in
// microseconds.
const evictSample = 16

// evictLocked removes the least recently used of a sample of loaded entries and returns it for
// dropping; c.mu is held.
func (c *Cache[V]) evictLocked() []*entry[V] {
	var victim *entry[V]
	n := 0
	for _, e := range c.entries {
		select {
		case <-e.ready:
		default:
			continue // a first load in flight has callers waiting on it
		}
		if victim == nil || e.lastUse.Load() < victim.lastUse.Load() {
			victim = e
		}
		if n++; n == evictSample {
			break
		}
	}
	if victim == nil {
		return nil
	}
	delete(c.entries, victim.key)
	c.evicted.Add(1)
	return []*entry[V]{victim}
}

// firstLoad loads a new entry; a failure removes it, is remembered, and is every waiter's answer.
func (c *Cache[V]) firstLoad(e *entry[V]) {
	defer c.wg.Done()
	err := c.opts.Load(e.value)
	if err == nil {
		e.loadedAt.Store(c.opts.Now().UnixNano())
		close(e.ready)
		return
	}
	e.err = err
	ttl := c.opts.FailTTL
	if c.opts.IsMiss(err) {
		ttl = c.opts.MissTTL
	}
	c.mu.Lock()
	gone := c.entries[e.key] == e
	if gone {
		delete(c.entries, e.key)
	}
	c.rememberLocked(e.key, miss{err: err, until: c.opts.Now().Add(ttl)})
	c.mu.Unlock()
	close(e.ready)
	if gone {
		c.opts.Drop(e.value)
	}
}

// rememberLocked keeps a miss within MaxMisses: expired ones go first, then any.
func (c *Cache[V]) rememberLocked(key string, m miss) {
	if len(c.misses) >= c.opts.MaxMisses {
		now := c.opts.Now()
		for k, old := range c.misses {
			if !now.Before(old.until) {
				delete(c.misses, k)
			}
		}
		for k := range c.misses {
			if len(c.misses) < c.opts.MaxMisses {
				break
			}
			delete(c.misses, k)
		}
	}
	c.misses[key] = m
}

// Refresh asks for key's value to be loaded again now, whatever its age; nothing happens for a
// key the cache does not hold or one already being refreshed.
func (c *Cache[V]) Refresh(key string) {
	c.mu.RLock()
	e := c.entries[key]
	c.mu.RUnlock()
	if e != nil {
		c.queueRefresh(e)
	}
}

// queueRefresh hands e to the refresh workers unless it is already with them; when they are
// behind, the refresh waits for a later use.
func (c *Cache[V]) queueRefresh(e *entry[V]) {
	if !e.refreshing.CompareAndSwap(false, true) {
		return
	}
	select {
	case c.refreshes <- e:
	default:
		e.refreshing.Store(false)
	}
}

func (c *Cache[V]) refreshWorker() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case e := <-c.refreshes:
			// Whatever the load found, the value is as fresh as the source let it be: a failed
			// refresh keeps the last value and is tried again a period later.
			_ = c.opts.Load(e.value)
			e.loadedAt.Store(c.opts.Now().UnixNano())
			e.refreshing.Store(false)
		}
	}
}

// sweepLoop drops unused values and forgets expired misses, ten times per IdleAfter.
func (c *Cache[V]) sweepLoop() {
	defer c.wg.Done()
	t := time.NewTicker(max(c.opts.IdleAfter/10, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.Sweep()
		}
	}
}

// Sweep drops the values unused for IdleAfter and forgets expired misses now, as the cache does
// on its own ten times per IdleAfter.
func (c *Cache[V]) Sweep() {
	now := c.opts.Now()
	idle := now.Add(-c.opts.IdleAfter).UnixNano()
	var gone []*entry[V]
	c.mu.Lock()
	for k, e := range c.entries {
		if e.lastUse.Load() <= idle && isReady(e) {
			delete(c.entries, k)
			gone = append(gone, e)
		}
	}
	for k, m := range c.misses {
		if !now.Before(m.until) {
			delete(c.misses, k)
		}
	}
	c.mu.Unlock()
	c.expired.Add(uint64(len(gone)))
	c.dropAll(gone)
}

func isReady[V any](e *entry[V]) bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// Forget drops every value whose key match accepts, and the remembered misses of those keys,
// for example when what the keys were loaded from has changed.
func (c *Cache[V]) Forget(match func(key string) bool) {
	var gone []*entry[V]
	c.mu.Lock()
	for k, e := range c.entries {
		// A value still loading goes too: its load then ends without being kept.
		if match(k) {
			delete(c.entries, k)
			gone = append(gone, e)
		}
	}
	for k := range c.misses {
		if match(k) {
			delete(c.misses, k)
		}
	}
	c.mu.Unlock()
	c.dropAll(gone)
}

func (c *Cache[V]) dropAll(es []*entry[V]) {
	for _, e := range es {
		c.opts.Drop(e.value)
	}
}

// Count is how many values with keys match accepts the cache holds (loaded or loading).
func (c *Cache[V]) Count(match func(key string) bool) int {
	n := 0
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k := range c.entries {
		if match(k) {
			n++
		}
	}
	return n
}

// Stats are a Cache's counts since it started.
type Stats struct {
	// Keys and Misses are held now; MaxKeys is the bound.
	Keys, Misses, MaxKeys int
	// Loads are first loads started; Busy are keys refused for the rate; Evicted are values
	// dropped to make room; Expired are values dropped unused.
	Loads, Busy, Evicted, Expired uint64
}

// Stats returns the cache's counts.
func (c *Cache[V]) Stats() Stats {
	c.mu.RLock()
	s := Stats{Keys: len(c.entries), Misses: len(c.misses), MaxKeys: c.opts.MaxKeys}
	c.mu.RUnlock()
	s.Loads, s.Busy, s.Evicted, s.Expired = c.loads.Load(), c.busy.Load(), c.evicted.Load(), c.expired.Load()
	return s
}

// Close stops the workers and the sweep, waits for first loads in flight, and refuses new keys.
// It drops nothing: the owner ends what the values stand for itself.
func (c *Cache[V]) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
}
