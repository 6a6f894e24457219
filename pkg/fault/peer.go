package fault

import (
	"math"
	"time"
)

// PeerClaim is another replica's isolation of a broker: the replica measured it, this table did
// not. SetPeerClaims holds the broker out of selection for as long as the claim stands.
type PeerClaim struct {
	Reason  Reason
	Latency time.Duration
	// Since is when the claiming replica isolated the broker.
	Since time.Time
	// Until ends the claim by time; the zero time means until it is withdrawn (the claiming
	// replica waits for a probe's proof, or has a pod mark).
	Until time.Time
}

// peerHeld in Entry.peer means held by a claim with no end in time.
const peerHeld = math.MaxInt64

// SetPeerClaims replaces the claims of other replicas, by broker name: a claimed broker is
// unavailable (as if isolated here) until the claim's Until, or while it is listed when it has
// none; a broker no longer listed is released from its claim at once. A claim does not change what
// this table learns: its own isolations, reachable flags and failure counts stay as they are, and
// Isolated marks brokers held only by claims with Item.Peer. Claims count toward MaxIsolatedPercent
// like any isolation; a claim the isolation limit released is not applied again until it changes.
// Claims on brokers the table does not know are ignored (call again once it knows more: the
// producer runtime does after every change of its routes and brokers). Under SemanticsDisabled
// claims are ignored, as fault tolerance off isolates nothing.
func (t *Tolerance) SetPeerClaims(claims map[string]PeerClaim) {
	ev := t.lock()
	now := t.tick()
	if t.opts.Semantics == SemanticsDisabled {
		claims = nil
	}
	grew := false
	for name, e := range *t.entries.Load() {
		if _, still := claims[name]; e.present && e.hasClaim && !still {
			e.peer, e.claim, e.hasClaim = 0, PeerClaim{}, false
			t.settleGate(e, now)
			t.sync(e, now, false, 0, &ev)
		}
	}
	for name, c := range claims {
		e := t.lookup(name)
		if e == nil || !e.present {
			// A claim never adds a broker: a peer cannot grow the table or move the isolation
			// limit's count.
			continue
		}
		if e.hasClaim && e.claim.equal(c) {
			continue // unchanged: a release by the isolation limit stands
		}
		was := blocked(e, now)
		e.claim, e.hasClaim = c, true
		e.peer = t.claimEnd(c, now)
		since := int64(0)
		if nowTime := t.timeOf(now); !c.Since.IsZero() && !c.Since.After(nowTime) {
			since = max(now+int64(c.Since.Sub(nowTime)), 1)
		}
		grew = grew || (!was && blocked(e, now))
		t.settleGate(e, now)
		t.sync(e, now, false, since, &ev)
	}
	if grew {
		t.enforceIsolationLimit(now, &ev)
	}
	t.unlock(&ev)
}

// claimEnd converts a claim's end to a tick: peerHeld without one, 0 when it is over. Callers
// hold mu.
func (t *Tolerance) claimEnd(c PeerClaim, now int64) int64 {
	if c.Until.IsZero() {
		return peerHeld
	}
	left := c.Until.Sub(t.timeOf(now))
	if left <= 0 {
		return 0
	}
	return now + int64(min(left, maxRestored))
}

// equal reports whether two claims are the same claim (times compared as instants).
func (c PeerClaim) equal(o PeerClaim) bool {
	return c.Reason == o.Reason && c.Latency == o.Latency && c.Since.Equal(o.Since) && c.Until.Equal(o.Until)
}
