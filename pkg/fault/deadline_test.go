package fault

import (
	"testing"
	"time"
)

// TestAttemptDeadline proves when an attempt is given up and goes on to another broker: the
// per-attempt timeout, or with an adaptive deadline AttemptDeadlineFactor times the broker's
// usual latency within AttemptDeadlineFloor and the timeout; none for the last attempt, without a
// timeout, or when the send's budget ends first. Only a deadline shorter than the timeout cuts.
func TestAttemptDeadline(t *testing.T) {
	const timeout = time.Second
	cases := []struct {
		name      string
		success   time.Duration // latency of each of 40 successes; 0 for none
		per       time.Duration
		adaptive  bool
		last      bool
		remaining time.Duration
		want      time.Duration
		cut       bool
	}{
		{name: "fixed", success: time.Millisecond, per: timeout, remaining: time.Hour, want: timeout},
		{name: "adaptive, no success measured", per: timeout, adaptive: true, remaining: time.Hour, want: timeout},
		{name: "adaptive, fast broker: the floor", success: time.Millisecond, per: timeout, adaptive: true, remaining: time.Hour, want: AttemptDeadlineFloor, cut: true},
		{name: "adaptive, 100 ms broker", success: 100 * time.Millisecond, per: timeout, adaptive: true, remaining: time.Hour, want: 400 * time.Millisecond, cut: true},
		{name: "adaptive, slow broker: the timeout", success: 400 * time.Millisecond, per: timeout, adaptive: true, remaining: time.Hour, want: timeout},
		{name: "the last attempt", success: time.Millisecond, per: timeout, adaptive: true, last: true, remaining: time.Hour},
		{name: "no per-attempt timeout", success: time.Millisecond, adaptive: true, remaining: time.Hour},
		{name: "the budget ends first", success: time.Millisecond, per: timeout, adaptive: true, remaining: AttemptDeadlineFloor},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol := New(Options{})
			for i := 0; tc.success > 0 && i < 40; i++ {
				tol.Update("b", tc.success, Success)
			}
			got, cut := tol.Entry("b").AttemptDeadline(tc.per, tc.adaptive, tc.last, tc.remaining)
			if d := got - tc.want; d < -tc.want/50 || d > tc.want/50 || cut != tc.cut {
				t.Errorf("AttemptDeadline = %v, %v; want %v, %v", got, cut, tc.want, tc.cut)
			}
		})
	}
}

// TestHedgeDelay proves when an attempt is hedged: at the broker's usual latency, at least
// HedgeDelayFloor, AttemptDeadlineFloor for a broker with no success measured; never when the
// attempt deadline or the send's budget comes first.
func TestHedgeDelay(t *testing.T) {
	cases := []struct {
		name      string
		success   time.Duration // latency of each of 40 successes; 0 for none
		deadline  time.Duration
		remaining time.Duration
		want      time.Duration
	}{
		{name: "fast broker: the floor", success: time.Millisecond, remaining: time.Hour, want: HedgeDelayFloor},
		{name: "50 ms broker: its usual latency", success: 50 * time.Millisecond, remaining: time.Hour, want: 50 * time.Millisecond},
		{name: "no success measured", remaining: time.Hour, want: AttemptDeadlineFloor},
		{name: "the attempt deadline comes first", success: 300 * time.Millisecond, deadline: 250 * time.Millisecond, remaining: time.Hour},
		{name: "the budget ends first", success: time.Millisecond, remaining: 10 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol := New(Options{})
			for i := 0; tc.success > 0 && i < 40; i++ {
				tol.Update("b", tc.success, Success)
			}
			got := tol.Entry("b").HedgeDelay(tc.deadline, tc.remaining)
			if d := got - tc.want; d < -tc.want/50 || d > tc.want/50 {
				t.Errorf("HedgeDelay = %v; want %v", got, tc.want)
			}
		})
	}
}
