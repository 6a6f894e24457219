package gateway

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/producer"
)

// interleavedSlice is how many messages each shape sends in its turn of a round.
const interleavedSlice = 64 * benchBatchSize * 2

// BenchmarkGatewayShapesInterleaved measures BenchmarkGatewayAgainstRuntime's three lean shapes
// (the runtime directly, the gateway with one message and with 32 per request from the lean
// client) in turns: each round gives every shape a slice of 4,096 messages, in an order that
// rotates, so load from other processes on a shared machine falls on every shape alike, and
// reports each shape's msgs/s over all its turns and the ratios the gateway's targets are judged on.
// (Consecutive sub-benchmarks see whatever the machine did in their seconds.)
func BenchmarkGatewayShapesInterleaved(b *testing.B) {
	benchShapesInterleaved(b, benchRuntime)
}

// benchShapesInterleaved runs the lean shapes in turns, each with a runtime of its own from
// newRuntime.
func benchShapesInterleaved(b *testing.B, newRuntime func(*testing.B) *producer.Runtime) {
	body := bytes.Repeat([]byte("x"), 1024)
	direct := directSend(newRuntime(b), body)
	shapes := []struct {
		name    string
		perCall int
		senders []func() error
		took    time.Duration
	}{
		{name: "runtime", perCall: 1, senders: makeSenders(func() func() error { return direct })},
		{name: "gateway", perCall: 1, senders: makeSenders(leanSenders(b, expand(startBenchGateway(b, newRuntime(b))+MessagesPath),
			"application/octet-stream", body, map[string]string{HeaderTags: "tag"}))},
		{name: "batch32", perCall: benchBatchSize, senders: makeSenders(leanSenders(b, expand(startBenchGateway(b, newRuntime(b))+BatchPath),
			"application/json", benchBatch(b, body), nil))},
	}
	b.ResetTimer()
	for round := range b.N {
		for i := range shapes {
			sh := &shapes[(round+i)%len(shapes)]
			sh.took += sendAll(b, sh.senders, interleavedSlice/sh.perCall)
		}
	}
	b.StopTimer()
	rate := func(i int) float64 { return float64(b.N*interleavedSlice) / shapes[i].took.Seconds() }
	for i, sh := range shapes {
		b.ReportMetric(rate(i), sh.name+"-msgs/s")
	}
	b.ReportMetric(rate(1)/rate(0), "gateway/runtime")
	b.ReportMetric(rate(2)/rate(1), "batch32/gateway")
}

// directSend sends body by calling rt directly.
func directSend(rt *producer.Runtime, body []byte) func() error {
	return func() error {
		_, err := rt.Send(context.Background(), &producer.Message{Topic: "BenchTopic", Tags: "tag", Body: body})
		return err
	}
}
