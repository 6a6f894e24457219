package drivers

import (
	"reflect"
	"testing"

	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
	"github.com/detourmq/detour/pkg/producer"
)

// TestHedgingStrategiesDifferFromTheirBaseOnlyInHedging proves detour+hedge and oracle+hedge run
// the detour strategy's policy with hedging on at the default budget, and detour and oracle
// without it.
func TestHedgingStrategiesDifferFromTheirBaseOnlyInHedging(t *testing.T) {
	base, err := policyFor("detour")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		strategy string
		hedges   bool
	}{
		{"detour", false},
		{"oracle", false},
		{strategy.DetourHedge, true},
		{strategy.OracleHedge, true},
	}
	for _, tc := range tests {
		t.Run(tc.strategy, func(t *testing.T) {
			p, err := policyFor(tc.strategy)
			if err != nil {
				t.Fatal(err)
			}
			if p.Hedge.Enabled != tc.hedges || p.Hedge.BudgetPercent != producer.DefaultHedgeBudgetPercent {
				t.Errorf("hedge %+v, want enabled %v at %d %%", p.Hedge, tc.hedges, producer.DefaultHedgeBudgetPercent)
			}
			p.Hedge, p.Name = base.Hedge, base.Name
			if !reflect.DeepEqual(p, base) {
				t.Errorf("%s's policy differs from detour's beyond hedging: %+v", tc.strategy, p)
			}
		})
	}
}
