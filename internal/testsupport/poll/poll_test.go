package poll

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a TB that records a failure instead of ending the test, so the failing path can be
// checked.
type recorder struct{ failed string }

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{}
	Until(r, 10*time.Second, time.Millisecond, "the third call", func() error {
		if calls.Add(1) < 3 {
			return errors.New("too early")
		}
		return nil
	})
	if r.failed != "" || calls.Load() != 3 {
		t.Fatalf("failed=%q after %d calls; want success on the third", r.failed, calls.Load())
	}
}

func TestUntilFailsWithWhatAndTheLastErrorAtTheDeadline(t *testing.T) {
	r := &recorder{}
	start := time.Now()
	Until(r, 50*time.Millisecond, 5*time.Millisecond, "the queue drains", func() error {
		return errors.New("3 left")
	})
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("gave up after %v, before the 50ms timeout", time.Since(start))
	}
	for _, want := range []string{"the queue drains", "not within 50ms", "3 left"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q lacks %q", r.failed, want)
		}
	}
}

func TestTrueReportsNotYetUntilTheConditionHolds(t *testing.T) {
	var holds atomic.Bool
	cond := True(holds.Load)
	if err := cond(); !errors.Is(err, ErrNotYet) {
		t.Fatalf("false condition: %v, want ErrNotYet", err)
	}
	holds.Store(true)
	if err := cond(); err != nil {
		t.Fatalf("true condition: %v, want nil", err)
	}
}
