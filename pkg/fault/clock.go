package fault

import (
	"sync/atomic"
	"time"
)

// Clock tells the time. Tolerance reads it for every decision, so tests and simulations can
// replace real time with a ManualClock and never sleep.
type Clock interface {
	Now() time.Time
}

// RealClock is the system clock. Tolerance recognises it and measures elapsed time with the
// monotonic clock only, which is cheaper than time.Now and immune to wall-clock steps.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// ManualClock is a clock that moves only when told to. It is safe for concurrent use, and Now is
// lock-free so that it does not distort concurrency tests. The zero value is not usable; build
// one with NewManualClock.
type ManualClock struct {
	start  time.Time
	offset atomic.Int64 // nanoseconds since start
}

// NewManualClock returns a clock that reads t0 until it is advanced or set.
func NewManualClock(t0 time.Time) *ManualClock {
	return &ManualClock{start: t0}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	return c.start.Add(time.Duration(c.offset.Load()))
}

// Advance moves the clock forward by d (backward if d is negative) and returns the new time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	return c.start.Add(time.Duration(c.offset.Add(int64(d))))
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.offset.Store(int64(t.Sub(c.start)))
}
