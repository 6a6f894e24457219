package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/facade"
)

// Facade are the name-server facade's collectors.
type Facade struct {
	routes    *prometheus.CounterVec
	hidden    *prometheus.GaugeVec
	refused   *prometheus.CounterVec
	coalesced *prometheus.CounterVec
	panics    prometheus.Counter
	conns     *prometheus.CounterVec
	answers   *prometheus.HistogramVec
}

var _ facade.Metrics = (*Facade)(nil)

// NewFacade creates the facade's collectors, unregistered. The refused connections start at
// zero for both reasons, so a rate over them reads 0 until the first, not "no data".
func NewFacade() *Facade {
	const ns = "detour"
	m := &Facade{
		routes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "routes_total",
			Help: "Topic routes served by the name-server facade, by topic (empty for topics detour does not govern) and whether brokers were hidden."},
			[]string{"topic", "rewritten"}),
		hidden: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "brokers_hidden",
			Help: "Brokers the last route answer for a topic published read-only."}, []string{"topic"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "refused_total",
			Help: "Requests the facade refused to forward (anything but the reads clients send a name server, and oneway requests), by request code; codes no name server serves are \"other\"."},
			[]string{"code"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "coalesced_total",
			Help: "Requests answered by an identical request's upstream request instead of their own, by request code."}, []string{"code"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "panics_total",
			Help: "Panics recovered while serving a client connection; each closed that connection."}),
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "connections_refused_total",
			Help: "Client connections the facade closed at once, by reason: full (it held its maximum) or source (the client's address held its share)."},
			[]string{"reason"}),
		answers: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "request_duration_seconds",
			Help:    "Time from a client request's arrival at the name-server facade to its answer's write, by request code (\"other\" for codes no name server serves).",
			Buckets: facadeBuckets}, []string{"code"}),
	}
	for _, reason := range []string{"full", "source"} {
		m.conns.WithLabelValues(reason)
	}
	return m
}

// collectors are every collector of m.
func (m *Facade) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.routes, m.hidden, m.refused, m.coalesced, m.panics, m.conns, m.answers}
}

// RouteServed implements facade.Metrics.
func (m *Facade) RouteServed(topic string, rewritten bool) {
	m.routes.WithLabelValues(topic, strconv.FormatBool(rewritten)).Inc()
}

// BrokersHidden implements facade.Metrics.
func (m *Facade) BrokersHidden(topic string, n int) {
	m.hidden.WithLabelValues(topic).Set(float64(n))
}

// Refused implements facade.Metrics.
func (m *Facade) Refused(code int16) { m.refused.WithLabelValues(codeLabel(code)).Inc() }

// Coalesced implements facade.Metrics.
func (m *Facade) Coalesced(code int16) { m.coalesced.WithLabelValues(codeLabel(code)).Inc() }

// ConnectionRefused implements facade.Metrics.
func (m *Facade) ConnectionRefused(perSource bool) {
	reason := "full"
	if perSource {
		reason = "source"
	}
	m.conns.WithLabelValues(reason).Inc()
}

// facadeBuckets span a route answered from the coalesced upstream request in well under a
// millisecond to a name server that takes seconds.
var facadeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Answered implements facade.Metrics.
func (m *Facade) Answered(code int16, took time.Duration) {
	m.answers.WithLabelValues(codeLabel(code)).Observe(took.Seconds())
}

// Panicked implements facade.Metrics.
func (m *Facade) Panicked() { m.panics.Inc() }

// codeLabel is a request code's label value: its number when a name server serves it, else
// "other", because any peer may send any of 65,536 codes and each would be a series of its own.
func codeLabel(code int16) string {
	if _, ok := facade.CodeName(code); ok {
		return strconv.Itoa(int(code))
	}
	return "other"
}
