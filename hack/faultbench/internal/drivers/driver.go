package drivers

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// Recorder collects attempts and isolation changes during the measured part of a run. Before
// Begin is called (warm-up) it records nothing.
type Recorder struct {
	t0 atomic.Pointer[time.Time]

	mu       sync.Mutex
	attempts []scenario.AttemptRec
	isos     []scenario.IsoRec
	hedges   scenario.HedgeCounts
}

// Hedges is what the runtime's hedges did in the measured part of the run so far.
func (r *Recorder) Hedges() scenario.HedgeCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hedges
}

// Begin starts the measured part of the run at t0: from now on attempts and isolation changes are
// recorded, at times relative to t0.
func (r *Recorder) Begin(t0 time.Time) { r.t0.Store(&t0) }

// Attempts is a copy of the attempts recorded so far.
func (r *Recorder) Attempts() []scenario.AttemptRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts)
}

// Isolations is a copy of the isolation changes recorded so far.
func (r *Recorder) Isolations() []scenario.IsoRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.isos)
}

func (r *Recorder) since(now time.Time) (time.Duration, bool) {
	t0 := r.t0.Load()
	if t0 == nil {
		return 0, false
	}
	return now.Sub(*t0), true
}

func (r *Recorder) attempt(a scenario.AttemptRec) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

// runtimeMetrics feeds the runtime's per-attempt measurements into a recorder. The runtime calls
// AttemptDone right after each attempt with that attempt's own latency, so the attempt started
// latency before the call.
type runtimeMetrics struct {
	producer.NopMetrics
	rec    *Recorder
	policy string
}

// AttemptDone records one attempt of the measured part of the run.
func (m runtimeMetrics) AttemptDone(_, broker string, latency time.Duration, outcome fault.Outcome) {
	end, ok := m.rec.since(time.Now())
	if !ok {
		return
	}
	m.rec.attempt(scenario.AttemptRec{Broker: broker, Start: end - latency, End: end, OK: outcome == fault.Success})
}

// IsolationChanged records a change of the bad broker's isolation in the measured part of the run.
func (m runtimeMetrics) IsolationChanged(policy, broker string, isolated bool, reason fault.Reason) {
	at, ok := m.rec.since(time.Now())
	// The runtime's default policy ("") keeps a table of its own that pod marks reach too; only
	// the strategy's policy governs the sends measured here.
	if !ok || broker != scenario.BadBroker || policy != m.policy {
		return
	}
	m.rec.mu.Lock()
	m.rec.isos = append(m.rec.isos, scenario.IsoRec{At: at, Isolated: isolated, Reason: string(reason)})
	m.rec.mu.Unlock()
}

// Hedged counts one hedge event of the strategy's policy in the measured part of the run. A copy
// stored late (after its send was answered, even after the run) still counts: the copy exists.
func (m runtimeMetrics) Hedged(policy string, event producer.HedgeEvent) {
	if _, ok := m.rec.since(time.Now()); !ok || policy != m.policy {
		return
	}
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	h := &m.rec.hedges
	switch event {
	case producer.HedgeSent:
		h.Sent++
	case producer.HedgeWon:
		h.Won++
	case producer.HedgeLost:
		h.Lost++
	case producer.HedgeCopyStored:
		h.CopyStored++
	case producer.HedgeBudgetSpent:
		h.BudgetSpent++
	}
}

// Driver sends the workload for one strategy.
type Driver interface {
	// send sends one message and fills in the outcome fields of rec (times relative to t0).
	Send(ctx context.Context, rec *scenario.SendRec, body []byte, t0 time.Time)
	// PodTerminating tells the strategy that the bad broker's pod is terminating.
	PodTerminating()
	// PodReady tells it that the bad broker's (new) pod is ready again, at addr.
	PodReady(addr string)
	Close()
}
