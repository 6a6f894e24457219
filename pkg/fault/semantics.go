package fault

import "time"

// Semantics names the rules by which a Tolerance records the outcome of a send: those of one
// RocketMQ release line's LatencyFaultToleranceImpl and MQFaultStrategy.updateFaultItem, or none at
// all. The extensions in Options (probing, growth, the isolation limit, pod health) apply on top of
// whichever is chosen.
type Semantics int

const (
	// SemanticsRocketMQ5 is RocketMQ 5.2.0 and later (the rules have not changed through 5.3.x):
	// an update only ever extends an isolation, so a fast success does not end one; a failed
	// attempt isolates with the table's failure latency; a client-side failure isolates by its
	// measured latency only; every update overwrites the reachable flag; availability ignores
	// the flag. This is the zero value.
	SemanticsRocketMQ5 Semantics = iota
	// SemanticsRocketMQ4 is RocketMQ 4.x (checked against 4.9.8; unchanged up to 5.1.3): every
	// update sets the isolation end to now plus the update's isolation, so a fast success ends an
	// isolation and a shorter one replaces a longer one; client-side failures isolate like every
	// other failure; there is no reachable flag (brokers are always reachable unless probing, an
	// extension, says otherwise). The items are kept in the order RocketMQ's ConcurrentHashMap
	// iterates them, for PickOneAtLeast.
	SemanticsRocketMQ4
	// SemanticsDisabled is RocketMQ's default, sendLatencyFaultEnable=false: nothing is recorded,
	// so no broker is ever isolated by a send. Switching a table to it forgets what it learnt.
	SemanticsDisabled
)

// String returns the semantics' name.
func (s Semantics) String() string {
	switch s {
	case SemanticsRocketMQ5:
		return "RocketMQ5"
	case SemanticsRocketMQ4:
		return "RocketMQ4"
	case SemanticsDisabled:
		return "Disabled"
	}
	return "Semantics(?)"
}

// reachEffect says what an update does to the reachable flag.
type reachEffect uint8

const (
	reachSet   reachEffect = iota // mark reachable
	reachClear                    // mark unreachable
	reachKeep                     // leave the flag alone
)

// effect is what one update does to a broker's item: RocketMQ's (isolation, reachable) pair plus
// what detour's extensions need to know about it.
type effect struct {
	// isolation: the isolation is computed from the table's failure latency instead of the measured
	// one, and the attempt counts as a failure (growth, the isolation limit's severity, reason).
	isolation bool
	reach     reachEffect
	// success: a send the broker answered; it resets the failure count (or lets it decay).
	success bool
	reason  Reason // of a failure
	slow    Reason // of an isolation by the measured latency; "" means SlowSend
	// silent: the attempt got no answer at all (a transport failure, or a watch probe left
	// unanswered), which puts the broker on probation even as a first offender.
	silent bool
}

// slowReason is the reason an isolation by the measured latency gets.
func (ef effect) slowReason() Reason {
	if ef.slow != "" {
		return ef.slow
	}
	return ReasonSlowSend
}

// effectOf maps an outcome to its effect under the semantics, as the sync send path of the
// semantics' RocketMQ line calls updateFaultItem (DefaultMQProducerImpl.sendDefaultImpl):
//
//	outcome         RocketMQ 5.x                      RocketMQ 4.x
//	Success         latency, reachable                latency
//	ClientError     latency, reachable                failure latency
//	Interrupted     latency, reachable                latency
//	TransportError  failure, reachable unless probing failure latency
//	BrokerError     failure, unreachable              failure latency
//
// RocketMQ 4.x has no reachable flag: without probing every update marks the broker reachable;
// with probing (an extension) failures mark it unreachable as under 5.x. Client-side outcomes
// prove nothing about the broker, so probing leaves the flag alone for them.
func effectOf(s Semantics, o Outcome, probing bool) effect {
	keepIfProbing := reachSet
	if probing {
		keepIfProbing = reachKeep
	}
	switch o {
	case Success:
		return effect{reach: reachSet, success: true}
	case Interrupted:
		return effect{reach: keepIfProbing}
	case ClientError:
		if s == SemanticsRocketMQ4 {
			return effect{isolation: true, reach: keepIfProbing, reason: ReasonSendFailed}
		}
		return effect{reach: keepIfProbing}
	case TransportError:
		ef := effect{isolation: true, reach: reachSet, reason: ReasonSendFailed, silent: true}
		if probing {
			ef.reach = reachClear
		}
		return ef
	default: // BrokerError
		ef := effect{isolation: true, reach: reachClear, reason: ReasonBrokerError}
		if s == SemanticsRocketMQ4 && !probing {
			ef.reach = reachSet
		}
		return ef
	}
}

// UpdateFaultItem records one call of RocketMQ's MQFaultStrategy.updateFaultItem as it stands at
// a RocketMQ call site: the attempt's measured latency, whether it isolates with the failure
// latency, and the reachable flag RocketMQ 5.x passes (RocketMQ 4.x has none; under
// SemanticsRocketMQ4 it is ignored unless probing). Update maps outcomes of synchronous sends to
// such calls; the producer uses this directly where RocketMQ calls it with other arguments (the
// callbacks of asynchronous sends), and differential tests replay RocketMQ's own calls with it.
// A success-like call (isolation false, reachable true) resets the failure count as a success
// does; an isolating call counts as a failure, with reason SendFailed when reachable and
// BrokerError when not.
func (t *Tolerance) UpdateFaultItem(broker string, latency time.Duration, isolation, reachable bool) {
	sem := Semantics(t.sem.Load())
	if sem == SemanticsDisabled {
		return
	}
	ef := effect{isolation: isolation, reach: reachSet}
	switch {
	case isolation && reachable:
		// RocketMQ's call sites pass an isolating, reachable update for a transport failure only.
		ef.reason, ef.silent = ReasonSendFailed, true
	case isolation:
		ef.reason = ReasonBrokerError
	default:
		ef.success = reachable
	}
	if !reachable && (sem != SemanticsRocketMQ4 || t.probing.Load()) {
		ef.reach = reachClear
	}
	t.apply(broker, latency, ef)
}

// PickOneAtLeast is RocketMQ 4.x's last resort (LatencyFaultToleranceImpl.pickOneAtLeast in
// 4.9.4 to 4.9.8), used when no queue of a topic has an available broker: it sorts every broker
// the table holds an item for (every broker updated since it was last forgotten, not only the
// topic's) with available ones first, then by lower measured latency, then by earlier isolation
// end, keeping the order of the item map among equals, and returns one of the better half, taken
// round robin by an index of its own; with a single item, that one. It reports false when the
// table holds no item. Only SemanticsRocketMQ4 keeps the items in RocketMQ's map order; under
// other semantics the order among equals is the order of first update.
func (t *Tolerance) PickOneAtLeast() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	items := t.order.items()
	if len(items) == 0 {
		return "", false
	}
	now := t.tick()
	stable(items, func(a, b *Entry) bool { return worseThan(b, a, now) })
	half := len(items) / 2
	if half <= 0 {
		return items[0].name, true
	}
	i := (t.worst.Add(1) & indexMask) % uint32(half)
	return items[i].name, true
}

// worseThan orders items as RocketMQ 4.x's FaultItem.compareTo: unavailable after available,
// then higher latency after lower, then later isolation end after earlier, all in whole
// milliseconds as RocketMQ measures them. Callers hold mu.
func worseThan(a, b *Entry, now int64) bool {
	if aa, ba := !blocked(a, now), !blocked(b, now); aa != ba {
		return ba
	}
	la, lb := a.latency.Load()/int64(time.Millisecond), b.latency.Load()/int64(time.Millisecond)
	if la != lb {
		return la > lb
	}
	return a.stamp.Load()/int64(time.Millisecond) > b.stamp.Load()/int64(time.Millisecond)
}

// stable sorts s by less, keeping equal elements in their order (insertion sort: the lists are
// a handful of brokers, and RocketMQ's sort is stable too).
func stable(s []*Entry, less func(a, b *Entry) bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// indexMask clears the sign bit of an index, as RocketMQ's ThreadLocalIndex does.
const indexMask = 0x7fffffff

// SeedPickIndex sets the round-robin index PickOneAtLeast counts from (RocketMQ 4.x's
// whichItemWorst, which starts at a random value): the next pick uses v+1. Replays of RocketMQ
// runs set it to RocketMQ's value; nothing else needs to.
func (t *Tolerance) SeedPickIndex(v int32) { t.worst.Store(uint32(v)) }

// Forget drops what the table learnt about a broker from sends and probes (its item, in
// RocketMQ's words: LatencyFaultToleranceImpl.remove), leaving it available and reachable. Unlike
// Remove, the broker stays known and its pod mark stays. A Change reports it if it was
// unavailable only because of what was learnt.
func (t *Tolerance) Forget(broker string) {
	ev := t.lock()
	if e := t.lookup(broker); e != nil && e.present {
		now := t.tick()
		was := blocked(e, now)
		t.forget(e)
		t.settle(e, now, was, 0, &ev)
	}
	t.unlock(&ev)
}

// forget clears e's learnt state but not its pod state. Callers hold mu.
func (t *Tolerance) forget(e *Entry) {
	t.order.remove(e)
	pod := e.pod
	t.reset(e)
	e.pod = pod
}
