// Package fault keeps per-broker fault state for a RocketMQ producer and decides which brokers
// queue selection should avoid.
//
// # RocketMQ 5.x semantics
//
// A Tolerance holds one item per broker name: the last measured latency, the time until which the
// broker is isolated, a reachable flag, a count of consecutive failures and the reason of the last
// isolation. Update applies the outcome of one send attempt as RocketMQ 5.x's
// MQFaultStrategy.updateFaultItem does:
//
//	outcome         isolation computed from     reachable
//	Success         measured latency            true
//	ClientError     measured latency            true (unchanged when probing)
//	TransportError  the table's failure latency true (false when probing)
//	BrokerError     the table's failure latency false
//
// The stored latency is always the measured one. Isolation only ever extends: an update whose
// isolation would end sooner than the current one leaves it alone, so a fast success does not end
// an isolation early. Unknown brokers are available and reachable. Availability ignores the
// reachable flag (as RocketMQ does since 5.2.0) unless probing is on.
//
// The Table maps latency to isolation. PresetRocketMQ5 is the default; PresetRocketMQ4 carries
// the older, longer numbers. Only the numbers change with the table; updates keep 5.x semantics.
//
// # Beyond RocketMQ
//
// Each of these is off unless its Options field asks for it, so the zero Options behave like
// RocketMQ 5.x with fault tolerance enabled.
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
//     successful probe also ends the timer isolation at once (with GrowOnRepeat, only for a
//     first offender, see above). A failed probe keeps the broker unreachable with reason
//     ProbeFailed. Without probing, ProbeResult only sets the reachable flag, as RocketMQ's
//     detector does (and, unlike it, also clears the flag on failure).
//   - MaxIsolatedPercent: at most this share of the known brokers is unavailable at once, rounded
//     down but at least one when there are two or more brokers, and never all of them, so at
//     least one broker stays selectable. When a new isolation would break the cap, the least bad
//     of the newcomer and the brokers the cap may release is released: it becomes available at
//     once (its isolation ends now), and a Change with Released set reports it. If the newcomer
//     is the least bad, its isolation is thereby refused; its latency, reason, failure count and
//     reachable flag are still recorded. "Least bad" orders fewer consecutive failures first (so
//     a slow but working broker goes before a failing one), then reachable before unreachable,
//     then lower severity (the measured latency, or for failures the larger of it and the
//     failure latency), then the earlier end of isolation, then the name. Releasing the least
//     bad rather than always refusing the newcomer means that a broker which dies while the cap
//     is taken by a merely slow one is still avoided.
//   - RespectPodHealth: SetPodState with PodNotReady or PodTerminating makes the broker
//     unavailable without any send (reason PodNotReady or PodTerminating); PodReady clears the
//     mark. Pod marks count toward MaxIsolatedPercent but the cap never releases them: a pod that
//     is going away does not come back because other brokers are slow. PodGone removes the
//     broker whatever the options say.
//
// An isolation therefore ends early in exactly two ways, both beyond RocketMQ: a successful
// probe when probing (of a first offender, when GrowOnRepeat is on), and a release by the cap. Everything else only extends it, apart from
// Remove, which forgets the broker altogether.
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
// through an update, a probe, a pod mark, the cap, Remove, Restore or Configure. Leaving isolation
// because a timer ran out happens without any call, so it is reported later: by the next call
// that touches the broker, or by Expire, which a caller runs when NextExpiry says the earliest
// isolation ends. Changes carry a sequence number, because callbacks from concurrent calls may
// run in any order. Isolated always reports the state at the moment of the call.
//
// All times come from the Clock in Options; tests use a ManualClock and never sleep.
package fault
