// Package brokersim runs simulated Apache RocketMQ brokers and a name server in-process on
// loopback, speaking the real remoting protocol (package remoting), so tests, benchmarks and
// demos can use real clients against them.
//
// Brokers store messages in memory per topic and queue with increasing offsets, answer sends
// like a Java broker (msgId, queueId and queueOffset in the response header), and misbehave on
// demand: added latency, black hole, refused connections, connections closed mid-request, error
// codes, and flapping between up and down. Faults change while the broker runs. Counters of what
// each broker received and stored let tests prove that nothing was lost or duplicated.
package brokersim
