package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/scope"
)

// Where a recovered panic in the send gateway happened, the label values of
// detour_gateway_panics_total.
const (
	// PanicInHandler is a panic while handling a request; the request's connection was closed.
	PanicInHandler = "handler"
	// PanicInReview is a panic in a token or access review; the callers waiting for it got an
	// error.
	PanicInReview = "review"
)

// Gateway are the send gateway's collectors.
type Gateway struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	panics   *prometheus.CounterVec
	// doors are shared with the other doors in a Set, which registers them.
	doors *Doors
	// byStatus caches each status's series: looking them up by label value costs a hash of the
	// label and a locked map read on every request.
	byStatus [600]atomic.Pointer[StatusSeries]
}

// StatusSeries are the request counter and duration histogram of one HTTP status.
type StatusSeries struct {
	// Requests counts answers with the status.
	Requests prometheus.Counter
	// Duration observes their time from arrival to answer, in seconds.
	Duration prometheus.Observer
}

// NewGateway creates the send gateway's collectors, unregistered.
func NewGateway() *Gateway {
	const ns, sub = "detour", "gateway"
	return &Gateway{
		doors: NewDoors(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Send gateway requests answered, by HTTP status code."}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "request_duration_seconds",
			Help:    "Time from a send gateway request's arrival to its answer, by HTTP status code.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}, []string{"code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "requests_in_flight",
			Help: "Send gateway requests being handled now."}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "panics_total",
			Help: "Panics recovered in the send gateway, by where: handler (the request's connection was closed) or review (the callers waiting for a token or access review got an error)."},
			[]string{"where"}),
	}
}

// collectors are every collector of m.
func (m *Gateway) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.duration, m.inFlight, m.panics}
}

// InFlight is the gauge of requests being handled.
func (m *Gateway) InFlight() prometheus.Gauge { return m.inFlight }

// Door returns the series of the gateway's sends to the brokers of where.
func (m *Gateway) Door(where scope.Scope) *DoorSeries { return m.doors.To(DoorGateway, where) }

// Panicked counts a recovered panic at where (PanicInHandler, PanicInReview).
func (m *Gateway) Panicked(where string) { m.panics.WithLabelValues(where).Inc() }

// Series returns the series of an HTTP status, looked up once per status.
func (m *Gateway) Series(status int) *StatusSeries {
	if status < 0 || status >= len(m.byStatus) {
		return m.newSeries(status)
	}
	if s := m.byStatus[status].Load(); s != nil {
		return s
	}
	s := m.newSeries(status)
	m.byStatus[status].Store(s)
	return s
}

func (m *Gateway) newSeries(status int) *StatusSeries {
	code := strconv.Itoa(status)
	return &StatusSeries{Requests: m.requests.WithLabelValues(code), Duration: m.duration.WithLabelValues(code)}
}
