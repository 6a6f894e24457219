package fault

import (
	"strconv"
	"testing"
	"time"
)

// TestPeerClaimsHoldBrokersOutUntilTheyEnd proves how other replicas' claims act on a table:
// a claimed broker is unavailable until the claim's end or its withdrawal, is listed as a peer's
// isolation, changes nothing this table learnt, respects the cap, and is ignored with fault
// tolerance off.
func TestPeerClaimsHoldBrokersOutUntilTheyEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	timed := PeerClaim{Reason: ReasonSlowSend, Latency: 600 * time.Millisecond, Since: t0, Until: t0.Add(5 * time.Second)}
	held := PeerClaim{Reason: ReasonProbeFailed, Latency: 10 * time.Second, Since: t0}
	tests := []struct {
		name  string
		opts  Options
		steps func(t *testing.T, tol *Tolerance, clk *ManualClock)
	}{
		{"a timed claim holds the broker until its end", Options{}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.Entry("b")
			tol.SetPeerClaims(map[string]PeerClaim{"b": timed})
			wantBroker(t, tol, "b", false)
			items := tol.Isolated()
			if len(items) != 1 || !items[0].Peer || items[0].Reason != ReasonSlowSend || !items[0].Until.Equal(timed.Until) {
				t.Fatalf("Isolated() = %+v, want b as a peer's SlowSend until %v", items, timed.Until)
			}
			clk.Advance(5 * time.Second)
			wantBroker(t, tol, "b", true)
		}},
		{"a claim without an end holds until it is withdrawn", Options{}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.Entry("b")
			tol.SetPeerClaims(map[string]PeerClaim{"b": held})
			clk.Advance(time.Hour)
			wantBroker(t, tol, "b", false)
			tol.SetPeerClaims(nil)
			wantBroker(t, tol, "b", true)
		}},
		{"a withdrawn claim leaves the table's own isolation in force", Options{}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.Update("b", 0, TransportError) // 10 s of its own
			tol.SetPeerClaims(map[string]PeerClaim{"b": timed})
			if items := tol.Isolated(); len(items) != 1 || items[0].Peer {
				t.Fatalf("Isolated() = %+v, want b as this table's own isolation", items)
			}
			tol.SetPeerClaims(nil)
			wantBroker(t, tol, "b", false)
			clk.Advance(10 * time.Second)
			wantBroker(t, tol, "b", true)
		}},
		{"the isolation limit releases a claim, and the same claim again does not isolate anew", Options{MaxIsolatedPercent: 50}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.Entry("a")
			tol.Entry("c")
			tol.Update("a", 0, TransportError)
			tol.SetPeerClaims(map[string]PeerClaim{"b": timed}) // two of three would be out; the cap allows one
			if n := len(tol.Isolated()); n != 1 {
				t.Fatalf("%d brokers isolated under a cap of one", n)
			}
			changes := 0
			tol.Configure(Options{Clock: clk, MaxIsolatedPercent: 50, OnChange: func(Change) { changes++ }})
			tol.SetPeerClaims(map[string]PeerClaim{"b": timed})
			if n := len(tol.Isolated()); n != 1 || changes != 0 {
				t.Fatalf("the same claim again: %d brokers isolated under a cap of one, %d changes (want none)", n, changes)
			}
		}},
		{"a claim on a broker the table does not know adds nothing", Options{MaxIsolatedPercent: 50}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.Entry("a")
			tol.Entry("b")
			tol.Update("a", 0, TransportError)
			ghosts := map[string]PeerClaim{}
			for i := range 1000 {
				ghosts["ghost-"+strconv.Itoa(i)] = held
			}
			tol.SetPeerClaims(ghosts) // a thousand more brokers would let the cap isolate b too
			tol.Update("b", 0, TransportError)
			if n, known := len(tol.Isolated()), len(tol.Brokers()); n != 1 || known != 2 {
				t.Fatalf("%d isolated of %d known; a peer's claims on unknown brokers moved the cap or grew the table", n, known)
			}
		}},
		{"fault tolerance off ignores claims", Options{Semantics: SemanticsDisabled}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.SetPeerClaims(map[string]PeerClaim{"b": held})
			wantBroker(t, tol, "b", true)
		}},
		{"a claim that already ended isolates nothing", Options{}, func(t *testing.T, tol *Tolerance, clk *ManualClock) {
			tol.Entry("b")
			clk.Advance(6 * time.Second)
			tol.SetPeerClaims(map[string]PeerClaim{"b": timed})
			wantBroker(t, tol, "b", true)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewManualClock(t0)
			tc.opts.Clock = clk
			tc.steps(t, New(tc.opts), clk)
		})
	}
}

// TestPeerClaimsReportChanges proves a claim reaches OnChange as any isolation does, so status
// and Events follow the fleet, and that its expiry is reported by Expire on time.
func TestPeerClaimsReportChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := NewManualClock(t0)
	var changes []Change
	tol := New(Options{Clock: clk, OnChange: func(c Change) { changes = append(changes, c) }})
	tol.Entry("b")
	tol.SetPeerClaims(map[string]PeerClaim{"b": {Reason: ReasonSendFailed, Until: t0.Add(2 * time.Second)}})
	if len(changes) != 1 || !changes[0].Isolated || !changes[0].Item.Peer {
		t.Fatalf("changes after a claim: %+v", changes)
	}
	if next, ok := tol.NextExpiry(); !ok || !next.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("NextExpiry() = %v, %v; want the claim's end", next, ok)
	}
	clk.Advance(2 * time.Second)
	if n := tol.Expire(); n != 1 || len(changes) != 2 || changes[1].Isolated {
		t.Fatalf("Expire() = %d, changes %+v; want b reported available", n, changes)
	}
}

func wantBroker(t *testing.T, tol *Tolerance, broker string, want bool) {
	t.Helper()
	if got := tol.Available(broker); got != want {
		t.Fatalf("Available(%s) = %v, want %v (isolated: %+v)", broker, got, want, tol.Isolated())
	}
}
