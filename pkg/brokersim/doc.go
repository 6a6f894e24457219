// Package brokersim runs simulated Apache RocketMQ brokers and a name server in-process on
// loopback, speaking the real remoting protocol (package remoting), so tests, benchmarks and
// demos can use real clients against them.
//
// Brokers store messages in memory per topic and queue with increasing offsets, answer sends
// like a Java broker (msgId, queueId and queueOffset in the response header), and misbehave on
// demand: added latency, black hole, refused connections, connections closed mid-request, error
// codes, and flapping between up and down. Faults change while the broker runs. Counters of what
// each broker received and stored let tests prove that nothing was lost or duplicated.
//
// Where it matters to a client, brokers and name servers behave as Apache RocketMQ 5.x does,
// not as a client might wish: a send to a topic whose permission forbids writing is stored (only
// the route tells clients to stay away), refusals carry the Java response codes and remarks,
// transactional half messages and delayed messages are answered SUCCESS but kept out of the
// topic's queues, and connections idle for two minutes are closed.
package brokersim
