package fault

import (
	"cmp"
	"slices"
	"time"
)

// Isolated returns the brokers that are unavailable at the moment of the call (isolated by
// latency or failure, held for proof of reachability, or marked by their pod), sorted by name.
// A broker that is unreachable but available (possible without probing, as in RocketMQ) is not
// listed; Lookup shows its flag.
func (t *Tolerance) Isolated() []Item {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.tick()
	var out []Item
	for _, e := range *t.entries.Load() {
		if blocked(e, now) {
			out = append(out, t.item(e))
		}
	}
	slices.SortFunc(out, func(a, b Item) int { return cmp.Compare(a.Broker, b.Broker) })
	return out
}

// Expire reports, through OnChange, the brokers whose isolation timer ran out since they were
// last reported unavailable, and returns how many there were. Nothing else changes: the brokers
// were already available to Available. Call it when NextExpiry says so, so that changes reach
// their consumers on time.
func (t *Tolerance) Expire() int {
	ev := t.lock()
	now := t.tick()
	n := 0
	for _, e := range *t.entries.Load() {
		if e.member && !blocked(e, now) {
			t.settleGate(e, now)
			t.sync(e, now, false, 0, &ev)
			n++
		}
	}
	t.unlock(&ev)
	return n
}

// NextExpiry returns the earliest time at which a broker reported unavailable will become
// available by its timer alone, and false if there is none (brokers held for proof or by their
// pod never expire by time). The time may be in the past, meaning Expire is due now.
func (t *Tolerance) NextExpiry() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next int64
	for _, e := range *t.entries.Load() {
		if e.member && e.holds == 0 && e.peer != peerHeld {
			if end := max(e.until, e.peer); next == 0 || end < next {
				next = end
			}
		}
	}
	return t.timeOf(next), next != 0
}

// restoredOnProbation reports whether a restored item goes back on probation (with probing and
// ProbationProbes above 1): it was isolated for silence or a slow answer, or it is a repeat
// offender.
func restoredOnProbation(it Item) bool {
	switch it.Reason {
	case ReasonSendFailed, ReasonProbeFailed, ReasonSlowSend, ReasonSlowProbe:
		return true
	}
	return it.ConsecutiveFailures >= 2
}

// Restore re-applies a snapshot, typically the isolations saved in status before a restart. Items
// whose Until is still in the future are isolated until then (never shortening a longer isolation
// already known); items that are unreachable keep that flag, so under probing they wait for proof
// again, and items isolated for silence or a slow answer, or repeat offenders, are on probation
// again (Options.ProbationProbes). Other items are skipped, as are items with a pod reason: pod
// state comes from the pods themselves. Restored brokers count toward the isolation limit like any
// other. A table that knew no broker before the call (a policy restored after a restart, before the
// brokers it governs are known) releases none right away, since a limit computed over the few
// brokers the snapshot names would release isolations it must keep; its isolation limit is enforced
// as soon as another broker becomes known or another isolation starts.
func (t *Tolerance) Restore(items []Item) {
	ev := t.lock()
	now := t.tick()
	nowTime := t.timeOf(now)
	tab := t.opts.Table
	knew := t.present
	for _, it := range items {
		if t.opts.Semantics == SemanticsDisabled {
			break // fault tolerance off learns nothing, restored or not
		}
		if it.Reason == ReasonPodNotReady || it.Reason == ReasonPodTerminating {
			continue
		}
		left := it.Until.Sub(nowTime)
		live := !it.Until.IsZero() && left > 0
		if !live && it.Reachable {
			continue
		}
		e := t.obtain(it.Broker, now)
		t.order.insert(e)
		if live {
			extend(e, now, min(left, maxRestored))
			e.stamp.Store(e.until)
		}
		if !it.Reachable {
			e.reachable.Store(false)
		}
		if it.Reason != "" {
			e.reason = it.Reason
		}
		e.failures = max(e.failures, it.ConsecutiveFailures)
		if e.failures > 0 {
			// The restored episode's probation starts when its isolation ends, as it would have.
			e.calm = max(e.calm, e.until)
		}
		e.latency.Store(int64(it.Latency))
		e.severity = it.Latency
		if it.Reason == ReasonSendFailed || it.Reason == ReasonBrokerError || it.Reason == ReasonProbeFailed ||
			it.Reason == ReasonRefusesValidMessages || it.Reason == ReasonBrokerBusy {
			e.severity = max(it.Latency, tab.FailureLatency())
		}
		if restoredOnProbation(it) {
			// As when it was isolated: after a restart one good probe would otherwise readmit a
			// broker that flaps.
			t.startProbation(e)
		}
		since := int64(0)
		if !it.Since.IsZero() && !it.Since.After(nowTime) {
			since = max(now+int64(it.Since.Sub(nowTime)), 1)
		}
		t.recomputeHolds(e)
		t.settleGate(e, now)
		t.sync(e, now, false, since, &ev)
	}
	if knew > 0 {
		t.enforceIsolationLimit(now, &ev)
	}
	t.unlock(&ev)
}
