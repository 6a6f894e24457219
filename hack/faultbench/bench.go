package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/realenv"
	"github.com/detourmq/detour/hack/faultbench/internal/report"
	"github.com/detourmq/detour/hack/faultbench/internal/running"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
)

// bench is one invocation's state: every result so far and the charts drawn.
type bench struct {
	c         config
	log       realenv.Logf
	scs       []report.ScenarioJSON
	results   []analysis.Result
	charts    map[string][]string
	failed    []string
	started   time.Time
	loadStart [3]float64
}

// order returns the strategies in the order of repetition rep: rotated, so that no strategy
// always runs first (on a fresh JVM cache, right after a restore) or last.
func order(strategies []string, rep int) []string {
	k := rep % len(strategies)
	return append(append([]string(nil), strategies[k:]...), strategies[:k]...)
}

// record analyzes a run, logs it and keeps its result.
func (b *bench) record(mode string, rep int, d *scenario.RunData) analysis.Result {
	r := analysis.Analyze(d)
	r.Mode, r.Rep = mode, rep+1
	r.LoadAvg1 = report.LoadAvg()[0]
	for _, e := range d.ApplyErrors {
		r.Checks = append(r.Checks, "fault step failed: "+e)
	}
	b.log("%-4s %-11s #%d %-18s issued %4d/%d ok %6.2f%% p50 %7.2fms p99 %8.2fms bad %5s%% while-faulty %5s%% isolate %s hedges %d (copies %d) noise-p99 %.2fms load %.0f%s",
		mode, d.Scenario.Name, rep+1, d.Strategy, r.Issued, r.Scheduled, r.SuccessPct, r.P50Ms, r.P99Ms, analysis.FmtPct(r.BadSharePct),
		analysis.FmtPct(r.BadShareWhileFaultyPct), report.FmtOpt(r.IsolateMs), r.Hedges.Sent, r.Hedges.CopyStored, r.NoiseP99Ms, r.LoadAvg1, checksNote(r))
	for _, ch := range r.Checks {
		b.failed = append(b.failed, fmt.Sprintf("%s/%s/%s#%d: %s", mode, d.Scenario.Name, d.Strategy, rep+1, ch))
	}
	return r
}

// finishScenario analyzes the scenario's runs, draws its charts and rewrites the outputs.
func (b *bench) finishScenario(mode string, sc scenario.Scenario, rs []analysis.Result, runs []*scenario.RunData, strategies []string) error {
	explainSlow(rs, runs)
	analysis.ApplySlowShares(rs, runs)
	analysis.ApplyTargets(rs)
	b.results = append(b.results, rs...)
	b.scs = append(b.scs, report.ScenarioOf(mode, sc))
	if b.c.Charts {
		paths, err := report.WriteModeCharts(b.c.Out, mode, sc, rs, runs, strategies)
		if err != nil {
			return fmt.Errorf("charts for %s: %w", sc.Name, err)
		}
		b.charts[mode+"/"+sc.Name] = paths
	}
	return b.write()
}

func (b *bench) write() error {
	rep := report.NewReport(b.c.Settings, b.scs, b.results, b.started, b.loadStart)
	if err := report.WriteJSON(filepath.Join(b.c.Out, "results.json"), rep); err != nil {
		return err
	}
	return report.WriteMarkdown(filepath.Join(b.c.Out, "results.md"), rep, b.charts)
}

// runSim runs the brokersim mode: fresh brokers for every run.
func (b *bench) runSim(ctx context.Context) error {
	for _, name := range b.c.Scenarios {
		sc, err := scenario.BuildScenario(name, b.c.Params.Duration)
		if err != nil {
			return err
		}
		var rs []analysis.Result
		var runs []*scenario.RunData
		for rep := 0; rep < b.c.Reps; rep++ {
			for _, st := range order(b.c.Strategies, rep) {
				if err := ctx.Err(); err != nil {
					return err
				}
				d, err := running.RunOne(ctx, sc, st, b.c.Params)
				if err != nil {
					return fmt.Errorf("sim/%s/%s: %w", name, st, err)
				}
				d.Rep = rep + 1
				rs = append(rs, b.record("sim", rep, d))
				runs = append(runs, d)
				if b.c.Raw != "" {
					if err := report.WriteRaw(b.c.Raw, "sim", d); err != nil {
						return err
					}
				}
			}
		}
		if err := b.finishScenario("sim", sc, rs, runs, b.c.Strategies); err != nil {
			return err
		}
	}
	return nil
}

// runReal runs the real-broker mode on one cluster; the bad broker is restored after every run.
func (b *bench) runReal(ctx context.Context) error {
	start := time.Now()
	var e *realenv.Env
	var err error
	// Four JVMs booting at once on a busy 2-core machine can miss the harness's start timeout;
	// that says nothing about what is measured, so the cluster gets more than one chance.
	for try := 1; try <= 3; try++ {
		if e, err = realenv.Start(ctx, b.log); err == nil || ctx.Err() != nil {
			break
		}
		b.log("real cluster did not start (try %d of 3): %v", try, realenv.FirstLine(err))
	}
	if err != nil {
		return fmt.Errorf("real cluster: %w", err)
	}
	defer e.Close()
	b.log("real cluster up in %v: name server %s, brokers %v", time.Since(start).Round(time.Second), e.NameServer(), e.BrokerList())
	for _, name := range b.c.RealScenarios {
		sc, err := scenario.BuildRealScenario(name, b.c.RealParams.Duration)
		if err != nil {
			return err
		}
		if err := b.runRealScenario(ctx, e, sc); err != nil {
			return err
		}
	}
	return nil
}

// runRealScenario runs every repetition and strategy of one scenario on the real cluster.
func (b *bench) runRealScenario(ctx context.Context, e *realenv.Env, sc scenario.Scenario) error {
	if sc.Gate {
		if err := e.ArmHangGate(sc.HangEvery); err != nil {
			return fmt.Errorf("real/%s: the hang gate: %w", sc.Name, err)
		}
		defer func() {
			if err := e.RemoveHangGate(); err != nil {
				b.log("real/%s: removing the hang gate: %v", sc.Name, err)
			}
		}()
	}
	var rs []analysis.Result
	var runs []*scenario.RunData
	for rep := 0; rep < b.c.Reps; rep++ {
		for _, st := range order(b.c.RealStrategies, rep) {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, err := realenv.RunReal(ctx, e, sc, st, b.c.RealParams)
			if rerr := e.Restore(ctx); rerr != nil {
				return fmt.Errorf("real/%s/%s: restoring %s: %w", sc.Name, st, scenario.BadBroker, rerr)
			}
			if err != nil {
				return fmt.Errorf("real/%s/%s: %w", sc.Name, st, err)
			}
			d.Rep = rep + 1
			rs = append(rs, b.record("real", rep, d))
			runs = append(runs, d)
			if b.c.Raw != "" {
				if err := report.WriteRaw(b.c.Raw, "real", d); err != nil {
					return err
				}
			}
		}
	}
	return b.finishScenario("real", sc, rs, runs, b.c.RealStrategies)
}

// explainSlow adds, to detour's result of the scenario just run, where its sends slower than the
// oracle's p99 come from.
func explainSlow(results []analysis.Result, runs []*scenario.RunData) {
	reps := map[int]bool{}
	for _, d := range runs {
		reps[d.Rep] = true
	}
	for rep := range reps {
		explainSlowRep(results, runs, rep)
	}
}

func explainSlowRep(results []analysis.Result, runs []*scenario.RunData, rep int) {
	var det, orc *scenario.RunData
	for _, d := range runs {
		if d.Rep != rep {
			continue
		}
		switch d.Strategy {
		case "detour":
			det = d
		case "oracle":
			orc = d
		}
	}
	if det == nil || orc == nil {
		return
	}
	lat := make([]time.Duration, 0, len(orc.Sends))
	for _, s := range orc.Sends {
		lat = append(lat, s.Latency)
	}
	slices.Sort(lat)
	th := analysis.Percentile(lat, 99)
	for i := range results {
		r := &results[i]
		if r.Scenario == det.Scenario.Name && r.Strategy == "detour" && r.Rep == rep {
			b := analysis.SlowerThan(det, th)
			b.OracleSlower = analysis.SlowerThan(orc, th).Sends
			r.Slow = &b
		}
	}
}

func checksNote(r analysis.Result) string {
	if len(r.Checks) == 0 {
		return ""
	}
	return " CHECKS: " + strings.Join(r.Checks, "; ")
}
