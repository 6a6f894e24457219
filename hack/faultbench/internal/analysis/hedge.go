package analysis

import "github.com/detourmq/detour/hack/faultbench/internal/strategy"

// Targets of hedged sends, judged on medians: the fault's cost with hedging (p99 and slow share
// against the matching oracle with the same hedging), hedging's worth (p99 below detour's without
// it) and the budget (extra sends).
const (
	TargetHedgeP99Factor   = 1.15
	TargetHedgeSlowSharePP = 0.1
	TargetExtraSendsPct    = 2
)

// epsilon keeps a value exactly at its limit from failing on floating-point rounding.
const epsilon = 1e-9

// The targets a HedgeCheck judges.
const (
	// CheckP99VsOracle: p99 at most TargetHedgeP99Factor × the matching oracle's (Value and Limit
	// are the ratio and the factor).
	CheckP99VsOracle = "p99 × oracle"
	// CheckSlowShare: slow share at most the matching oracle's plus TargetHedgeSlowSharePP.
	CheckSlowShare = "slow share"
	// CheckP99VsDetour: p99 below detour's without hedging (Value is the ratio, Limit 1).
	CheckP99VsDetour = "p99 × detour"
	// CheckExtraSends: hedges sent at most TargetExtraSendsPct of sends.
	CheckExtraSends = "extra sends"
	// CheckSuccess: every send succeeded.
	CheckSuccess = "success"
)

// HedgeCheck is one hedging target judged on one scenario's medians.
type HedgeCheck struct {
	Mode     string  `json:"mode"`
	Scenario string  `json:"scenario"`
	Strategy string  `json:"strategy"`
	Target   string  `json:"target"`
	Against  string  `json:"against,omitempty"`
	Value    float64 `json:"value"`
	Limit    float64 `json:"limit"`
	Pass     bool    `json:"pass"`
}

// hedgeOracles are the hedging rows judged against an oracle with the same hedging.
var hedgeOracles = map[string]string{strategy.DetourHedge: strategy.OracleHedge, strategy.GRPCDetourHedge: strategy.GRPCOracleHedge}

// HedgeVerdicts judges the hedging rows' medians: against their oracle and detour in every
// scenario with a bad broker where those ran, and the budget and success in every scenario.
func HedgeVerdicts(ms []Median) []HedgeCheck {
	find := func(m *Median, st string) *Median { return FindMedian(ms, m.Mode, m.Scenario, st) }
	var out []HedgeCheck
	for i := range ms {
		m := &ms[i]
		if !strategy.Hedges(m.Strategy) {
			continue
		}
		check := func(target, against string, value, limit float64, pass bool) {
			out = append(out, HedgeCheck{Mode: m.Mode, Scenario: m.Scenario, Strategy: m.Strategy, Target: target,
				Against: against, Value: value, Limit: limit, Pass: pass})
		}
		if o := find(m, hedgeOracles[m.Strategy]); o != nil && !m.NoBadBroker {
			r := ratio(m.P99Ms.Median, o.P99Ms.Median)
			check(CheckP99VsOracle, o.Strategy, r, TargetHedgeP99Factor, o.P99Ms.Median > 0 && m.P99Ms.Median <= TargetHedgeP99Factor*o.P99Ms.Median+epsilon)
			if mine, theirs := m.SlowSharePct.Median, o.SlowSharePct.Median; mine != unknownShare && theirs != unknownShare {
				limit := theirs + TargetHedgeSlowSharePP
				check(CheckSlowShare, o.Strategy, mine, limit, mine <= limit+epsilon)
			}
		}
		if d := find(m, "detour"); d != nil && m.Strategy == strategy.DetourHedge && !m.NoBadBroker {
			check(CheckP99VsDetour, d.Strategy, ratio(m.P99Ms.Median, d.P99Ms.Median), 1, m.P99Ms.Median < d.P99Ms.Median)
		}
		check(CheckExtraSends, "", m.ExtraSendsPct.Median, TargetExtraSendsPct, m.ExtraSendsPct.Median <= TargetExtraSendsPct)
		check(CheckSuccess, "", m.SuccessPct.Median, 100, m.SuccessPct.Median >= 100)
	}
	return out
}
