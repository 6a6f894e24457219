package metrics

import (
	"testing"
	"time"
)

// BenchmarkGRPCCallDone is what the endpoint pays per answered SendMessage call of one message
// (the call's counter and duration, the message's counter): "cached" through GRPC's methods,
// "byLabels" looking every series up by its label values, as the endpoint did before. Run both
// in one run (-count) and compare their ratio, as the machine's load shifts both alike.
func BenchmarkGRPCCallDone(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		m := NewGRPC()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.CallDone("SendMessage", "OK", time.Millisecond)
				m.MessageAnswered("OK")
			}
		})
	})
	b.Run("byLabels", func(b *testing.B) {
		m := NewGRPC()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.calls.WithLabelValues("SendMessage", "OK").Inc()
				m.duration.WithLabelValues("SendMessage").Observe(time.Millisecond.Seconds())
				m.messages.WithLabelValues("OK").Inc()
			}
		})
	})
}
