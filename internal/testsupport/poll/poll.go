// Package poll is the one way the project's tests wait: poll observable state until it holds,
// and fail with what was awaited and the last reason it did not hold once the deadline passes.
// It knows nothing of Kubernetes, so pkg/* tests use it too; only test code imports it.
package poll

import (
	"errors"
	"fmt"
	"time"
)

// TB is the part of testing.TB that Until needs, so test harnesses with their own TB (such as
// internal/testsupport/rmqtest's) can pass theirs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// ErrNotYet is the error True reports for a condition that does not hold yet.
var ErrNotYet = errors.New("not yet")

// Until calls cond every interval until it returns nil and fails t with what and cond's last
// error when timeout passes first. cond is the synchronisation; the interval only paces it, so a
// loaded machine costs time, not a flaky failure.
func Until(t TB, timeout, interval time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Wait(timeout, interval, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Wait is Until for callers that report the failure themselves (or add context to it): it
// returns nil once cond does, or an error naming the timeout and cond's last error.
func Wait(timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		time.Sleep(interval) // the poll interval; cond is the synchronisation
	}
}

// True adapts a condition that only says whether it holds: ErrNotYet while it does not.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return ErrNotYet
	}
}
