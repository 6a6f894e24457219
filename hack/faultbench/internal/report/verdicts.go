package report

import (
	"fmt"
	"strings"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// writeVerdicts writes detour's medians against the targets and the Java producers, and what the
// records say where it is not ahead.
func writeVerdicts(b *strings.Builder, rep *Report, mode string) {
	var vs []analysis.Verdict
	for _, v := range rep.Verdicts {
		if v.Mode == mode {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### detour against its targets and the Java producers (medians)\n\n"+
		"Against `oracle` (the targets): 100 %% success, p99 within %.1f× the oracle's, at most %.0f %% of sends reaching the "+
		"bad broker while it is faulty. Against a Java producer: success not lower, p99 not higher, bad share while faulty "+
		"not higher; *better* when also strictly ahead on one of them (required in blackhole, slow, flapping and rolling "+
		"against java-5 and java-4.9). *p99 ×* is detour's median p99 over the baseline's, from the same run.\n\n",
		analysis.TargetP99Factor, analysis.TargetBadSharePct)
	b.WriteString("| scenario | against | success | p99 × | p99 | bad share while faulty | better |\n|---|---|---|---:|---|---|---|\n")
	for _, v := range vs {
		better := "—"
		if v.Against != "oracle" {
			better = "no"
			if v.Better {
				better = "yes"
			}
			if analysis.MustBeBetter[v.Scenario] && v.Against != "java-default" && !v.Better {
				better = "**no**"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f | %s | %s | %s |\n", v.Scenario, v.Against, mark(v.SuccessPass), v.P99Ratio,
			mark(v.P99Pass), mark(v.BadSharePass), better)
	}
	writeMisses(b, rep, mode, vs)
}

// writeHedgeVerdicts writes the hedging rows' medians against their targets; nothing when no
// hedging row ran.
func writeHedgeVerdicts(b *strings.Builder, rep *Report, mode string) {
	var cs []analysis.HedgeCheck
	for _, c := range rep.HedgeChecks {
		if c.Mode == mode {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Hedged sends against their targets (medians)\n\n"+
		"In every scenario with a bad broker: `%s` p99 at most %.2f× `%s`'s and its slow share at most `%s`'s plus %.1f "+
		"percentage point, the same for `%s` against `%s`, and `%s` p99 below `detour`'s; in every scenario (all-slow "+
		"included) every hedging row's extra sends at most %d %% of sends and 100 %% success. A target is shown only where "+
		"the rows it involves ran. *value* and *limit*: a p99 ratio and its factor, or percentages.\n\n",
		strategy.DetourHedge, analysis.TargetHedgeP99Factor, strategy.OracleHedge, strategy.OracleHedge, analysis.TargetHedgeSlowSharePP,
		strategy.GRPCDetourHedge, strategy.GRPCOracleHedge, strategy.DetourHedge, analysis.TargetExtraSendsPct)
	b.WriteString("| scenario | strategy | target | against | value | limit | verdict |\n|---|---|---|---|---:|---:|---|\n")
	for _, c := range cs {
		against := "—"
		if c.Against != "" {
			against = "`" + c.Against + "`"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.2f | %.2f | %s |\n", c.Scenario, c.Strategy, c.Target, against, c.Value, c.Limit, mark(c.Pass))
	}
}

// writeMisses writes one line per scenario and measure where detour is not ahead, naming every
// baseline it is not ahead of there, with detour's evidence from the records once.
func writeMisses(b *strings.Builder, rep *Report, mode string, vs []analysis.Verdict) {
	order, against := missesOf(rep, mode, vs)
	var why []string
	for _, k := range order {
		d := findMedian(rep, mode, k.scenario, "detour")
		var mine, evidence string
		switch k.measure {
		case "success":
			mine, evidence = analysis.FmtStat(d.SuccessPct, analysis.FmtPct)+" %", errorsOf(rep, mode, k.scenario, "detour")
		case "p99":
			mine, evidence = analysis.FmtStat(d.P99Ms, fmtMs)+" ms", slowOf(rep, mode, k.scenario)
		default:
			mine, evidence = analysis.FmtStat(d.BadShareWhileFaultyPct, analysis.FmtPct)+" %", badOf(rep, mode, k.scenario)
		}
		why = append(why, fmt.Sprintf("- **%s, %s**: detour %s against %s. %s", k.scenario, k.measure, mine,
			strings.Join(against[k], ", "), evidence))
	}
	if len(why) > 0 {
		b.WriteString("\nWhere detour is not ahead, from the records of these runs:\n\n")
		b.WriteString(strings.Join(why, "\n"))
		b.WriteString("\n")
	}
}

// miss is a scenario and a measure on which detour is not ahead of some baseline.
type miss struct{ scenario, measure string }

// missesOf lists, in verdict order, the scenarios and measures on which detour is not ahead of a
// baseline (java-default left out), each with the baselines and their medians there.
func missesOf(rep *Report, mode string, vs []analysis.Verdict) ([]miss, map[miss][]string) {
	var order []miss
	against := map[miss][]string{}
	for _, v := range vs {
		if v.Against == "java-default" {
			continue
		}
		d, o := findMedian(rep, mode, v.Scenario, "detour"), findMedian(rep, mode, v.Scenario, v.Against)
		if d == nil || o == nil {
			continue
		}
		add := func(measure, vsText string) {
			k := miss{v.Scenario, measure}
			if _, ok := against[k]; !ok {
				order = append(order, k)
			}
			against[k] = append(against[k], fmt.Sprintf("`%s` %s", v.Against, vsText))
		}
		if !v.SuccessPass {
			add("success", analysis.FmtStat(o.SuccessPct, analysis.FmtPct)+" %")
		}
		if !v.P99Pass {
			add("p99", analysis.FmtStat(o.P99Ms, fmtMs)+" ms")
		}
		if !v.BadSharePass {
			add("bad share while faulty", analysis.FmtStat(o.BadShareWhileFaultyPct, analysis.FmtPct)+" %")
		}
	}
	return order, against
}

func findMedian(rep *Report, mode, sc, st string) *analysis.Median {
	return analysis.FindMedian(rep.Medians, mode, sc, st)
}

func runsOf(rep *Report, mode, sc, st string) []analysis.Result {
	var out []analysis.Result
	for _, r := range rep.Results {
		if r.Mode == mode && r.Scenario == sc && r.Strategy == st {
			out = append(out, r)
		}
	}
	return out
}

// errorsOf says how detour's failed sends failed, over the repetitions.
func errorsOf(rep *Report, mode, sc, st string) string {
	var parts []string
	for _, r := range runsOf(rep, mode, sc, st) {
		p := fmt.Sprintf("run %d: %d of %d failed", r.Rep, r.Failed, r.Issued)
		if r.Issued < r.Scheduled {
			p += fmt.Sprintf(", %d not issued", r.Scheduled-r.Issued)
		}
		for _, e := range r.Errors {
			t := e.Text
			if len(t) > 120 {
				t = t[:120] + "…"
			}
			p += fmt.Sprintf(", %d× `%s`", e.Count, t)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ") + "."
}

// slowOf says where detour's slow sends come from, per repetition, against the oracle's p99.
func slowOf(rep *Report, mode, sc string) string {
	var parts []string
	for _, r := range runsOf(rep, mode, sc, "detour") {
		if s := r.Slow; s != nil {
			parts = append(parts, fmt.Sprintf("run %d: %d sends above the oracle's p99 (%s ms), %d reached %s, %d retried, "+
				"%d before the onset, %d neither (noise p99 %s ms)", r.Rep, s.Sends, fmtMs(s.ThresholdMs), s.TouchedBad,
				scenario.BadBroker, s.Retried, s.BeforeOnset, s.Unexplained, fmtMs(r.NoiseP99Ms)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "."
}

// badOf says when detour's sends reached the bad broker while it was faulty.
func badOf(rep *Report, mode, sc string) string {
	var parts []string
	for _, r := range runsOf(rep, mode, sc, "detour") {
		a := r.AfterSignal
		p := fmt.Sprintf("run %d: %d sends reached it after the first signal, %d of them while faulty, %d failed; first "+
			"failure at %s ms (onset %s ms)", r.Rep, a.BadSends, a.WhileFaulty, a.Failed, FmtOpt(r.FirstFailureMs), fmtMs(r.OnsetMs))
		if len(r.Isolations) > 0 {
			var ch []string
			for _, c := range r.Isolations {
				verb := "left isolation"
				if c.Isolated {
					verb = "isolated (" + c.Reason + ")"
				}
				ch = append(ch, fmt.Sprintf("%s at %.1f s", verb, c.AtMs/1000))
			}
			p += "; runtime: " + strings.Join(ch, ", ")
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ") + "."
}
