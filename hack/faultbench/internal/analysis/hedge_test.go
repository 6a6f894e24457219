package analysis

import (
	"testing"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// runWith is a run of strategy st in repetition rep with one send per latency, all successful.
func runWith(sc scenario.Scenario, st string, rep int, lat ...time.Duration) *scenario.RunData {
	d := &scenario.RunData{Scenario: sc, Strategy: st, Rep: rep, Params: scenario.Params{Duration: 10 * time.Second, Rate: 100, Senders: 4}}
	for i, l := range lat {
		d.Sends = append(d.Sends, scenario.SendRec{Seq: i, Start: time.Duration(i) * 10 * time.Millisecond, Latency: l, OK: true,
			Tried: []string{scenario.BrokerA}})
	}
	return d
}

// latencies is n sends of fast each, with the last k of them taking slow.
func latencies(n, k int, fast, slow time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = fast
		if i >= n-k {
			out[i] = slow
		}
	}
	return out
}

// TestSlowShareCountsSendsPastTwiceTheMatchedOraclesP99 proves each row is measured against its
// own oracle's run of the same repetition (oracle+hedge for detour+hedge, grpc+oracle+hedge for
// the grpc rows, oracle for the rest), and is n/a without one or without a bad broker.
func TestSlowShareCountsSendsPastTwiceTheMatchedOraclesP99(t *testing.T) {
	const ms = time.Millisecond
	bad := scenario.Scenario{Name: "slow"}
	allSlow := scenario.Scenario{Name: "all-slow", NoBadBroker: true}
	// Oracles of repetition 1 with p99s (nearest rank: the 99th of 100) of 2, 4 and 8 ms:
	// thresholds 4, 8 and 16 ms.
	oracles := []*scenario.RunData{
		runWith(bad, "oracle", 1, latencies(100, 2, ms, 2*ms)...),
		runWith(bad, strategy.OracleHedge, 1, latencies(100, 2, ms, 4*ms)...),
		runWith(bad, strategy.GRPCOracleHedge, 1, latencies(100, 2, 2*ms, 8*ms)...),
	}
	// A row whose 200 sends take 1 ms, except 10 at 6 ms and 10 at 12 ms.
	row := func(sc scenario.Scenario, st string, rep int) *scenario.RunData {
		lat := latencies(200, 20, ms, 6*ms)
		for i := 190; i < 200; i++ {
			lat[i] = 12 * ms
		}
		return runWith(sc, st, rep, lat...)
	}
	tests := []struct {
		name        string
		run         *scenario.RunData
		wantAgainst string
		want        float64
	}{
		{"a runtime row without hedging against the oracle", row(bad, "detour", 1), "oracle", 10},
		{"a Java row against the oracle", row(bad, "java-5", 1), "oracle", 10},
		{"detour+hedge against oracle+hedge", row(bad, strategy.DetourHedge, 1), strategy.OracleHedge, 5},
		{"a grpc row against the grpc oracle", row(bad, strategy.GRPCDetourHedge, 1), strategy.GRPCOracleHedge, 0},
		{"grpc+detour without hedging also against the grpc oracle", row(bad, strategy.GRPCDetour, 1), strategy.GRPCOracleHedge, 0},
		{"no oracle in that repetition", row(bad, "detour", 2), "oracle", unknownShare},
		{"no bad broker, no slow share", row(allSlow, strategy.DetourHedge, 1), strategy.OracleHedge, unknownShare},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := append([]*scenario.RunData{tc.run}, oracles...)
			var rs []Result
			for _, d := range runs {
				r := Analyze(d)
				r.Rep = d.Rep
				rs = append(rs, r)
			}
			ApplySlowShares(rs, runs)
			if rs[0].SlowAgainst != tc.wantAgainst || rs[0].SlowSharePct != tc.want {
				t.Errorf("slow share %.2f %% against %s, want %.2f %% against %s", rs[0].SlowSharePct, rs[0].SlowAgainst, tc.want, tc.wantAgainst)
			}
		})
	}
	// The oracle with hedging is matched with itself: its 2 % at 4 ms are not above twice 4 ms.
	rs := []Result{Analyze(oracles[1])}
	rs[0].Rep = 1
	ApplySlowShares(rs, oracles)
	if rs[0].SlowAgainst != strategy.OracleHedge || rs[0].SlowSharePct != 0 || rs[0].SlowThresholdMs != 8 {
		t.Errorf("oracle+hedge against itself: %.2f %% over %.2f ms against %s", rs[0].SlowSharePct, rs[0].SlowThresholdMs, rs[0].SlowAgainst)
	}
}

// TestExtraSendsAndCopiesAreHedgesOverIssuedSends proves the budget's measures: hedges sent and
// copies stored over the sends issued, and their medians over the repetitions.
func TestExtraSendsAndCopiesAreHedgesOverIssuedSends(t *testing.T) {
	sc := scenario.Scenario{Name: "hang-100"}
	tests := []struct {
		name                 string
		sends, hedged, twice int
		wantExtra, wantCopy  float64
	}{
		{"no hedges", 400, 0, 0, 0, 0},
		{"hedges within the budget", 400, 8, 1, 2, 0.25},
		{"hedges over the budget", 400, 9, 9, 2.25, 2.25},
		{"no sends at all", 0, 0, 0, 0, 0},
	}
	var rs []Result
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := runWith(sc, strategy.DetourHedge, i+1, latencies(tc.sends, 0, time.Millisecond, 0)...)
			d.Hedges = scenario.HedgeCounts{Sent: tc.hedged, CopyStored: tc.twice, Won: tc.hedged - tc.twice}
			r := Analyze(d)
			if r.ExtraSendsPct != tc.wantExtra || r.CopiesStoredPct != tc.wantCopy || r.Hedges.CopyStored != tc.twice {
				t.Errorf("extra %.2f %%, copies %d (%.2f %%), want %.2f %% and %d (%.2f %%)", r.ExtraSendsPct, r.Hedges.CopyStored,
					r.CopiesStoredPct, tc.wantExtra, tc.twice, tc.wantCopy)
			}
			rs = append(rs, r)
		})
	}
	m := Medians(rs)
	if len(m) != 1 || m[0].ExtraSendsPct.Median != 1 || m[0].CopiesStored.Median != 0.5 || m[0].ExtraSendsPct.Max != 2.25 {
		t.Errorf("medians %+v", m)
	}
}

// TestHedgeVerdictsJudgeTheTargetsWhereTheirRowsRan proves each hedging target passes and fails at
// its limit, is judged only where the rows it involves ran, and that a scenario without a bad broker
// judges only extra sends and success.
func TestHedgeVerdictsJudgeTheTargetsWhereTheirRowsRan(t *testing.T) {
	med := func(sc, st string, p99, slow, extra, success float64) Median {
		return Median{Mode: "real", Scenario: sc, Strategy: st, P99Ms: Stat{Median: p99}, SlowSharePct: Stat{Median: slow},
			ExtraSendsPct: Stat{Median: extra}, SuccessPct: Stat{Median: success}, NoBadBroker: sc == "all-slow"}
	}
	type want struct {
		target, against string
		pass            bool
	}
	tests := []struct {
		name string
		ms   []Median
		want []want
	}{
		{"every target met at its limit", []Median{
			med("slow", strategy.DetourHedge, 115, 0.6, 2, 100), med("slow", strategy.OracleHedge, 100, 0.5, 1, 100),
			med("slow", "detour", 115.01, 3, 0, 100)},
			[]want{{CheckP99VsOracle, strategy.OracleHedge, true}, {CheckSlowShare, strategy.OracleHedge, true},
				{CheckP99VsDetour, "detour", true}, {CheckExtraSends, "", true}, {CheckSuccess, "", true},
				{CheckExtraSends, "", true}, {CheckSuccess, "", true}}},
		{"every target missed just past its limit", []Median{
			med("slow", strategy.DetourHedge, 115.5, 0.61, 2.01, 99.99), med("slow", strategy.OracleHedge, 100, 0.5, 1, 100),
			med("slow", "detour", 115.5, 3, 0, 100)},
			[]want{{CheckP99VsOracle, strategy.OracleHedge, false}, {CheckSlowShare, strategy.OracleHedge, false},
				{CheckP99VsDetour, "detour", false}, {CheckExtraSends, "", false}, {CheckSuccess, "", false},
				{CheckExtraSends, "", true}, {CheckSuccess, "", true}}},
		{"without its oracle only the budget and success", []Median{med("hang-100", strategy.DetourHedge, 50, 1, 1, 100)},
			[]want{{CheckExtraSends, "", true}, {CheckSuccess, "", true}}},
		{"the grpc row against the grpc oracle", []Median{
			med("hang", strategy.GRPCDetourHedge, 30, 0.2, 0.5, 100), med("hang", strategy.GRPCOracleHedge, 20, 0.2, 0.5, 100)},
			[]want{{CheckP99VsOracle, strategy.GRPCOracleHedge, false}, {CheckSlowShare, strategy.GRPCOracleHedge, true},
				{CheckExtraSends, "", true}, {CheckSuccess, "", true}, {CheckExtraSends, "", true}, {CheckSuccess, "", true}}},
		{"all-slow judges only extra sends and success", []Median{
			med("all-slow", strategy.DetourHedge, 900, unknownShare, 2.5, 100), med("all-slow", strategy.OracleHedge, 800, unknownShare, 1, 100),
			med("all-slow", "detour", 800, unknownShare, 0, 100)},
			[]want{{CheckExtraSends, "", false}, {CheckSuccess, "", true}, {CheckExtraSends, "", true}, {CheckSuccess, "", true}}},
		{"rows that do not hedge are not judged", []Median{med("slow", "detour", 100, 1, 0, 100), med("slow", "oracle", 100, 1, 0, 100)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := HedgeVerdicts(tc.ms)
			if len(got) != len(tc.want) {
				t.Fatalf("%d checks, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				if g := got[i]; g.Target != w.target || g.Against != w.against || g.Pass != w.pass {
					t.Errorf("check %d: %s against %q pass %v (value %.2f limit %.2f), want %s against %q pass %v", i, g.Target, g.Against,
						g.Pass, g.Value, g.Limit, w.target, w.against, w.pass)
				}
			}
		})
	}
}
