package fault

import (
	"slices"
	"testing"
	"time"
)

func TestPodMarksMakeABrokerUnavailableWithoutAnySend(t *testing.T) {
	tol, _, rec := newTol(t, Options{RespectPodHealth: true})
	tests := []struct {
		state     PodState
		available bool
		reason    Reason
	}{
		{PodNotReady, false, ReasonPodNotReady},
		{PodTerminating, false, ReasonPodTerminating},
		{PodReady, true, ""},
		{PodTerminating, false, ReasonPodTerminating},
	}
	for _, tc := range tests {
		tol.SetPodState("A", tc.state)
		wantAvailable(t, tol, map[string]bool{"A": tc.available})
		if got := mustLookup(t, tol, "A").Reason; got != tc.reason {
			t.Errorf("after %v: reason %q, want %q", tc.state, got, tc.reason)
		}
		if !tol.Reachable("A") {
			t.Errorf("after %v: a pod mark changed the reachable flag", tc.state)
		}
	}
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"+A", "-A", "+A"}) {
		t.Errorf("changes %v, want [+A -A +A]", got)
	}
	tol.SetPodState("A", PodGone)
	if _, ok := tol.Lookup("A"); ok {
		t.Error("A still known after its pod is gone")
	}
	wantAvailable(t, tol, map[string]bool{"A": true})
	if got := changeSummary(rec.take()); !slices.Equal(got, []string{"-A"}) {
		t.Errorf("changes %v, want [-A]", got)
	}
}

func TestPodMarksApplyOnlyWhenPodHealthIsRespected(t *testing.T) {
	tol, _, _ := newTol(t, Options{})
	tol.SetPodState("A", PodTerminating)
	wantAvailable(t, tol, map[string]bool{"A": true})
	if got := mustLookup(t, tol, "A").Reason; got != "" {
		t.Errorf("reason %q for an ignored pod mark", got)
	}
	tol.Configure(Options{RespectPodHealth: true})
	wantAvailable(t, tol, map[string]bool{"A": false})
	tol.Configure(Options{})
	wantAvailable(t, tol, map[string]bool{"A": true})
	tol.SetPodState("A", PodGone) // removes even when pod health is ignored
	if _, ok := tol.Lookup("A"); ok {
		t.Error("A still known after its pod is gone")
	}
}

func TestPodReadyKeepsALatencyIsolation(t *testing.T) {
	tol, clk, _ := newTol(t, Options{RespectPodHealth: true})
	tol.Update("A", ms(1), TransportError)
	tol.SetPodState("A", PodNotReady)
	if got := mustLookup(t, tol, "A").Reason; got != ReasonPodNotReady {
		t.Errorf("reason %q while the pod is marked, want PodNotReady", got)
	}
	clk.Advance(time.Second)
	tol.SetPodState("A", PodReady)
	wantAvailable(t, tol, map[string]bool{"A": false})
	if got := mustLookup(t, tol, "A").Reason; got != ReasonSendFailed {
		t.Errorf("reason %q once the pod is ready, want SendFailed", got)
	}
	clk.Advance(9 * time.Second)
	wantAvailable(t, tol, map[string]bool{"A": true})
}

func TestPodMarkOutlastsItsTimer(t *testing.T) {
	tol, clk, _ := newTol(t, Options{RespectPodHealth: true})
	tol.Update("A", ms(1), TransportError)
	tol.SetPodState("A", PodNotReady)
	clk.Advance(time.Hour)
	wantAvailable(t, tol, map[string]bool{"A": false})
	if n := tol.Expire(); n != 0 {
		t.Errorf("Expire reported %d brokers leaving while the pod is still marked", n)
	}
}

func TestPodStateStrings(t *testing.T) {
	want := map[PodState]string{PodReady: "Ready", PodNotReady: "NotReady", PodTerminating: "Terminating", PodGone: "Gone", 9: "PodState(9)"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), w)
		}
	}
}
