package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GRPC are the RocketMQ gRPC endpoint's collectors. Labels are bounded: methods are those the
// endpoint serves (gRPC answers unknown ones before any handler runs), codes are the names of
// RocketMQ 5's status codes and of gRPC's.
type GRPC struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	messages *prometheus.CounterVec
	panics   prometheus.Counter
}

// NewGRPC creates the gRPC endpoint's collectors, unregistered.
func NewGRPC() *GRPC {
	const ns, sub = "detour", "grpc"
	return &GRPC{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "Calls the RocketMQ gRPC endpoint answered, by method and code: the RocketMQ status code of the answer, or the gRPC status code of a call that failed as a whole or of a stream that ended."},
			[]string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "call_duration_seconds",
			Help:    "Time from a unary call's arrival at the RocketMQ gRPC endpoint to its answer, by method.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}}, []string{"method"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "messages_total",
			Help: "Messages of SendMessage calls answered, by the RocketMQ status code of each message's entry (OK only when stored)."},
			[]string{"code"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "panics_total",
			Help: "Panics recovered in the RocketMQ gRPC endpoint's handlers; each failed its call with INTERNAL."}),
	}
}

// collectors are every collector of m.
func (m *GRPC) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.duration, m.messages, m.panics}
}

// CallDone counts one answered unary call, or one ended stream (took is then 0 and not
// observed: a stream lasts as long as its client).
func (m *GRPC) CallDone(method, code string, took time.Duration) {
	m.calls.WithLabelValues(method, code).Inc()
	if took > 0 {
		m.duration.WithLabelValues(method).Observe(took.Seconds())
	}
}

// MessageAnswered counts one message of a SendMessage answer with its entry's status code.
func (m *GRPC) MessageAnswered(code string) { m.messages.WithLabelValues(code).Inc() }

// Panicked counts a recovered panic.
func (m *GRPC) Panicked() { m.panics.Inc() }
