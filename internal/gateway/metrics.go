package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// gatewayMetrics are process-wide: every Server in the process adds to the same series.
var gatewayMetrics = struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	panics   *prometheus.CounterVec
}{
	requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "detour", Subsystem: "gateway", Name: "requests_total",
		Help: "Send gateway requests answered, by HTTP status code.",
	}, []string{"code"}),
	duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "detour", Subsystem: "gateway", Name: "request_duration_seconds",
		Help:    "Time from a send gateway request's arrival to its answer, by HTTP status code.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"code"}),
	inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "detour", Subsystem: "gateway", Name: "requests_in_flight",
		Help: "Send gateway requests being handled now.",
	}),
	panics: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "detour", Subsystem: "gateway", Name: "panics_total",
		Help: "Panics recovered in the send gateway, by where: handler (the request's connection was closed) or review (the callers waiting for a token or access review got an error).",
	}, []string{"where"}),
}

// Where a recovered panic happened, the label values of detour_gateway_panics_total.
const (
	panicInHandler = "handler"
	panicInReview  = "review"
)

var registerOnce sync.Once

// RegisterMetrics registers the gateway's collectors with reg; calls after the first do
// nothing, so every manager in a process may call it.
func RegisterMetrics(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		reg.MustRegister(gatewayMetrics.requests, gatewayMetrics.duration, gatewayMetrics.inFlight, gatewayMetrics.panics)
	})
}
