package producer

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSendBatch sends batches of 1 KiB messages to a loopback brokersim broker from 64
// goroutines: msgs/s, and allocs/op per batch, which stay flat as the batch grows (the messages
// are built outside the timed loop; what is left is the batch's own cost).
func BenchmarkSendBatch(b *testing.B) {
	env := startSendBenchEnv(b)
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for _, n := range []int{1, 32, 256} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			r := env.runtime(b)
			msgs := make([]*Message, n)
			for i := range msgs {
				msgs[i] = &Message{Topic: benchTopic, Tags: "tag", Body: body}
			}
			ctx := context.Background()
			b.ReportAllocs()
			runConcurrently(b, 64, func() error {
				_, err := r.SendBatch(ctx, msgs)
				return err
			})
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkEncodeBatch is the batch's encoding alone (sizes, body, ids and the batch's own
// properties) for batches of 1 KiB messages with tags and a user property: the CPU and the
// allocations a batch send spends before any I/O.
func BenchmarkEncodeBatch(b *testing.B) {
	body := make([]byte, 1024)
	for _, n := range []int{1, 32, 256} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			msgs := make([]*Message, n)
			for i := range msgs {
				msgs[i] = &Message{Topic: benchTopic, Tags: "tag", Body: body, Properties: map[string]string{"order": "42"}}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeBatch(msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
