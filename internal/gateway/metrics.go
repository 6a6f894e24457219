package gateway

import (
	"strconv"
	"sync"
	"sync/atomic"

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
		reg.MustRegister(MetricCollectors()...)
	})
}

// MetricCollectors returns the gateway's collectors (the process-wide ones RegisterMetrics
// registers), for describing them in the metrics reference.
func MetricCollectors() []prometheus.Collector {
	return []prometheus.Collector{gatewayMetrics.requests, gatewayMetrics.duration, gatewayMetrics.inFlight, gatewayMetrics.panics}
}

// statusSeries are the request counter and duration histogram of one HTTP status.
type statusSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// byStatus caches each status's series: looking them up by label value costs a hash of the
// label and a locked map read on every request.
var byStatus [600]atomic.Pointer[statusSeries]

// seriesOf returns the series of status, looked up once per status.
func seriesOf(status int) *statusSeries {
	if status < 0 || status >= len(byStatus) {
		code := strconv.Itoa(status)
		return &statusSeries{gatewayMetrics.requests.WithLabelValues(code), gatewayMetrics.duration.WithLabelValues(code)}
	}
	if s := byStatus[status].Load(); s != nil {
		return s
	}
	code := strconv.Itoa(status)
	s := &statusSeries{gatewayMetrics.requests.WithLabelValues(code), gatewayMetrics.duration.WithLabelValues(code)}
	byStatus[status].Store(s)
	return s
}
