package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/scope"
)

// GRPC are the RocketMQ gRPC endpoint's collectors. Labels are bounded: methods are those the
// endpoint serves (gRPC answers unknown ones before any handler runs), codes are the names of
// RocketMQ 5's status codes and of gRPC's.
type GRPC struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	messages *prometheus.CounterVec
	panics   prometheus.Counter
	checks   *prometheus.CounterVec
	// doors are shared with the other doors in a Set, which registers them.
	doors *Doors

	// bySeries and byMessageCode cache each series once looked up: label values are a small
	// fixed set, and a lookup by label values hashes them under a lock on every call, which the
	// send path would otherwise pay twice per message.
	bySeries      sync.Map // callKey → *callSeries
	byMessageCode sync.Map // code → prometheus.Counter
}

// callKey names the series of one method answered with one code.
type callKey struct{ method, code string }

// callSeries are the series a call of one method and code counts into.
type callSeries struct {
	calls    prometheus.Counter
	duration prometheus.Observer
}

// NewGRPC creates the gRPC endpoint's collectors, unregistered.
func NewGRPC() *GRPC {
	const ns, sub = "detour", "grpc"
	return &GRPC{
		doors: NewDoors(),
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
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "transaction_checks_total",
			Help: "Brokers' transaction check-backs the RocketMQ gRPC endpoint was offered, by outcome: asked (handed to a producer of the topic), no_producer (no producer stream here publishes the topic) or queue_full (the producer's stream had too many commands waiting). Only asked reaches a producer; the broker checks the others again at its next round."},
			[]string{"outcome"}),
	}
}

// Outcomes of a transaction check-back offered to the endpoint.
const (
	CheckAsked      = "asked"
	CheckNoProducer = "no_producer"
	CheckQueueFull  = "queue_full"
)

// Door returns the series of the endpoint's sends to the brokers of where.
func (m *GRPC) Door(where scope.Scope) *DoorSeries { return m.doors.To(DoorGRPC, where) }

// TransactionCheck counts one check-back offered to the endpoint, by its outcome.
func (m *GRPC) TransactionCheck(outcome string) { m.checks.WithLabelValues(outcome).Inc() }

// collectors are every collector of m.
func (m *GRPC) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.duration, m.messages, m.panics, m.checks}
}

// CallDone counts one answered unary call, or one ended stream (took is then 0 and not
// observed: a stream lasts as long as its client).
func (m *GRPC) CallDone(method, code string, took time.Duration) {
	s := m.series(method, code)
	s.calls.Inc()
	if took > 0 {
		s.duration.Observe(took.Seconds())
	}
}

// series returns the series of a method and code, looked up once.
func (m *GRPC) series(method, code string) *callSeries {
	key := callKey{method, code}
	if s, ok := m.bySeries.Load(key); ok {
		return s.(*callSeries)
	}
	s, _ := m.bySeries.LoadOrStore(key, &callSeries{
		calls: m.calls.WithLabelValues(method, code), duration: m.duration.WithLabelValues(method)})
	return s.(*callSeries)
}

// MessageAnswered counts one message of a SendMessage answer with its entry's status code.
func (m *GRPC) MessageAnswered(code string) {
	c, ok := m.byMessageCode.Load(code)
	if !ok {
		c, _ = m.byMessageCode.LoadOrStore(code, m.messages.WithLabelValues(code))
	}
	c.(prometheus.Counter).Inc()
}

// Panicked counts a recovered panic.
func (m *GRPC) Panicked() { m.panics.Inc() }
