package fault

import "time"

// Update records the outcome of one send attempt to broker that took latency, by the table's
// Semantics (see effectOf for how each outcome maps to RocketMQ's updateFaultItem). Unknown
// outcomes are ignored, and so is everything under SemanticsDisabled.
//
// A success that would change nothing but the latency (the common case: a healthy broker
// answering fast) takes no lock.
func (t *Tolerance) Update(broker string, latency time.Duration, outcome Outcome) {
	if outcome < Success || outcome > Interrupted {
		return
	}
	sem := Semantics(t.sem.Load())
	if sem == SemanticsDisabled {
		return
	}
	if outcome == Success {
		if e := t.lookup(broker); e != nil && e.quiet.Load() && t.table.Load().IsolationFor(latency) == 0 {
			e.latency.Store(int64(latency))
			e.observe(latency)
			if sem == SemanticsRocketMQ4 {
				// RocketMQ 4.x moves the item's isolation end to now on every update; it is in
				// the past for a quiet broker already, but PickOneAtLeast compares it.
				e.stamp.Store(t.tick())
			}
			return
		}
	}
	t.apply(broker, latency, effectOf(sem, outcome, t.probing.Load()))
}

// apply records one update with the given effect. The semantics and options are read again under
// the lock, so a concurrent Configure is seen whole.
func (t *Tolerance) apply(broker string, latency time.Duration, ef effect) {
	ev := t.lock()
	if t.opts.Semantics == SemanticsDisabled {
		t.unlock(&ev)
		return
	}
	now := t.tick()
	e := t.obtain(broker, now)
	was := blocked(e, now)
	t.order.insert(e)
	tab := t.opts.Table
	e.latency.Store(int64(latency))
	if ef.success {
		e.observe(latency)
		if t.opts.GrowOnRepeat {
			// One success is no proof of lasting health: the episode count only decays after a
			// probation without failure.
			if !e.reachable.Load() {
				e.calm = max(e.calm, now)
			}
			t.decay(e, now)
		} else {
			e.failures = 0
		}
	}
	switch ef.reach {
	case reachSet:
		e.reachable.Store(true)
	case reachClear:
		e.reachable.Store(false)
	}
	var d time.Duration
	if ef.isolation {
		t.countFailure(e, now)
		e.severity = max(latency, tab.FailureLatency())
		e.reason = ef.reason
		d = t.grow(tab, e.failures)
		if t.opts.GrowOnRepeat {
			e.calm = max(e.calm, now+int64(d))
		}
		if ef.silent {
			noteSilence(e, now)
		}
		if e.failures >= 2 || ef.silent {
			// A repeat offender, or a broker that went silent: either may be one that flaps,
			// whose up phase would readmit it on one good probe.
			t.startProbation(e)
		}
	} else {
		e.severity = latency
		d = tab.IsolationFor(latency)
		if d > 0 && ef.success {
			// An answer slow enough to isolate is a pause that ended: the next fast probe may
			// fall between two pauses and proves no more than after silence. (A client-side
			// failure's latency says nothing of the broker.)
			t.startProbation(e)
		}
	}
	if t.opts.Semantics == SemanticsRocketMQ4 {
		// 4.x sets the end whatever it was: a fast success ends an isolation, a short one
		// replaces a long one.
		e.until = now + int64(d)
		e.stamp.Store(e.until)
		if d > 0 && !ef.isolation {
			e.reason = ef.slowReason()
		}
	} else if extend(e, now, d) && !ef.isolation {
		e.reason = ef.slowReason()
	}
	t.settle(e, now, was, 0, &ev)
	t.unlock(&ev)
}

// extend moves e's isolation end to now+d if that is later. Callers hold mu.
func extend(e *Entry, now int64, d time.Duration) bool {
	if d > 0 && now+int64(d) > e.until {
		e.until = now + int64(d)
		return true
	}
	return false
}

// countFailure counts a failed send or probe. Without GrowOnRepeat every failed attempt counts.
// With it the count is of episodes: a failure counts only if it starts a new isolation, so
// the attempts of concurrent senders that fail in one incident count once, and a count left
// from earlier episodes first decays if the broker has since passed its probation. Callers hold
// mu.
func (t *Tolerance) countFailure(e *Entry, now int64) {
	if !t.opts.GrowOnRepeat {
		e.failures++
		return
	}
	t.decay(e, now)
	if !inEpisode(e, now) {
		e.failures++
	}
}

// inEpisode reports whether e is still isolated by its latest failure: its failure isolation
// has not run out, or (when probing) it still waits for proof of reachability. Callers hold mu.
func inEpisode(e *Entry, now int64) bool {
	return e.failures > 0 && (now < e.calm || e.holds&(holdProof|holdProbation) != 0)
}

// decay clears the episode count of a broker that has gone a probation period (the table's
// failure isolation) without failing since its last episode ended, so that it is treated as a
// first offender again. Callers hold mu.
func (t *Tolerance) decay(e *Entry, now int64) {
	if e.failures > 0 && !inEpisode(e, now) && now-e.calm >= int64(t.opts.Table.FailureIsolation()) {
		e.failures = 0
	}
}

// grow returns the isolation of a failure that is the failures-th in a row (or, with
// GrowOnRepeat, of the failures-th episode).
func (t *Tolerance) grow(tab *Table, failures int) time.Duration {
	base := tab.FailureIsolation()
	if !t.opts.GrowOnRepeat || failures <= 1 || base <= 0 {
		return base
	}
	factor := time.Duration(MaxGrowthFactor)
	if failures <= 3 {
		factor = 1 << (failures - 1)
	}
	// The failure's isolation comes from the table, so it never exceeds the table's maximum.
	limit := tab.MaxIsolation()
	if base > limit/factor {
		return limit
	}
	return base * factor
}

// settle publishes e after its facts changed: it recomputes holds, enforces the isolation limit if
// e now counts against it where it did not before, and queues changes. was is whether e was
// unavailable before; since is passed on to sync. Callers hold mu.
func (t *Tolerance) settle(e *Entry, now int64, was bool, since int64, ev *events) {
	prev := e.holds
	t.recomputeHolds(e)
	// A pod mark is exempt from the isolation limit, so an isolation it covered starts to count
	// when the mark goes.
	unmarked := prev&holdPod != 0 && e.holds&holdPod == 0
	if blocked(e, now) && (!was || unmarked) {
		t.enforceIsolationLimit(now, ev)
	}
	t.settleGate(e, now)
	t.sync(e, now, false, since, ev)
}

// ProbeResult records the outcome of a reachability probe of a known broker (unknown brokers are
// ignored, so a probe that races with Remove does not bring the broker back). A successful probe
// marks the broker reachable and, when probing, ends its isolation, unless GrowOnRepeat is on and
// the broker is a repeat offender (two or more episodes), which sits out its timer, or the broker
// is isolated for refusing valid messages, busy refusals or pressure (see RefusedValidMessage,
// Busy, Pressured), or it is on probation and needs more good probes (Options.ProbationProbes). A
// successful probe slower than a threshold of the table is no proof: it isolates as a send of that
// latency would, with reason SlowProbe, and starts probation. With probation, one at or above the
// table's first threshold (but under every isolating one) is no proof either: it readmits nothing
// and starts a probation in progress over, since a probe sent during a pause is answered when the
// pause ends. A failed one marks it unreachable with reason ProbeFailed, counts as a consecutive
// failure (with GrowOnRepeat: as a new episode if probing and the broker was not isolated by a
// failure already) and, when probing, starts probation over.
func (t *Tolerance) ProbeResult(broker string, ok bool, latency time.Duration) {
	ev := t.lock()
	if e := t.lookup(broker); e != nil && e.present {
		now := t.tick()
		was := blocked(e, now)
		e.latency.Store(int64(latency))
		switch slow := t.opts.Table.IsolationFor(latency); {
		case ok && slow > 0:
			t.probeSlow(e, now, latency, slow)
		case ok && t.unproven(e, now, latency):
			t.probeUnproven(e)
		case ok:
			t.probeGood(e, now)
		default:
			t.probeFailed(e, now, latency)
		}
		t.settle(e, now, was, 0, &ev)
	}
	t.unlock(&ev)
}

// probeGood records a good, fast probe answer. Callers hold mu.
func (t *Tolerance) probeGood(e *Entry, now int64) {
	grow := t.opts.GrowOnRepeat
	if grow {
		if !e.reachable.Load() {
			e.calm = max(e.calm, now)
		}
		t.decay(e, now)
	}
	e.reachable.Store(true)
	if e.pending > 0 {
		t.startRun(e, now)
	}
	if e.pending > 1 {
		// On probation: this answer counts, but one answer in the up phase of a broker that
		// flaps is no proof that it stays up.
		e.pending--
		return
	}
	if e.pending == 1 && runTooShort(e, now) {
		// The last probe it needs, but the run has not lasted as long as the broker's trouble:
		// a later good probe readmits it.
		return
	}
	e.pending = 0
	// A repeat offender has to sit out its grown isolation even though it answers now: a
	// broker that flaps would otherwise be readmitted in every up phase. An answer is no proof
	// either for a broker isolated for refusing messages others store.
	if t.opts.Probing && e.until > now && (!grow || e.failures <= 1) && !t.probeProvesNothing(e) {
		e.until = now
		if grow && e.failures > 0 {
			e.calm = now
		}
	}
}

// minProofLatency is the least latency that can make a good probe answer no proof, whatever the
// table's first threshold: a custom table may start at 0 or 1 ms, and a threshold no network
// answers under would leave a broker on probation for good.
const minProofLatency = 10 * time.Millisecond

// unproven reports whether a good probe answer that took latency, under every isolating
// threshold, is still too slow to prove anything: with probation, while e's isolation timer
// runs, a probe must be answered under the table's first threshold (and at least
// minProofLatency). A probe sent during a pause is answered when the pause ends, and one that
// waited for the last 50-200 ms of it looks good but only shows that the broker pauses. Once the
// timer has run out such answers count again, as the table itself counts that latency as no
// fault: a broker whose every answer takes longer than the first threshold (one far away, or
// slow but steady) would otherwise be held out for good. Without probation every good answer
// counts, as before. Callers hold mu.
func (t *Tolerance) unproven(e *Entry, now int64, latency time.Duration) bool {
	return t.probation() > 0 && now < e.until && latency >= t.opts.Table.ProofLatency()
}

// probeUnproven records a good probe answer too slow to prove anything (see unproven): the broker
// is not readmitted, and one on probation starts it over, as after a failed probe, because the
// answer most likely waited out a pause. Its reachable flag, timer and reason stay. Callers hold
// mu.
func (t *Tolerance) probeUnproven(e *Entry) {
	if e.pending > 0 {
		t.startProbation(e)
	}
}

// probeProvesNothing reports whether e's isolation is one a good probe cannot end: a broker
// that refused messages others store, or one that refused sends as busy, still answers probes
// (which go through neither its store nor its send queue). Callers hold mu.
func (t *Tolerance) probeProvesNothing(e *Entry) bool {
	return e.reason == ReasonRefusesValidMessages || e.reason == ReasonBrokerBusy || e.reason == ReasonBrokerPressure ||
		(e.hung && e.reason == ReasonSendStalled)
}

// probeSlow records a probe answered, but slower than the table allows: the isolation a send of
// that latency would get, reason SlowProbe, and probation. Callers hold mu.
func (t *Tolerance) probeSlow(e *Entry, now int64, latency, isolation time.Duration) {
	e.reachable.Store(true)
	e.severity = max(e.severity, latency)
	if extend(e, now, isolation) || e.reason != ReasonRefusesValidMessages {
		e.reason = ReasonSlowProbe
	}
	t.startProbation(e)
}

// probeFailed records a probe that got no answer or a refusal. Callers hold mu.
func (t *Tolerance) probeFailed(e *Entry, now int64, latency time.Duration) {
	e.reachable.Store(false)
	e.reason = ReasonProbeFailed
	noteSilence(e, now)
	switch {
	case !t.opts.GrowOnRepeat:
		e.failures++
	case t.opts.Probing:
		// The broker is now held for proof: an episode, unless it was in one already.
		t.countFailure(e, now)
	}
	// Without probing a failed probe isolates nothing, so it starts no episode.
	e.severity = max(latency, t.opts.Table.FailureLatency())
	// Probes go to brokers that are held out already, so a failed one means the isolation
	// repeated.
	t.startProbation(e)
}

// probation is how many good probes in a row a broker on probation needs. Callers hold mu.
func (t *Tolerance) probation() int {
	if !t.opts.Probing || t.opts.ProbationProbes <= 1 {
		return 0
	}
	return t.opts.ProbationProbes
}

// startProbation puts e on probation, or starts its probation over. Callers hold mu.
func (t *Tolerance) startProbation(e *Entry) {
	e.pending = t.probation()
	e.streak = 0
}

// WatchSlow records that a probe of a broker the table does not hold out was answered, but
// slower than a threshold of the table: as a successful send of that latency (isolated for the
// table's time, reachable), with reason SlowProbe, and on probation as after a slow send. It is
// how a broker that pauses but answers in between is found by its probes, as its sends would
// find it. A latency under every threshold changes nothing.
func (t *Tolerance) WatchSlow(broker string, latency time.Duration) {
	if t.table.Load().IsolationFor(latency) == 0 {
		return
	}
	ef := effectOf(Semantics(t.sem.Load()), Success, t.probing.Load())
	ef.slow = ReasonSlowProbe
	t.apply(broker, latency, ef)
}

// WatchFailed records that a probe of a broker the table does not hold out went unanswered for
// as long as a send attempt may wait: a failed attempt (the failure latency's isolation, grown
// on repeat, unreachable when probing) with reason ProbeFailed, on a broker the table may not know
// yet because no send has reached it. It is how brokers that no traffic measures are found
// silent; as after a failed send, the broker is on probation (Options.ProbationProbes good probes
// in a row readmit it) and a repeat offender also sits out its grown isolation.
func (t *Tolerance) WatchFailed(broker string, latency time.Duration) {
	ef := effectOf(Semantics(t.sem.Load()), TransportError, t.probing.Load())
	ef.reason = ReasonProbeFailed
	t.apply(broker, latency, ef)
}

// RefusedValidMessage records that broker refused a message as MESSAGE_ILLEGAL that another broker
// then stored, latency being the refused attempt's: the message was fine, so the broker is at
// fault. It counts as a failed attempt (the failure latency's isolation, grown on repeat) with
// reason RefusesValidMessages, and leaves the broker reachable, since it answered. A good probe
// does not end this isolation, even for a first offender: a probe proves that a broker answers, not
// that it stores what it refused, so only the timer readmits it (or the isolation limit releases
// it). Nothing is recorded under SemanticsDisabled.
func (t *Tolerance) RefusedValidMessage(broker string, latency time.Duration) {
	t.apply(broker, latency, effect{isolation: true, reach: reachSet, reason: ReasonRefusesValidMessages})
}

// Busy records that broker refused a send because it is under pressure (SYSTEM_BUSY, or the page
// cache busy as it put the message), latency being the refused attempt's: a failed attempt (the
// failure latency's isolation, grown on repeat) with reason BrokerBusy that leaves the broker
// reachable, since it answered. As for RefusedValidMessage, a good probe does not end this
// isolation: a probe does not pass the send queue, so only the timer readmits the broker (or the
// isolation limit releases it, before any silent broker). Nothing is recorded under
// SemanticsDisabled.
func (t *Tolerance) Busy(broker string, latency time.Duration) {
	t.apply(broker, latency, effect{isolation: true, reach: reachSet, reason: ReasonBrokerBusy})
}

// Pressured records that the broker's runtime figures crossed the policy's pressure thresholds: it
// is held out of selection for hold from now (extended, never shortened), with reason
// BrokerPressure, so new sends go elsewhere before it refuses any. It is no failure: the broker
// stays reachable, no episode is counted, nothing grows, and it is the first the isolation limit
// releases (its severity is nil), so pressure alone never takes more brokers out than the isolation
// limit allows. A good probe does not end it; the next figures that show no pressure leave it to
// run out. An unknown broker becomes known (pressure is polled for the brokers the routes use,
// which need no send to be judged). Nothing is recorded under SemanticsDisabled.
func (t *Tolerance) Pressured(broker string, hold time.Duration) {
	ev := t.lock()
	if t.opts.Semantics != SemanticsDisabled && hold > 0 {
		now := t.tick()
		known := t.present
		e := t.obtain(broker, now)
		if t.present != known {
			// One more broker known may leave a restored excess over the isolation limit (see
			// Restore).
			t.enforceIsolationLimit(now, &ev)
		}
		was := blocked(e, now)
		if extend(e, now, hold) && (!was || e.reason == "" || e.reason == ReasonSlowSend || e.reason == ReasonSlowProbe) {
			// A failure's reason stays: it says more than the pressure that came after it.
			e.reason = ReasonBrokerPressure
		}
		if !was {
			e.severity = 0
		}
		t.settle(e, now, was, 0, &ev)
	}
	t.unlock(&ev)
}

// SetPodState records what Kubernetes says about the broker's pod. With RespectPodHealth,
// PodNotReady and PodTerminating make the broker unavailable until PodReady; without it the state
// is remembered and takes effect if a later Configure turns pod health on. PodGone removes the
// broker in either case.
func (t *Tolerance) SetPodState(broker string, s PodState) {
	if s == PodGone {
		t.Remove(broker)
		return
	}
	if s < PodReady || s > PodGone {
		return
	}
	ev := t.lock()
	now := t.tick()
	known := t.present
	e := t.obtain(broker, now)
	was := blocked(e, now)
	e.pod = s
	t.settle(e, now, was, 0, &ev)
	if t.present != known {
		// One more broker known may leave a restored excess over the isolation limit (see Restore).
		t.enforceIsolationLimit(now, &ev)
	}
	t.unlock(&ev)
}

// isolationLimit returns how many brokers may be unavailable at once, and false if there is no
// limit. Callers hold mu.
func (t *Tolerance) isolationLimit() (int, bool) {
	return IsolationLimit(t.present, t.opts.MaxIsolatedPercent)
}

// IsolationLimit is how many of n brokers an isolation limit of percent lets be unavailable at
// once: percent of n rounded down but at least one, and never all of them; false when percent sets
// no limit (0 or 100 and beyond). Whatever else enforces the limit (the name-server facade hiding
// brokers) counts as the fault table does.
func IsolationLimit(n, percent int) (int, bool) {
	if percent <= 0 || percent >= 100 {
		return 0, false
	}
	return max(min(max(n*percent/100, 1), n-1), 0), true
}

// enforceIsolationLimit releases the least bad unavailable brokers until no more than the limit
// allows are unavailable, or only pod-marked ones are left. Callers hold mu.
func (t *Tolerance) enforceIsolationLimit(now int64, ev *events) {
	limit, ok := t.isolationLimit()
	if !ok {
		return
	}
	for {
		count := 0
		var victim *Entry
		for _, e := range *t.entries.Load() {
			if !blocked(e, now) {
				continue
			}
			count++
			if e.holds&holdPod == 0 && (victim == nil || lessBad(e, victim)) {
				victim = e
			}
		}
		if count <= limit || victim == nil {
			return
		}
		if victim.until > now {
			victim.until = now
		}
		if victim.peer > now {
			victim.peer = now // the claim stays recorded: only a new claim isolates again
		}
		victim.holds &^= holdProof | holdProbation
		victim.pending = 0
		t.settleGate(victim, now)
		t.sync(victim, now, true, 0, ev)
	}
}

// lessBad orders brokers for release under the isolation limit: brokers that still answer first (a
// broker a probe found silent, or whose send got no answer, is the one certain to fail the next
// send: a dead broker must not be readmitted because a live one answered "busy"), then fewer
// consecutive failures (a slow but working broker before a failing one, a broker that failed once
// before one that keeps failing), then reachable before unreachable, lower severity, earlier end of
// isolation, and name, so the order is total.
func lessBad(a, b *Entry) bool {
	if sa, sb := silence(a), silence(b); sa != sb {
		return sa < sb
	}
	if a.failures != b.failures {
		return a.failures < b.failures
	}
	if ra, rb := a.reachable.Load(), b.reachable.Load(); ra != rb {
		return ra
	}
	if a.severity != b.severity {
		return a.severity < b.severity
	}
	if a.until != b.until {
		return a.until < b.until
	}
	return a.name < b.name
}

// silence ranks how surely e does not answer at all: 2 when its last probe failed, 1 when its
// last failure was a send without an answer and nothing has shown it reachable since, else 0.
// Callers hold mu.
func silence(e *Entry) int {
	switch {
	case e.reachable.Load():
		return 0
	case e.reason == ReasonProbeFailed:
		return 2
	case e.reason == ReasonSendFailed:
		return 1
	}
	return 0
}
