package fault

import (
	"strconv"
	"testing"
	"time"
)

// TestATopicRefusalHoldsTheBrokerForThatTopicAlone proves the hold for one topic: a broker that
// refused topic T (TOPIC_NOT_EXIST) is held out for T until the table's failure isolation ends or
// a check of T on it shows T, while it stays available for every other topic and nothing of its
// own state (availability, failures, reachable flag) changes; a new refusal starts the hold
// again; the holds of one broker are bounded, the soonest ending one giving way.
func TestATopicRefusalHoldsTheBrokerForThatTopicAlone(t *testing.T) {
	const fail = 10 * time.Second // the RocketMQ5 table's failure isolation
	cases := []struct {
		name string
		// after runs once broker-a refused topic T at t0; heldT is whether broker-a is then held
		// out for T.
		after func(tol *Tolerance, clk *ManualClock)
		heldT bool
	}{
		{name: "held while its timer runs", after: func(_ *Tolerance, clk *ManualClock) { clk.Advance(fail - time.Millisecond) }, heldT: true},
		{name: "back for the topic when its timer ends", after: func(_ *Tolerance, clk *ManualClock) { clk.Advance(fail) }},
		{name: "back for the topic when a check shows it", after: func(tol *Tolerance, _ *ManualClock) { tol.TopicShown("broker-a", "T") }},
		{name: "a check of another topic changes nothing", after: func(tol *Tolerance, _ *ManualClock) { tol.TopicShown("broker-a", "U") }, heldT: true},
		{name: "a good probe changes nothing", after: func(tol *Tolerance, _ *ManualClock) { tol.ProbeResult("broker-a", true, time.Millisecond) }, heldT: true},
		{name: "a success for another topic changes nothing", after: func(tol *Tolerance, _ *ManualClock) { tol.Update("broker-a", time.Millisecond, Success) }, heldT: true},
		{name: "a second refusal starts the hold again", after: func(tol *Tolerance, clk *ManualClock) {
			clk.Advance(fail / 2)
			tol.RefusedTopic("broker-a", "T")
			clk.Advance(fail - time.Millisecond)
		}, heldT: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tol, clk, rec := newTol(t, Options{Probing: true, ProbationProbes: 3, GrowOnRepeat: true, MaxIsolatedPercent: 99})
			e := tol.Entry("broker-a")
			tol.Entry("broker-b")
			tol.RefusedTopic("broker-a", "T")
			tc.after(tol, clk)
			if got := e.HeldFor("T"); got != tc.heldT {
				t.Errorf("held for T: %v, want %v", got, tc.heldT)
			}
			if e.HeldFor("U") || !e.Available() || !e.Reachable() || len(tol.Isolated()) != 0 || len(rec.take()) != 0 {
				t.Errorf("the broker's own state changed: available %v, reachable %v, isolated %v", e.Available(), e.Reachable(), tol.Isolated())
			}
			if n := len(tol.TopicHolds()); (n == 1) != tc.heldT {
				t.Errorf("TopicHolds lists %d holds, want held %v", n, tc.heldT)
			}
		})
	}
}

// TestTopicHoldsAreBounded: however many topics a broker refuses, it holds at most MaxTopicHolds
// of them, the one that ends soonest giving way to the newest; an unknown broker and a table with
// fault tolerance off record nothing.
func TestTopicHoldsAreBounded(t *testing.T) {
	tol, clk, _ := newTol(t, Options{Probing: true})
	e := tol.Entry("broker-a")
	for i := range MaxTopicHolds + 5 {
		tol.RefusedTopic("broker-a", "T"+strconv.Itoa(i))
		clk.Advance(time.Millisecond)
	}
	if n := len(tol.TopicHolds()); n != MaxTopicHolds {
		t.Errorf("%d holds, want %d", n, MaxTopicHolds)
	}
	if e.HeldFor("T0") || !e.HeldFor("T"+strconv.Itoa(MaxTopicHolds+4)) {
		t.Errorf("the oldest hold stayed or the newest is missing")
	}
	tol.RefusedTopic("broker-z", "T")
	if _, ok := tol.Lookup("broker-z"); ok || len(tol.TopicHolds()) != MaxTopicHolds {
		t.Errorf("an unknown broker was held or made known")
	}
	off, _, _ := newTol(t, Options{Semantics: SemanticsDisabled})
	oe := off.Entry("broker-a")
	off.RefusedTopic("broker-a", "T")
	if oe.HeldFor("T") {
		t.Errorf("held for a topic with fault tolerance off")
	}
}
