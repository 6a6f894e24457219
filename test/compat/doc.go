// Package compat holds the suites that prove detour against real Apache RocketMQ: name servers,
// brokers and Java clients of the 5.x and 4.9.x lines, started by internal/testsupport/rmqtest. What they
// prove:
//
//   - messages sent through the producer runtime, detourctl and the send gateway are stored as
//     sent: RocketMQ's own consumer reads back every body, tag, key and property, exactly once,
//     under the message id detour reported;
//   - brokers' refusals (unknown topic, message too large, queue id out of range) end as RocketMQ's
//     rules say, in a clear error or a retry on another broker, and nothing is stored twice;
//   - faults on real processes (paused, killed, stopped, resumed brokers) are survived with the
//     Detour policy;
//   - brokersim answers a table of requests exactly as the real 5.x broker does;
//   - RocketMQ 5's gRPC SDKs (Java, and Python from hack/setup-python-client.sh in
//     DETOUR_PYTHON_CLIENT) send through detour's gRPC endpoint.
//
// Run one suite alone with, for example:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go test -run TestStoredAsSent -v ./test/compat/
package compat
