// Package producer is detour's embedded RocketMQ producer runtime: it holds the brokers, routes
// and fault policies that the controllers push in, and sends messages with RocketMQ's queue
// selection, retry loop and latency fault tolerance, plus the cluster awareness RocketMQ lacks.
//
// # Presets
//
// Every policy starts from a Preset, a whole behaviour, and its fields override it:
//
//   - PresetRocketMQ5, PresetRocketMQ4 and PresetDisabled are RocketMQ's own producers (5.3.x and
//     4.9.x with sendLatencyFaultEnable=true, and RocketMQ's default with it false): their tables
//     and update rules (see the fault package), their selection, their retry codes and their
//     rules per send mode, with none of detour's extensions. Differential tests replay random
//     scripts through RocketMQ's own MQFaultStrategy, LatencyFaultToleranceImpl and
//     TopicPublishInfo and through this package and require the same queue at every step.
//   - PresetDetour, the default and the runtime's default policy, is RocketMQ 5.x's table and
//     rules with detour's extensions on: probing, growth on repeated failures, pod health, an
//     isolation limit, an attempt deadline that follows each broker's latency, stall detection,
//     and the selection and retry differences listed below.
//
// # State
//
// SetBroker, SetRoute and SetPolicy (and their Remove counterparts) build a new immutable
// snapshot under one writer mutex and publish it with an atomic pointer swap; senders never take
// a lock and never see a half-applied change. Each policy owns one fault.Tolerance, shared by
// every topic that names the policy, as one RocketMQ producer owns one MQFaultStrategy. A route
// naming an unknown policy uses the default policy (named "") until that policy arrives. Pod
// state from SetBroker reaches every policy's table. Routes are compiled the way RocketMQ builds
// its TopicPublishInfo: brokers sorted by name, queue ids ascending, brokers without an address
// left out.
//
// # Selection
//
// Queue selection follows MQFaultStrategy.selectOneMessageQueue of the preset's line, index
// arithmetic included. RocketMQ 5.x: round robin from a randomised start, first among queues
// whose broker is available and is not the previous attempt's broker, then among reachable ones
// that are not the previous broker, then any queue (which may be the previous broker); a sync
// retry resets the index at random. RocketMQ 4.x: one index step, then a walk to the first queue
// whose broker is available (the previous broker not avoided), then pickOneAtLeast's broker, then
// any queue. Fault tolerance off: queues not on the previous broker, then any. Brokers whose pods
// are not ready or terminating are skipped in every pass while any other broker remains (when the
// policy respects pod health). A compiled route holds its queues with their brokers' fault
// handles, so a selection is one atomic add, a few atomic loads and no allocation.
//
// Under every preset the round-robin index is shared by all senders of a topic (RocketMQ keeps
// one per thread, which for a single sender is the same), so the spread stays within one message
// per queue across concurrent senders. PresetDetour differs from RocketMQ 5.x in three more ways:
// retries start from a random position instead of resetting that shared index, a retry never
// returns to the previous broker while another broker with a healthy pod exists (its extra pass
// prefers another isolated broker to the one that just failed), and a retry returns to an address
// whose connection was refused or lost in the same send only when no other broker is left,
// whatever the other brokers' pods say (a restarting broker behind the only Ready pod would
// otherwise take every attempt while a broker behind a NotReady pod answers).
//
// A broker restarted in a new pod comes back at a new address, which a route from name servers
// learns at its next refresh. PresetDetour does not wait for it: a connection refused at a
// routed address asks the route's name servers at once (refreshes spaced at least 200 ms apart),
// and a retry that has only refusing addresses left waits for that answer (at most 1 s and the
// budget) and goes to the address the name servers publish now. A broker whose pod is pushed at a
// new address (SetBroker) has its routes' name servers asked too, and until they publish the new
// address, routes that still carry the pod's old one send to the new one.
//
// # Sending
//
// Send, SendAsync and SendOneway validate the message with RocketMQ's client rules before any
// I/O, then run one retry loop (sendloop.go): up to the policy's attempts within one budget (the
// earlier of the context's deadline and the policy's send timeout), retrying on transport errors
// and on the policy's retry codes, with the same UNIQ_KEY on every attempt and a fault-table
// update after every attempt with that attempt's own latency and outcome (as sendDefaultImpl
// classifies them: success, transport error, broker error, interrupted). SEND_MESSAGE_V2 is used
// throughout.
//
// Every attempt but the last runs under its attempt deadline, which fault.Entry.AttemptDeadline
// decides: the policy's per-attempt timeout, or with AdaptivePerAttempt (PresetDetour) four times
// the broker's usual latency on success, at least 200 ms and at most the per-attempt timeout (a
// broker with no success measured gets the timeout); none when the budget left is no longer. The
// last attempt has the rest of the budget. An attempt cut by an adaptive deadline is a stalled
// attempt, not a failed one: the broker is held out (fault.Tolerance.Stalled) until it answers,
// under PresetDetour until its probation ends (three good probes, spread over as long as its
// trouble lasted), and only a silence that goes on counts as a failure, still as SendStalled. Each attempt is counted in flight on its
// broker's fault entry while it waits (fault.Entry.AttemptStarted), so with StallAfter
// (PresetDetour: 100 ms) a broker whose oldest attempt goes unanswered past its stall threshold,
// four times its usual latency and at least StallAfter, is held out as SendStalled while that
// attempt still waits, and new sends go elsewhere. Both rules sit side by side in the fault
// package's deadline.go.
//
// Under RocketMQ's presets each mode keeps RocketMQ's rules: a oneway send makes one attempt and
// sees only the failures RocketMQ sees (5.x: none, so a oneway send to an unreachable broker is
// dropped without an error; 4.x: a connection that cannot be made); an
// async send retries transport failures only (up to the policy's attempts, without resetting the
// index), hands a broker's refusal to its callback at once and records attempts with the async
// callbacks' flags (a refusal isolates but leaves the broker reachable; a connection that cannot
// be made marks it unreachable); RetryAnotherBrokerWhenNotStoreOK applies to sync sends only.
// Under PresetDetour async and oneway sends retry as sync ones do (a oneway send can only see a
// failed write).
//
// Under RocketMQ's presets the loop keeps sendDefaultImpl's order and arithmetic: every attempt's
// queue is selected before the budget is checked, so a send whose budget ran out still makes that
// selection (the index moves; under 4.x pickOneAtLeast may drop a record), and the budget counts
// whole milliseconds and is spent only once more than it holds have passed, so an attempt can
// start with nothing left and fail at once as a timeout against its broker. Under RocketMQ4 an
// attempt on a broker the route names without an address (pickOneAtLeast's last resort) fails
// with *BrokerNotExistError before any I/O, isolates the broker and is retried, as RocketMQ 4.x
// does. PresetDetour checks the budget first, gives up as soon as nothing is left, and selects
// only for an attempt it makes. Not reproduced under any preset: RocketMQ's extra fault update
// when an async request is dispatched (it only marks the broker reachable until the answer's
// update lands), RocketMQ 4.x's async retries past the budget, and the error shapes: a spent
// budget and a refusal that is not retried end in *SendError here, where RocketMQ throws
// "sendDefaultImpl call timeout" or the broker's exception itself.
//
// A send that no attempt completed returns a *SendError whose text is RocketMQ's
// "Send [n] times, still failed, cost [x]ms, Topic: T, BrokersSent: [...]" followed by the last
// cause, which it wraps. A caller cancelling the context ends the send at once and counts as
// fault.Interrupted (RocketMQ's InterruptedException), not as the broker's fault.
//
// # Recovery and events
//
// With probing on, a policy's probe loop sends GET_MAX_OFFSET to its isolated brokers at the
// policy's interval and feeds the outcomes back (fault.Tolerance.ProbeResult): a healed broker
// returns after a good probe (SUCCESS with a readable offset, as RocketMQ's detector decodes it),
// a dead one stays out. A timer, every 100 ms by default (Options.ExpiryInterval), asks every
// table to expire finished isolations, so "left isolation" events arrive without a send, and to
// hold out brokers with a stalled attempt (fault.Tolerance.IsolateStalled). Events delivers every
// change on a buffered channel that never blocks a sender (see Events).
package producer
