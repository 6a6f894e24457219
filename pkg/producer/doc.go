// Package producer is detour's embedded RocketMQ producer runtime: it holds the brokers, routes
// and fault policies that the controllers push in, and sends messages with RocketMQ 5.x's queue
// selection, retry loop and latency fault tolerance, plus the cluster awareness RocketMQ lacks.
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
// Queue selection follows MQFaultStrategy.selectOneMessageQueue: round robin from a randomised
// start, first among queues whose broker is available and is not the previous attempt's broker,
// then among reachable ones that are not the previous broker, then any. Brokers whose pods are
// not ready or terminating are skipped in every pass while any other broker remains (when the
// policy respects pod health). A compiled route holds its queues with their brokers' fault
// handles, so a selection is one atomic add, a few atomic loads and no allocation.
//
// Differences from RocketMQ, each deliberate: the round-robin index is shared by all senders of a
// topic (RocketMQ keeps one per thread), so the spread stays within one message per queue across
// concurrent senders; retries start from a random position instead of resetting that shared
// index.
//
// # Sending
//
// Send, SendAsync and SendOneway validate the message with RocketMQ's client rules before any
// I/O, then run one retry loop: up to the policy's attempts within one budget (the earlier of the
// context's deadline and the policy's send timeout), every attempt but the last capped at the
// policy's per-attempt timeout, retrying on transport errors and on the policy's retry codes,
// with the same UNIQ_KEY on every attempt and a fault-table update after every attempt with that
// attempt's own latency and outcome (as RocketMQ 5.x's sendDefaultImpl classifies them:
// success, transport error, broker error, client error). SEND_MESSAGE_V2 is used throughout.
// Async sends use the same loop as sync ones (RocketMQ retries async sends only on transport
// errors and never on broker codes); oneway sends can only retry a failed write.
//
// A send that no attempt completed returns a *SendError whose text is RocketMQ's
// "Send [n] times, still failed, cost [x]ms, Topic: T, BrokersSent: [...]" followed by the last
// cause, which it wraps. A caller cancelling the context ends the send at once and counts as a
// client-side outcome, not as the broker's fault.
//
// # Recovery and events
//
// With probing on, a policy's probe loop sends GET_MAX_OFFSET to its isolated brokers at the
// policy's interval and feeds the outcomes back (fault.Tolerance.ProbeResult): a healed broker
// returns after a good probe, a dead one stays out. A timer asks every table to expire finished
// isolations, so "left isolation" events arrive without a send. Events delivers every change on a
// buffered channel that never blocks a sender (see Events).
package producer
