package fault

import "time"

// A broker's trouble: how long it has been found silent, which decides how long its probation
// after silence lasts when Options.ProbationSpan is set. Three good probes in a row take two or
// three probe intervals, which a broker that flaps (1.8 s stopped, 1.8 s running) or hangs one
// attempt in ten fits into one up phase: it was readmitted there, and its next silence caught
// the sends that came meanwhile. A probation that lasts as long as the trouble has does not fit:
// the first silence within the window anchors the trouble, so a broker silent again a cycle later
// needs good probes across more than that whole cycle. One silence longer than the span is not
// that: it is an outage that has ended (a network healed, a JVM thawed), and its broker returns on
// its probes as before, unless it was silent again after answering, which makes it a relapse.

// TroubleWindow is how long a broker's silence is remembered: a silence within it of the last
// one belongs to the same trouble, which keeps its start; one after a calm as long starts anew.
const TroubleWindow = time.Minute

// noteSilence records that e was found silent at now: a stalled attempt, an attempt or watch
// probe without an answer, a failed probe. Callers hold mu.
func noteSilence(e *Entry, now int64) {
	switch {
	case e.troubled == 0 || now-e.silenced > int64(TroubleWindow):
		e.troubled, e.relapsed = now, false
	case e.answered:
		e.relapsed = true
	}
	e.silenced, e.answered = now, false
}

// startRun records a good probe of e on probation at now: the first of a run fixes how long the
// run must last, the trouble so far (see Options.ProbationSpan), unless the trouble is one
// silence longer than the span. Callers hold mu.
func (t *Tolerance) startRun(e *Entry, now int64) {
	if e.streak != 0 {
		return
	}
	e.streak = now
	e.span = 0
	e.answered = true
	trouble := time.Duration(now - e.troubled)
	if t.opts.ProbationSpan > 0 && e.troubled != 0 && now-e.silenced <= int64(TroubleWindow) &&
		(e.relapsed || trouble < t.opts.ProbationSpan) {
		e.span = min(trouble, t.opts.ProbationSpan)
	}
}

// runTooShort reports whether e's run of good probes has not yet lasted its span at now, so its
// last probe of probation must wait for a later one. Callers hold mu.
func runTooShort(e *Entry, now int64) bool {
	return e.streak != 0 && time.Duration(now-e.streak) < e.span
}

// stallEpisode counts, with GrowOnRepeat, a stall hold that puts the broker on probation as an
// isolation episode, unless the broker is in one already: the isolation of a failure, grown on
// repeat, which a first offender's probation ends and a repeat offender sits out. So a broker
// that hangs again soon after its probation readmitted it is out for its grown isolation, rather
// than a first offender at every hang. The stall keeps its reason (see Options.StallProbation).
// Callers hold mu, with e available until now.
func (t *Tolerance) stallEpisode(e *Entry, now int64) {
	if !t.opts.GrowOnRepeat {
		return
	}
	t.countFailure(e, now)
	d := t.grow(t.opts.Table, e.failures)
	e.calm = max(e.calm, now+int64(d))
	extend(e, now, d)
}

// stallHeldOnProbation reports whether a stall hold puts the broker on probation (see
// Options.StallProbation). Callers hold mu.
func (t *Tolerance) stallHeldOnProbation() bool {
	return t.opts.StallProbation && t.probation() > 0
}
