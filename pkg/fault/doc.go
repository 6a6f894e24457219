// Package fault keeps per-broker fault state for a RocketMQ producer and decides which brokers
// queue selection should avoid.
//
// # Words
//
// Five ideas, one word each, here and in the producer:
//
//   - a slow answer: an answer that came, slower than a threshold of the table that isolates
//     (reasons SlowSend, SlowProbe); it goes through Update with its latency. A broker that
//     pauses and then answers gives slow answers.
//   - a stalled attempt: one that got no answer in time, cut by its adaptive attempt deadline
//     (Stalled) or still waiting past the broker's stall threshold (IsolateStalled); reason
//     SendStalled.
//   - the attempt deadline: how long one attempt may wait before the producer gives it up and
//     goes on to another broker (Entry.AttemptDeadline, deadline.go, with the stall threshold
//     beside it).
//   - the isolation limit: the most brokers of a policy unavailable at once (MaxIsolatedPercent,
//     IsolationLimit).
//   - a hedge: the same message also sent to another broker while an attempt still waits, once it
//     has waited its broker's usual latency (Entry.HedgeDelay, deadline.go, beside the attempt
//     deadline); no verdict on the broker, whose attempt ends and is recorded as any other.
//
// # RocketMQ's semantics
//
// A Tolerance holds one item per broker name: the last measured latency, the time until which the
// broker is isolated, a reachable flag, a count of consecutive failures and the reason of the last
// isolation. Update applies the outcome of one send attempt as RocketMQ's
// MQFaultStrategy.updateFaultItem does at the synchronous send loop's call sites, by the rules of
// the release line Options.Semantics names (UpdateFaultItem takes RocketMQ's own arguments for the
// call sites that pass others):
//
//	outcome         RocketMQ 5.x (the default)                      RocketMQ 4.x
//	Success         measured latency, reachable                    measured latency
//	ClientError     measured latency, reachable*                   failure latency
//	Interrupted     measured latency, reachable*                   measured latency
//	TransportError  failure latency, reachable (not when probing)  failure latency
//	BrokerError     failure latency, unreachable                   failure latency
//
//	* left alone when probing: a client-side outcome proves nothing about the broker
//
// The stored latency is always the measured one; the table's failure latency only decides how
// long a failure isolates. Under RocketMQ 5.x's rules an isolation only ever extends: an update
// whose isolation would end sooner than the current one leaves it alone, so a fast success does
// not end an isolation early; availability ignores the reachable flag (as RocketMQ does since
// 5.2.0) unless probing is on. Under RocketMQ 4.x's rules every update sets the isolation end to
// now plus its own isolation, so a fast success ends an isolation and a shorter one replaces a
// longer one, and there is no reachable flag (brokers stay reachable unless probing marks a
// failure). SemanticsDisabled is RocketMQ's default, fault tolerance off: nothing is recorded.
// Unknown brokers are available and reachable.
//
// PickOneAtLeast is RocketMQ 4.x's last resort when no queue of a topic has an available broker:
// one of the better half of all items, sorted by availability, latency and isolation end, with
// ties in the order of RocketMQ's own item map, which the table reproduces (see itemOrder). Forget
// drops an item as RocketMQ's remove does.
//
// The Table maps latency to isolation: PresetRocketMQ5 (the default) and PresetRocketMQ4 carry
// the two lines' numbers, custom tables others. The numbers and the rules are independent.
// Differential tests in the producer package replay random scripts through RocketMQ's own classes
// (client 5.5.0, whose fault classes are those of 5.3.3, and 4.9.8) and through this package, and
// require the same state at every step.
//
// # Beyond RocketMQ
//
// Each of these is off unless its Options field asks for it, so the zero Options behave like
// RocketMQ 5.x with fault tolerance enabled. They apply under either line's rules.
//
//   - GrowOnRepeat: the isolation of a failed send grows with the number of isolation episodes
//     the broker has had (1x, 2x, 4x, then 8x at most) and never exceeds the table's
//     MaxIsolation, the longest isolation the policy declares. An episode is an entry into
//     isolation by a failure: failures while the broker is still isolated by an earlier one
//     (its failure isolation has not run out, or under probing it still waits for proof) do not
//     count again, so concurrent senders failing in one incident count once. The count does not
//     reset on a success; it is cleared once the broker has gone a probation period, the table's
//     FailureIsolation, without failing since its last episode ended. With probing, a successful
//     probe ends the isolation of a first offender only: a repeat offender is marked reachable
//     but sits out its grown timer. A broker that flaps is thereby readmitted less and less often,
//     while one that recovers for good returns to first-offence treatment after the probation.
//     Without GrowOnRepeat the count is of failed attempts and a successful send resets it.
//   - Probing (recovery only on proof): a transport error marks the broker unreachable, and an
//     unreachable broker stays unavailable after its isolation timer has run out, until a
//     successful probe (ProbeResult with ok) or a successful send proves it reachable again. A
//     successful probe also ends the timer isolation at once (with GrowOnRepeat, only for a first
//     offender, see above; with ProbationProbes, only the last of a probation's). A failed probe
//     keeps the broker unreachable with reason ProbeFailed. Without probing, ProbeResult only sets
//     the reachable flag, as RocketMQ's detector does (and, unlike it, also clears the flag on
//     failure).
//   - Probes that measure: a successful probe slower than a threshold of the table is no proof;
//     it isolates as a send of that latency would, with reason SlowProbe. WatchSlow records the
//     same for a broker the table does not hold out (a watched one).
//   - ProbationProbes: a broker isolated for silence (a send without an answer, a watch probe left
//     unanswered) or for a slow answer (a send or watch probe answered slower than a threshold
//     that isolates), even a first offender, and a broker whose isolation repeated (a probe found
//     it failing or slow while it was out, or it failed again after an earlier isolation: with
//     GrowOnRepeat a second episode, without it a second failure in a row) is held, with probing,
//     until that many good probes in a row; a failure in between starts the count over. A broker
//     that flaps or pauses answers a probe in its up phase, so one good probe proves nothing of
//     it. A good probe counts only if answered under the table's first threshold (and at least 10
//     ms): a probe sent during a pause is answered when the pause ends, and looks good; such an
//     answer readmits nothing and starts the count over, while the isolation's timer runs (after
//     it, it counts: a broker whose every answer is that slow, being far away or slow but steady,
//     would otherwise be held for good). What does not come from silence or a slow answer keeps
//     its rules: a broker error's isolation ends on one good probe (the broker answered), busy
//     refusals, pressure and refused valid messages on their timer (probes do not pass the send
//     queue or the store), pod marks with the pod. A value of 1 keeps one good probe of any
//     latency under the isolating thresholds. The isolation limit may release a broker on
//     probation like any other hold.
//   - MaxIsolatedPercent, the isolation limit: at most this share of the known brokers is
//     unavailable at once, rounded down but at least one when there are two or more brokers, and
//     never all of them, so at least one broker stays selectable. When a new isolation would
//     break the limit, the least bad of the newcomer and the brokers the limit may release is
//     released: it becomes available at once (its isolation ends now), and a Change with
//     Released set reports it. If the newcomer is the least bad, its isolation is thereby
//     refused; its latency, reason, failure count and reachable flag are still recorded. "Least
//     bad" orders fewer consecutive failures first (so a slow but working broker goes before a
//     failing one), then reachable before unreachable, then lower severity (the measured
//     latency, or for failures the larger of it and the failure latency), then the earlier end of
//     isolation, then the name. Releasing the least bad rather than always refusing the newcomer
//     means that a broker which dies while the limit is taken by a merely slow one is still
//     avoided. IsolationLimit is the same count for whatever else enforces it.
//   - RespectPodHealth: SetPodState with PodNotReady or PodTerminating makes the broker
//     unavailable without any send (reason PodNotReady or PodTerminating); PodReady clears the
//     mark. Pod marks count toward the isolation limit but the limit never releases them: a pod
//     that is going away does not come back because other brokers are slow. PodGone removes the
//     broker whatever the options say.
//   - StallAfter, stall detection: the producer tells each Entry when an attempt starts and ends
//     (AttemptStarted, AttemptEnded), and IsolateStalled, swept by the runtime on a short period,
//     holds out a broker whose oldest attempt in flight has gone unanswered past its stall
//     threshold (StallAfter, or StallFactor times its usual latency when longer) with reason
//     SendStalled, while that attempt still waits. The hold is no failure: when probing the
//     broker returns on its first answer, else it sits out the failure isolation. Stalled
//     records an attempt the producer's adaptive attempt deadline cut: the same hold the first
//     time, a failed attempt when the broker is held out already (a silence that goes on).
//   - StallProbation: a stall hold ends by the broker's probation (ProbationProbes good probes in
//     a row), not at its first answer: a broker that hangs one attempt in ten answers the other
//     nine. A stall counted as a failed attempt keeps reason SendStalled, so the isolation limit
//     still releases a broker that stopped answering before one that refuses connections (a
//     trial that counted stalls as plain failures made a broker warming up after a restart look
//     worse than one refusing every connection, and was taken back). With GrowOnRepeat, a stall
//     hold is an isolation episode (the failure isolation, grown on repeat, which a first
//     offender's probation ends): a broker that hangs again soon after its probation sits out its
//     grown isolation. StalledAnswering records an attempt cut while the broker ended others
//     meanwhile (Entry.EndedSince): a request it held or lost while serving the rest, which a
//     probe passes by, so a good probe does not end that hold's failure isolation.
//   - ProbationSpan: a probation after silence lasts as long as the broker's trouble has: its
//     good probes in a row must span the time from its first silence within TroubleWindow (a
//     stalled attempt, an attempt or watch probe without an answer, a failed probe) to the first
//     of them, at most ProbationSpan. A broker silent once for a moment returns after its probes;
//     one that hung or flapped twice within the window needs good probes across more than its
//     whole last cycle, which no single up phase gives (trouble.go).
//
// Busy, which no RocketMQ call site has either, records a send refused because the broker is under
// pressure (SYSTEM_BUSY, or its page cache busy): a failed attempt with reason BrokerBusy, grown
// on repeat, that leaves the broker reachable and that a good probe does not end (a probe does
// not pass the send queue).
//
// RefusedTopic, which no RocketMQ call site has, records a broker that refused a topic as
// TOPIC_NOT_EXIST: the broker is held out for that topic alone (Entry.HeldFor), for the table's
// failure isolation or until TopicShown reports a check of that topic on that broker that shows
// it; it stays available for every other topic, and nothing is counted or grown. A probe cannot
// end such a hold (it proves that the broker answers, not that it has the topic). Holds are
// bounded per broker (MaxTopicHolds), see topichold.go.
//
// Pressured holds a broker out for a while because its own figures say it is about to refuse
// sends (reason BrokerPressure): no failure, no growth, not ended by a probe, and the first the
// isolation limit releases.
//
// RefusedValidMessage, which no RocketMQ call site has, records a broker that refused as
// MESSAGE_ILLEGAL a message another broker stored: a failed attempt with reason
// RefusesValidMessages, grown on repeat like any other, that a good probe does not end (the
// broker answers probes; it is its store that refuses).
//
// Under RocketMQ 5.x's rules an isolation therefore ends early in exactly two ways, both beyond
// RocketMQ: a successful probe when probing (of a first offender, when GrowOnRepeat is on; the
// last of a probation's), and a release by the isolation limit. Everything else only extends
// it, apart from Remove, which forgets the broker altogether, and Forget, which forgets what was
// learnt about it.
//
// # Read path
//
// Available, Reachable and the methods of Entry take no lock and allocate nothing. Every policy
// effect is folded by the writers (which serialise on one mutex) into one atomic word per
// broker, so a check is one atomic load for a healthy broker and one load plus a clock read for
// an isolated one. Entry returns a handle that stays valid for the life of the Tolerance, even
// across Remove: a removed broker's handle reports available and reachable until the broker is
// known again.
//
// # Changes and time
//
// OnChange is called outside any lock whenever a broker becomes unavailable or available again
// through an update, a probe, a pod mark, the isolation limit, Remove, Restore or Configure.
// Leaving isolation because a timer ran out happens without any call, so it is reported later: by
// the next call that touches the broker, or by Expire, which a caller runs when NextExpiry says
// the earliest isolation ends. Changes carry a sequence number, because callbacks from concurrent
// calls may run in any order. Isolated always reports the state at the moment of the call.
//
// All times come from the Clock in Options; tests use a ManualClock and never sleep.
package fault
