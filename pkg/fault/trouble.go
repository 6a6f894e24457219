package fault

import "time"

// A broker's trouble: how long it has been found silent, which decides how long its probation
// after silence lasts when Options.ProbationSpan is set. Three good probes in a row take two or
// three probe intervals, which a broker that flaps (1.8 s stopped, 1.8 s running) or hangs one
// attempt in ten fits into one up phase: it was readmitted there, and its next silence caught
// the sends that came meanwhile. A probation that lasts as long as the trouble has does not fit:
// the first silence within the window anchors the trouble, so a broker silent again a cycle later
// needs good probes across more than that whole cycle.

// TroubleWindow is how long a broker's silence is remembered: a silence within it of the last
// one belongs to the same trouble, which keeps its start; one after a calm as long starts anew.
const TroubleWindow = time.Minute

// noteSilence records that e was found silent at now: a stalled attempt, an attempt or watch
// probe without an answer, a failed probe. Callers hold mu.
func noteSilence(e *Entry, now int64) {
	if e.troubled == 0 || now-e.silenced > int64(TroubleWindow) {
		e.troubled = now
	}
	e.silenced = now
}

// startRun records a good probe of e on probation at now: the first of a run fixes how long the
// run must last, the trouble so far (see Options.ProbationSpan). Callers hold mu.
func (t *Tolerance) startRun(e *Entry, now int64) {
	if e.streak != 0 {
		return
	}
	e.streak = now
	e.span = 0
	if t.opts.ProbationSpan > 0 && e.troubled != 0 && now-e.silenced <= int64(TroubleWindow) {
		e.span = min(time.Duration(now-e.troubled), t.opts.ProbationSpan)
	}
}

// runTooShort reports whether e's run of good probes has not yet lasted its span at now, so its
// last probe of probation must wait for a later one. Callers hold mu.
func runTooShort(e *Entry, now int64) bool {
	return e.streak != 0 && time.Duration(now-e.streak) < e.span
}

// countStallEpisode counts, with GrowOnRepeat, a stalled attempt cut while its stall hold runs
// as a new isolation episode when the hold began after the broker's last episode ended: the
// hold's own wait for proof would otherwise hide it (countFailure sees the broker in an
// episode), and a broker that hung again after it came back would be a first offender every
// time, back after each probation. A last episode older than the table's failure isolation is
// forgotten first, as decay does. Callers hold mu.
func (t *Tolerance) countStallEpisode(e *Entry, now int64) {
	if !t.opts.GrowOnRepeat || e.failures == 0 || e.since < e.calm {
		return
	}
	if now-e.calm >= int64(t.opts.Table.FailureIsolation()) {
		e.failures = 0 // countFailure counts it as a first episode
		return
	}
	e.failures++
}

// stallHeldOnProbation reports whether a stall hold puts the broker on probation (see
// Options.StallProbation). Callers hold mu.
func (t *Tolerance) stallHeldOnProbation() bool {
	return t.opts.StallProbation && t.probation() > 0
}
