package fault

import (
	"slices"
	"testing"
	"time"
)

func TestOnChangeReportsEnteringAndLeavingIsolation(t *testing.T) {
	tol, clk, rec := newTol(t, Options{})
	tol.Update("A", ms(7), TransportError)
	got := rec.take()
	if len(got) != 1 {
		t.Fatalf("changes %v, want one", changeSummary(got))
	}
	c := got[0]
	want := Item{Broker: "A", Reason: ReasonSendFailed, Latency: ms(7), Since: t0, Until: t0.Add(10 * time.Second), Reachable: true, ConsecutiveFailures: 1}
	if c.Broker != "A" || !c.Isolated || c.Released || !itemEqual(c.Item, want) {
		t.Fatalf("change %+v, want isolation of %+v", c, want)
	}

	// An extension is not a change.
	clk.Advance(time.Second)
	tol.Update("A", ms(7), TransportError)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("extension reported as %v", changeSummary(got))
	}
	next, ok := tol.NextExpiry()
	if !ok || !next.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("NextExpiry = %v, %v; want t0+11s", next, ok)
	}
	if n := tol.Expire(); n != 0 {
		t.Fatalf("Expire before the end reported %d", n)
	}
	clk.Set(next)
	if !tol.Available("A") {
		t.Fatal("A unavailable when its isolation ended")
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a timer running out reported %v by itself", changeSummary(got))
	}
	if n := tol.Expire(); n != 1 {
		t.Fatalf("Expire = %d, want 1", n)
	}
	got = rec.take()
	if len(got) != 1 || got[0].Isolated || got[0].Broker != "A" || !got[0].Item.Since.Equal(t0) {
		t.Fatalf("changes %+v, want A leaving isolation that began at t0", got)
	}
	if _, ok := tol.NextExpiry(); ok {
		t.Error("NextExpiry reports a time with nothing isolated")
	}
	if n := tol.Expire(); n != 0 {
		t.Errorf("second Expire = %d, want 0", n)
	}
}

func itemEqual(a, b Item) bool {
	return a.Broker == b.Broker && a.Reason == b.Reason && a.Latency == b.Latency && a.Since.Equal(b.Since) &&
		a.Until.Equal(b.Until) && a.Reachable == b.Reachable && a.ConsecutiveFailures == b.ConsecutiveFailures
}

func TestNextUpdateReportsAnExpiredIsolation(t *testing.T) {
	tol, clk, rec := newTol(t, Options{})
	tol.Update("A", ms(600), Success)
	clk.Advance(2 * time.Second)
	tol.Update("A", ms(5), Success)
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"+A", "-A"}) {
		t.Errorf("changes %v, want [+A -A]", got)
	}
}

func TestRemoveReportsTheStateTheBrokerLeft(t *testing.T) {
	tol, _, rec := newTol(t, Options{})
	tol.Update("A", ms(4), BrokerError)
	tol.Remove("A")
	got := rec.take()
	want := Item{Broker: "A", Reason: ReasonBrokerError, Latency: ms(4), Since: t0, Until: t0.Add(10 * time.Second), ConsecutiveFailures: 1}
	if len(got) != 2 || got[1].Isolated || !itemEqual(got[1].Item, want) {
		t.Fatalf("changes %+v, want the second to report A leaving as %+v", got, want)
	}
}

func TestEveryWayOutOfIsolationIsReported(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		in   func(*Tolerance)
		out  func(*Tolerance)
	}{
		{"remove", Options{}, func(tol *Tolerance) { tol.Update("A", 0, BrokerError) }, func(tol *Tolerance) { tol.Remove("A") }},
		{"probe", Options{Probing: true}, func(tol *Tolerance) { tol.Update("A", 0, TransportError) },
			func(tol *Tolerance) { tol.ProbeResult("A", true, 0) }},
		{"pod ready", Options{RespectPodHealth: true}, func(tol *Tolerance) { tol.SetPodState("A", PodNotReady) },
			func(tol *Tolerance) { tol.SetPodState("A", PodReady) }},
		{"pod health ignored", Options{RespectPodHealth: true}, func(tol *Tolerance) { tol.SetPodState("A", PodNotReady) },
			func(tol *Tolerance) { tol.Configure(tol.Options().withRespect(false)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tol, _, rec := newTol(t, tc.opts)
			tc.in(tol)
			tc.out(tol)
			if got := changeSummary(rec.take()); !slices.Equal(got, []string{"+A", "-A"}) {
				t.Errorf("changes %v, want [+A -A]", got)
			}
		})
	}
}

func (o Options) withRespect(v bool) Options {
	o.RespectPodHealth = v
	return o
}

// OnChange runs outside the lock: it may call back into the Tolerance, even to update it.
func TestOnChangeMayCallBackIntoTheTolerance(t *testing.T) {
	var seen [][]Item
	var tol *Tolerance
	tol = New(Options{Clock: NewManualClock(t0), OnChange: func(c Change) {
		seen = append(seen, tol.Isolated())
		if c.Isolated && c.Broker == "A" {
			tol.Update("B", ms(1), TransportError)
		}
	}})
	tol.Update("A", ms(1), TransportError)
	if len(seen) != 2 || len(seen[1]) != 2 {
		t.Fatalf("callbacks saw %v, want two calls, the second with A and B isolated", seen)
	}
}

func TestChangeSequenceNumbersIncrease(t *testing.T) {
	tol, clk, rec := newTol(t, Options{})
	for _, b := range []string{"A", "B", "C"} {
		tol.Update(b, ms(1), TransportError)
	}
	clk.Advance(time.Minute)
	tol.Expire()
	got := rec.take()
	if len(got) != 6 {
		t.Fatalf("got %d changes, want 6", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("Seq %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
}

func TestIsolatedIsASortedSnapshot(t *testing.T) {
	tol, clk, _ := newTol(t, Options{RespectPodHealth: true, Probing: true})
	tol.Update("c", ms(16000), Success)
	tol.Update("a", ms(3), BrokerError)
	tol.SetPodState("b", PodTerminating)
	tol.Update("d", ms(1), Success)
	got := tol.Isolated()
	want := []Item{
		{Broker: "a", Reason: ReasonBrokerError, Latency: ms(3), Since: t0, Until: t0.Add(10 * time.Second), ConsecutiveFailures: 1},
		{Broker: "b", Reason: ReasonPodTerminating, Since: t0, Reachable: true},
		{Broker: "c", Reason: ReasonSlowSend, Latency: ms(16000), Since: t0, Until: t0.Add(30 * time.Second), Reachable: true},
	}
	if len(got) != len(want) {
		t.Fatalf("Isolated() = %+v, want %+v", got, want)
	}
	for i := range want {
		if !itemEqual(got[i], want[i]) {
			t.Errorf("Isolated()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Isolated reads the clock: c's timer ends, a waits for proof, b for its pod.
	clk.Advance(time.Minute)
	if got := isolatedNames(tol); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("a minute later Isolated() = %v, want [a b]", got)
	}
}

func TestEntryHandleSurvivesRemove(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	e := tol.Entry("A")
	if e != tol.Entry("A") || e.Name() != "A" {
		t.Fatal("Entry returned a different handle for the same broker")
	}
	tol.Update("A", ms(1), BrokerError)
	if e.Available() || e.Reachable() {
		t.Fatal("handle does not see the update")
	}
	tol.Remove("A")
	if !e.Available() || !e.Reachable() {
		t.Fatal("handle of a removed broker is not available and reachable")
	}
	tol.Update("A", ms(1), BrokerError)
	if e.Available() || e.Reachable() {
		t.Fatal("handle does not see the broker once it is known again")
	}
	if got := mustLookup(t, tol, "A").ConsecutiveFailures; got != 1 {
		t.Errorf("ConsecutiveFailures = %d, want 1: Remove must forget", got)
	}
	if got := tol.Brokers(); !slices.Equal(got, []string{"A"}) {
		t.Errorf("Brokers() = %v", got)
	}
}

func TestRestoreReappliesUnexpiredIsolations(t *testing.T) {
	old, oldClk, _ := newTol(t, Options{Probing: true, RespectPodHealth: true})
	old.Update("slow", ms(3000), Success)  // until t0+6s
	old.Update("dead", ms(1), BrokerError) // until t0+10s, unreachable
	old.Update("gone", ms(1), TransportError)
	old.SetPodState("pod", PodNotReady)
	oldClk.Advance(time.Second)
	old.Update("late", ms(16000), Success) // since t0+1s, until t0+31s
	saved := old.Isolated()

	tol, clk, rec := newTol(t, Options{Probing: true, RespectPodHealth: true})
	clk.Set(t0.Add(8 * time.Second)) // "slow" has expired meanwhile
	tol.Update("late", ms(2), Success)
	tol.Restore(saved)

	wantAvailable(t, tol, map[string]bool{"slow": true, "dead": false, "gone": false, "late": false, "pod": true})
	if _, ok := tol.Lookup("slow"); ok {
		t.Error("an expired, reachable item was restored")
	}
	if _, ok := tol.Lookup("pod"); ok {
		t.Error("a pod mark was restored; pod state must come from the pods")
	}
	for _, b := range []string{"dead", "late"} {
		got := mustLookup(t, tol, b)
		var want Item
		for _, it := range saved {
			if it.Broker == b {
				want = it
			}
		}
		if !itemEqual(got, want) {
			t.Errorf("restored %s = %+v, want %+v", b, got, want)
		}
	}
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"+dead", "+gone", "+late"}) {
		t.Errorf("changes %v, want the three restored isolations", got)
	}
	// "dead" is unreachable: under probing it waits for proof after its timer.
	clk.Set(t0.Add(time.Hour))
	wantAvailable(t, tol, map[string]bool{"dead": false, "gone": false, "late": true})
}

func TestRestoreNeverShortensAnIsolation(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	tol.Update("A", ms(16000), Success) // until t0+30s
	tol.Restore([]Item{{Broker: "A", Reason: ReasonSendFailed, Until: t0.Add(5 * time.Second), Reachable: true}})
	if got := mustLookup(t, tol, "A").Until; !got.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("until %v, want t0+30s", got)
	}
	tol.Restore([]Item{{Broker: "A", Reason: ReasonSendFailed, Until: t0.Add(100 * 365 * 24 * time.Hour), Reachable: true}})
	if got := mustLookup(t, tol, "A").Until; !got.Equal(t0.Add(maxRestored)) {
		t.Errorf("a corrupt Until restored to %v, want at most t0+%v", got, maxRestored)
	}
}

func TestRestoreHonoursTheCap(t *testing.T) {
	tol, _, _ := newTol(t, Options{MaxIsolatedPercent: 50})
	tol.Entry("A")
	tol.Entry("B")
	tol.Restore([]Item{
		{Broker: "A", Reason: ReasonSendFailed, Until: t0.Add(time.Minute), Reachable: true, ConsecutiveFailures: 3},
		{Broker: "B", Reason: ReasonSlowSend, Until: t0.Add(time.Minute), Reachable: true},
	})
	wantAvailable(t, tol, map[string]bool{"A": false, "B": true})
}
