package fault

import "time"

// Attempts in flight and stalled attempts. The producer tells each broker's Entry when an attempt
// starts and ends (AttemptStarted, AttemptEnded), and feeds every success's latency to the
// estimate behind UsualLatency (observe, from Update). From these:
//
//   - the broker's usual latency, which the attempt deadline and the stall threshold multiply
//     (both in deadline.go, side by side);
//   - IsolateStalled, which the runtime sweeps on a short period: a broker whose oldest attempt
//     in flight has gone unanswered past its stall threshold is held out as ReasonSendStalled
//     while that attempt still waits;
//   - Stalled, which the producer calls when an adaptive attempt deadline cut an attempt: held
//     out the first time, a failure when the silence goes on.
//
// A stalled attempt is one that got no answer in time; an answer that came, but slowly, is a
// slow answer and goes through Update with its latency (ReasonSlowSend).

// AttemptStarted records that an attempt to the broker is now in flight. With AttemptEnded it
// keeps the count of attempts in flight and the broker's last sign of life, from which
// IsolateStalled tells a broker that has stopped answering before any attempt reaches its
// deadline. It returns the attempt's mark for EndedSince: the broker's last sign of life when it
// began, so only the first of concurrent attempts reads the clock. It takes no lock.
func (e *Entry) AttemptStarted() (mark int64) {
	if e.inflight.Add(1) == 1 {
		mark = e.t.tick()
		e.progress.Store(mark)
		return mark
	}
	return e.progress.Load()
}

// EndedSince reports whether another attempt to the broker ended after the attempt marked mark
// (AttemptStarted's) began, moving the broker's last sign of life past the mark; called before
// that attempt's own AttemptEnded. An attempt cut by its
// deadline while others ended meanwhile was left unanswered by a broker that served the rest: a
// hung request, not a pause (see StalledAnswering). It takes no lock.
func (e *Entry) EndedSince(mark int64) bool {
	return e.progress.Load() > mark
}

// AttemptEnded records that an attempt to the broker ended, whatever its outcome: an answer, an
// error or a timeout ends the wait it stood for. It takes no lock.
func (e *Entry) AttemptEnded() {
	e.progress.Store(e.t.tick())
	e.inflight.Add(-1)
}

// InFlight returns the attempts in flight to the broker and how long the oldest has waited
// without an answer from the broker (0 when none is in flight).
func (e *Entry) InFlight() (int, time.Duration) {
	n := int(e.inflight.Load())
	if n <= 0 {
		return 0, 0
	}
	return n, time.Duration(max(0, e.t.tick()-e.progress.Load()))
}

// UsualLatency is the high mark of the broker's latency on success: the smoothed latency plus
// four mean deviations, as TCP derives its retransmission timeout from its round trips (RFC
// 6298). 0 until a success was measured. Failures never feed it: a broker that fails fast (a
// refused connection, an error code at once) must not look fast.
func (e *Entry) UsualLatency() time.Duration {
	return time.Duration(e.srtt.Load() + 4*e.rttvar.Load())
}

// observe feeds a success's latency to the estimate behind UsualLatency (gains 1/8 and 1/4, as
// RFC 6298). Concurrent senders may each read the estimate before the other's store; one of the
// two samples is then lost, which an average of many can afford and a lock on every send could
// not.
func (e *Entry) observe(latency time.Duration) {
	x := int64(max(latency, 0))
	s := e.srtt.Load()
	if s == 0 {
		e.srtt.Store(max(x, 1))
		e.rttvar.Store(x / 2)
		return
	}
	d := x - s
	v := e.rttvar.Load()
	e.rttvar.Store(v + (abs(d)-v)/4)
	e.srtt.Store(max(s+d/8, 1))
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// IsolateStalled holds out every available broker whose oldest attempt in flight has waited past
// its stall threshold with no answer from it meanwhile (Options.StallAfter, StallFactor; see
// stallThreshold in deadline.go): the broker is suspect before any of those attempts reaches its
// deadline, and new attempts go to brokers that answer. The hold is no failure (nothing is
// counted, nothing grows): when probing, the broker is marked unreachable and returns on the
// first answer, a probe's or an attempt's; without probing it sits out the table's failure
// isolation. With StallProbation it returns through its probation instead, and with
// GrowOnRepeat the hold is an isolation episode (see Options.StallProbation). The reason is
// ReasonSendStalled and the latency the wait so far. It returns the brokers it held out. Nothing is done when StallAfter is 0 or under
// SemanticsDisabled. The runtime calls it on a short period.
func (t *Tolerance) IsolateStalled() []string {
	ev := t.lock()
	var held []string
	if t.opts.StallAfter > 0 && t.opts.Semantics != SemanticsDisabled {
		now := t.tick()
		for _, e := range *t.entries.Load() {
			if !e.present || e.inflight.Load() <= 0 || blocked(e, now) {
				continue
			}
			wait := time.Duration(now - e.progress.Load())
			if wait <= t.stallThreshold(e) {
				continue
			}
			e.hung = false
			t.holdStalled(e, now, wait, &ev)
			held = append(held, e.name)
		}
	}
	t.unlock(&ev)
	return held
}

// Stalled records that an attempt to the broker was given up unanswered after wait, sooner than a
// failure would be judged: the producer's adaptive attempt deadline, at a few times the broker's
// usual latency, cut it (see Entry.AttemptDeadline). The first sign of silence only holds the
// broker out (see IsolateStalled); one that comes while the broker is held out already is a silence
// that goes on, and counts as a failed attempt (TransportError), so a broker that stops answering,
// or flaps, is isolated, grown and put on probation as a failing one is. An unknown broker is left
// alone; nothing is recorded under SemanticsDisabled.
func (t *Tolerance) Stalled(broker string, wait time.Duration) {
	t.stalled(broker, wait, false)
}

// stalled is Stalled, and with hung StalledAnswering.
func (t *Tolerance) stalled(broker string, wait time.Duration, hung bool) {
	ev := t.lock()
	if t.opts.Semantics == SemanticsDisabled {
		t.unlock(&ev)
		return
	}
	e := t.lookup(broker)
	if e == nil || !e.present {
		t.unlock(&ev)
		return
	}
	if now := t.tick(); !blocked(e, now) {
		e.hung = hung && t.stallHeldOnProbation()
		t.holdStalled(e, now, wait, &ev)
		t.unlock(&ev)
		return
	}
	ef := effectOf(Semantics(t.sem.Load()), TransportError, t.probing.Load())
	if t.stallHeldOnProbation() {
		// Still a stalled attempt, not a refused one: the isolation limit releases it first.
		ef.reason = ReasonSendStalled
	}
	t.unlock(&ev)
	t.apply(broker, wait, ef)
}

// StalledAnswering records, as Stalled does, an attempt the adaptive attempt deadline cut, but one
// its broker left unanswered while it ended others (Entry.EndedSince): a request the broker holds
// or lost while it serves the rest, as a relay that holds one request in ten, not a pause. With
// StallProbation the hold it starts is one a good probe cannot end (probes pass where the request
// did not): the broker sits out the failure isolation of its episode, then its probation.
// Otherwise it is Stalled.
func (t *Tolerance) StalledAnswering(broker string, wait time.Duration) {
	t.stalled(broker, wait, true)
}

// holdStalled holds out e, available until now, as stalled for wait: unreachable when probing
// (back with its next answer, or with StallProbation through its probation), else for the
// table's failure isolation. Callers hold mu.
func (t *Tolerance) holdStalled(e *Entry, now int64, wait time.Duration, ev *events) {
	t.order.insert(e)
	e.reason, e.severity = ReasonSendStalled, wait
	e.latency.Store(int64(wait))
	noteSilence(e, now)
	if t.opts.Probing {
		e.reachable.Store(false)
		if t.stallHeldOnProbation() {
			// Its next answer proves nothing: the broker that hangs one attempt in ten answers
			// the other nine.
			t.startProbation(e)
			t.stallEpisode(e, now)
		}
	} else {
		extend(e, now, t.opts.Table.FailureIsolation())
	}
	t.settle(e, now, false, 0, ev)
}
