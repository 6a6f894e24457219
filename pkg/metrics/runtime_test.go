package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// TestOutcomeLabelsNameEveryOutcome proves every attempt outcome has its own metric label, the
// caller giving up (Interrupted) included.
func TestOutcomeLabelsNameEveryOutcome(t *testing.T) {
	seen := map[string]bool{}
	for o := fault.Success; o <= fault.Interrupted; o++ {
		l := outcomeLabel(o)
		if l == "unknown" || seen[l] {
			t.Errorf("outcome %v labelled %q", o, l)
		}
		seen[l] = true
	}
}

// TestDroppedTransactionChecksAreServedByReason proves the runtime's dropped check-backs reach
// the registry as one series per reason, each counting its own drops.
func TestDroppedTransactionChecksAreServedByReason(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	set := NewSet()
	if err := set.Register(reg); err != nil {
		t.Fatal(err)
	}
	var m producer.Metrics = set.Runtime
	counting, ok := m.(producer.TransactionCheckMetrics)
	if !ok {
		t.Fatal("the runtime's metrics do not count dropped transaction checks")
	}
	counting.TransactionCheckDropped(producer.CheckDroppedQueueFull)
	counting.TransactionCheckDropped(producer.CheckDroppedQueueFull)
	counting.TransactionCheckDropped(producer.CheckDroppedNotTaken)
	got := metricstest.Gathered(t, reg)
	for series, want := range map[string]float64{
		"detour_transaction_checks_dropped_total{reason=queue_full}": 2,
		"detour_transaction_checks_dropped_total{reason=not_taken}":  1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}
