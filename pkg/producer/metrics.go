package producer

import (
	"time"

	"github.com/detourmq/detour/pkg/fault"
)

// Metrics receives the runtime's measurements. The manager implements it with Prometheus
// collectors; the runtime calls it on the send path, so implementations must be cheap, safe for
// concurrent use and must not block. All string arguments come from the runtime's own state, so
// label values stay bounded by the number of topics, brokers and policies.
type Metrics interface {
	// SendDone is called once per Send, SendAsync or SendOneway that passed validation, with the
	// attempts made and the time from start to outcome; err is nil on success.
	SendDone(topic string, mode SendMode, attempts int, elapsed time.Duration, err error)
	// AttemptDone is called after every attempt with the broker it went to, that attempt's own
	// latency and how the fault table classified its outcome.
	AttemptDone(policy, broker string, latency time.Duration, outcome fault.Outcome)
	// Retried is called when an attempt on broker failed and another attempt follows.
	Retried(topic, broker string)
	// IsolationChanged is called when a broker enters (isolated=true) or leaves isolation in a
	// policy's fault table.
	IsolationChanged(policy, broker string, isolated bool, reason fault.Reason)
	// EventCoalesced is called when an isolation event replaced an undelivered one because the
	// Events reader fell behind.
	EventCoalesced(policy, broker string)
	// Hedged is called when a send under policy hedged an attempt (HedgeSent), when the race
	// ended (HedgeWon or HedgeLost), and when both attempts stored the message (HedgeCopyStored).
	Hedged(policy string, event HedgeEvent)
}

// StallMetrics is implemented by Metrics that count stalled attempts apart from the transport
// failures AttemptDone counts them among: a stall is the one failure that costs a send its wait,
// and the one hedging and the stall rules are for. The runtime calls AttemptStalled once per
// attempt cut by its attempt deadline when Options.Metrics implements it; answering says the
// broker answered other requests meanwhile (it holds this one, rather than being paused).
type StallMetrics interface {
	AttemptStalled(policy, broker string, answering bool)
}

// NopMetrics discards everything; it is the default when Options.Metrics is nil.
type NopMetrics struct{}

// SendDone implements Metrics.
func (NopMetrics) SendDone(string, SendMode, int, time.Duration, error) {}

// AttemptDone implements Metrics.
func (NopMetrics) AttemptDone(string, string, time.Duration, fault.Outcome) {}

// Retried implements Metrics.
func (NopMetrics) Retried(string, string) {}

// IsolationChanged implements Metrics.
func (NopMetrics) IsolationChanged(string, string, bool, fault.Reason) {}

// EventCoalesced implements Metrics.
func (NopMetrics) EventCoalesced(string, string) {}

// Hedged implements Metrics.
func (NopMetrics) Hedged(string, HedgeEvent) {}
