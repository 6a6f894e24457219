package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// Runtime are the runtime's and the controllers' collectors. It implements producer.Metrics, so the
// runtime's sends, attempts and isolations are counted where they happen; the controllers add
// isolated-broker gauges and status-write counts. Label values come from the runtime's own state
// (topics, brokers, policies), so series stay bounded.
type Runtime struct {
	sends          *prometheus.CounterVec
	attempts       *prometheus.CounterVec
	attemptLatency *prometheus.HistogramVec
	retries        *prometheus.CounterVec
	isolations     *prometheus.CounterVec
	isolated       *prometheus.GaugeVec
	statusWrites   *prometheus.CounterVec
	coalesced      prometheus.Counter
	refusals       *prometheus.CounterVec
	checksDropped  *prometheus.CounterVec
	hedges         *prometheus.CounterVec
	stalls         *prometheus.CounterVec
}

var (
	_ producer.Metrics                  = (*Runtime)(nil)
	_ producer.CredentialRefusalMetrics = (*Runtime)(nil)
	_ producer.TransactionCheckMetrics  = (*Runtime)(nil)
	_ producer.StallMetrics             = (*Runtime)(nil)
)

// NewRuntime creates the runtime's collectors, unregistered.
func NewRuntime() *Runtime {
	const ns = "detour"
	return &Runtime{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sends_total",
			Help: "Sends that passed validation, by topic, mode (sync, async, oneway) and result (success, failure)."},
			[]string{"topic", "mode", "result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "send_attempts_total",
			Help: "Send attempts by policy, broker and outcome (success, transport_error, broker_error, client_error, interrupted)."},
			[]string{"policy", "broker", "outcome"}),
		attemptLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "send_attempt_duration_seconds",
			Help:    "Latency of single send attempts by broker.",
			Buckets: []float64{.001, .002, .005, .01, .025, .05, .1, .25, .55, 1, 1.8, 3, 5, 10}},
			[]string{"broker"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "send_retries_total",
			Help: "Attempts that failed and were retried on another queue, by topic and the failed broker."},
			[]string{"topic", "broker"}),
		isolations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "isolations_total",
			Help: "Brokers entering isolation, by policy, broker and reason."},
			[]string{"policy", "broker", "reason"}),
		isolated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "isolated_brokers",
			Help: "Brokers a FaultPolicy isolates now, by policy (namespace/name)."},
			[]string{"policy"}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "status_writes_total",
			Help: "Status writes by kind (Topic, FaultPolicy)."},
			[]string{"kind"}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "isolation_events_coalesced_total",
			Help: "Isolation events replaced by a newer one for the same broker before the operator read them."}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "credential_refusals_total",
			Help: "Requests a broker refused for detour's credentials, by broker and reason (AuthenticationFailed, Forbidden)."},
			[]string{"broker", "reason"}),
		checksDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "transaction_checks_dropped_total",
			Help: "Brokers' transaction check-backs the runtime dropped, by reason: queue_full (too many waiting for the checkers), malformed (the check did not decode), unknown_broker (no route names its address) or not_taken (no checker took it, as when no producer of the topic is connected here). The broker checks again at its next round, up to its check limit."},
			[]string{"reason"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "hedges_total",
			Help: "Hedged sends by policy and event: sent (the message also went to another broker), won (the hedge answered the send), lost (the hedged attempt answered, or neither stored the message), copy_stored (both attempts stored it: two copies with one message id) and budget_spent (a hedge was due but the budget had none left, so the send waited on its slow broker)."},
			[]string{"policy", "event"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stalled_attempts_total",
			Help: "Send attempts cut by their attempt deadline with no answer (also counted as transport_error in detour_send_attempts_total), by policy, broker and whether the broker answered other requests meanwhile (answering=true: it holds this request; false: it answers nothing, as when paused)."},
			[]string{"policy", "broker", "answering"}),
	}
}

// collectors are every collector of m.
func (m *Runtime) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.sends, m.attempts, m.attemptLatency, m.retries, m.isolations, m.isolated,
		m.statusWrites, m.coalesced, m.refusals, m.checksDropped, m.hedges, m.stalls}
}

// SendDone implements producer.Metrics.
func (m *Runtime) SendDone(topic string, mode producer.SendMode, _ int, _ time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	m.sends.WithLabelValues(topic, mode.String(), result).Inc()
}

// AttemptDone implements producer.Metrics.
func (m *Runtime) AttemptDone(policy, broker string, latency time.Duration, outcome fault.Outcome) {
	m.attempts.WithLabelValues(policy, broker, outcomeLabel(outcome)).Inc()
	m.attemptLatency.WithLabelValues(broker).Observe(latency.Seconds())
}

// Retried implements producer.Metrics.
func (m *Runtime) Retried(topic, broker string) { m.retries.WithLabelValues(topic, broker).Inc() }

// IsolationChanged implements producer.Metrics.
func (m *Runtime) IsolationChanged(policy, broker string, isolated bool, reason fault.Reason) {
	if isolated {
		m.isolations.WithLabelValues(policy, broker, string(reason)).Inc()
	}
}

// AttemptStalled implements producer.StallMetrics.
func (m *Runtime) AttemptStalled(policy, broker string, answering bool) {
	m.stalls.WithLabelValues(policy, broker, strconv.FormatBool(answering)).Inc()
}

// TransactionCheckDropped implements producer.TransactionCheckMetrics.
func (m *Runtime) TransactionCheckDropped(reason string) {
	m.checksDropped.WithLabelValues(reason).Inc()
}

// CredentialsRefused implements producer.CredentialRefusalMetrics.
func (m *Runtime) CredentialsRefused(broker string, reason remoting.ACLRefusal) {
	m.refusals.WithLabelValues(broker, reason.String()).Inc()
}

// EventCoalesced implements producer.Metrics.
func (m *Runtime) EventCoalesced(string, string) { m.coalesced.Inc() }

// Hedged implements producer.Metrics.
func (m *Runtime) Hedged(policy string, event producer.HedgeEvent) {
	m.hedges.WithLabelValues(policy, event.String()).Inc()
}

// SetIsolated records how many brokers policy isolates now.
func (m *Runtime) SetIsolated(policy string, n int) {
	m.isolated.WithLabelValues(policy).Set(float64(n))
}

// ForgetPolicy drops the series of a policy that is gone, so they do not linger at their last
// value.
func (m *Runtime) ForgetPolicy(policy string) {
	m.isolated.DeleteLabelValues(policy)
	m.attempts.DeletePartialMatch(prometheus.Labels{"policy": policy})
	m.isolations.DeletePartialMatch(prometheus.Labels{"policy": policy})
	m.hedges.DeletePartialMatch(prometheus.Labels{"policy": policy})
}

// StatusWritten counts one status write of an object of kind.
func (m *Runtime) StatusWritten(kind string) { m.statusWrites.WithLabelValues(kind).Inc() }

// outcomeLabel is an attempt outcome's label value.
func outcomeLabel(o fault.Outcome) string {
	switch o {
	case fault.Success:
		return "success"
	case fault.TransportError:
		return "transport_error"
	case fault.BrokerError:
		return "broker_error"
	case fault.ClientError:
		return "client_error"
	case fault.Interrupted:
		return "interrupted"
	}
	return "unknown"
}
