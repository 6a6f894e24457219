package fault

import "time"

// How long an attempt may wait for a broker's answer is decided here, by two rules of one shape:
// the larger of a floor and a factor times the broker's usual latency (Entry.UsualLatency, the
// high mark of its answers to successful attempts).
//
//   - The attempt deadline (Entry.AttemptDeadline) is when the producer gives up an attempt that
//     is not its send's last and goes on to another broker: the policy's per-attempt timeout, or
//     with an adaptive deadline AttemptDeadlineFactor times the usual latency, at least
//     AttemptDeadlineFloor and at most the per-attempt timeout. An attempt cut by an adaptive
//     deadline is a stalled attempt (Tolerance.Stalled).
//
//   - The stall threshold (Tolerance.stallThreshold) is when a broker whose oldest attempt in
//     flight has had no answer is held out as stalled, while that attempt still waits
//     (Tolerance.IsolateStalled): Options.StallAfter, or Options.StallFactor times the usual
//     latency when that is longer. The producer passes StallThresholdFactor.
//
//   - The hedge delay (Entry.HedgeDelay) is when the producer, with hedging on, also sends the
//     attempt's message to another broker while the attempt still waits: the usual latency itself
//     (a high quantile of the broker's answers), at least HedgeDelayFloor, and only when it comes
//     before the attempt deadline. A hedge is no verdict on the broker: the attempt that waits
//     still ends as a success, a slow answer or a stalled attempt, and is recorded as such.
//
// With the Detour preset's numbers the stall threshold is never the longer of the two (a floor of
// 100 ms against 200 ms, the same factor), so a broker that stops answering is held out while its
// attempts still wait, and new attempts go elsewhere before old ones are cut.
const (
	// AttemptDeadlineFloor is the least an adaptive attempt deadline allows: a broker answering
	// in a millisecond still gets this long, so a pause of the kind a healthy JVM takes does not
	// cut its attempts short and send a second copy elsewhere.
	AttemptDeadlineFloor = 200 * time.Millisecond
	// AttemptDeadlineFactor times a broker's usual latency is its adaptive attempt deadline
	// above the floor.
	AttemptDeadlineFactor = 4
	// StallThresholdFactor times a broker's usual latency is its stall threshold above
	// Options.StallAfter; the producer sets Options.StallFactor to it.
	StallThresholdFactor = 4
	// HedgeDelayFloor is the least a hedge waits: below it a hedge would answer the scheduler's
	// own tail (a 1 ms sleep may wake ten late on a busy machine) with a second stored copy.
	HedgeDelayFloor = 20 * time.Millisecond
)

// AttemptDeadline decides how long one attempt to the broker may wait for its answer before the
// producer gives it up and goes on: perAttempt is the policy's per-attempt timeout (0: none),
// adaptive whether the deadline follows the broker's usual latency, last whether the attempt is
// its send's last, remaining the send's budget left. It returns 0 when the attempt runs on the
// send's own budget instead: no per-attempt timeout, the last attempt (RocketMQ's
// sendMsgMaxTimeoutPerRequest spares it too), or no more budget left than the deadline. cut says
// the deadline is an adaptive one, shorter than the per-attempt timeout: an attempt it cuts is a
// stalled attempt, not a failed one. A broker with no success measured gets the per-attempt
// timeout. See the comment on AttemptDeadlineFloor's block for the stall threshold beside it.
func (e *Entry) AttemptDeadline(perAttempt time.Duration, adaptive, last bool, remaining time.Duration) (deadline time.Duration, cut bool) {
	if perAttempt <= 0 || last {
		return 0, false
	}
	deadline = perAttempt
	if adaptive {
		if usual := e.UsualLatency(); usual > 0 {
			deadline = min(perAttempt, max(AttemptDeadlineFloor, AttemptDeadlineFactor*usual))
		}
	}
	if remaining <= deadline {
		return 0, false
	}
	return deadline, deadline < perAttempt
}

// HedgeDelay decides how long one attempt to the broker waits before the producer also sends its
// message to another broker (a hedge): the broker's usual latency (Entry.UsualLatency, the high
// mark of its answers to successful attempts, which few answers exceed), at least
// HedgeDelayFloor; a broker with no success measured yet gets AttemptDeadlineFloor, as long as a
// cold broker's adaptive attempt deadline allows. deadline is the attempt deadline (0: none) and
// remaining the send's budget left. It returns 0, no hedge, when the delay does not come before
// both: the attempt deadline would cut the attempt first and the send go on to another broker
// anyway, or the send would end.
func (e *Entry) HedgeDelay(deadline, remaining time.Duration) time.Duration {
	delay := AttemptDeadlineFloor
	if usual := e.UsualLatency(); usual > 0 {
		delay = max(HedgeDelayFloor, usual)
	}
	if delay >= remaining || (deadline > 0 && delay >= deadline) {
		return 0
	}
	return delay
}

// stallThreshold is how long the broker's oldest attempt in flight may go unanswered before it is
// suspect: StallAfter, or StallFactor times its usual latency when that is longer. A broker with
// no success measured yet has no usual latency to judge by, and gets StallFactor times StallAfter:
// a cold broker slower than the floor is not a stalled one.
func (t *Tolerance) stallThreshold(e *Entry) time.Duration {
	factor := time.Duration(max(t.opts.StallFactor, 1))
	usual := e.UsualLatency()
	if usual == 0 {
		return factor * t.opts.StallAfter
	}
	return max(t.opts.StallAfter, factor*usual)
}
