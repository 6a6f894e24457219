// Command faultbench is detour's fault benchmark. For each scenario (a broker that goes bad in
// one way) and each strategy (how the producer copes), it sends the same paced workload to three
// brokers, records every send and attempt, and writes results.json, results.md and PNG charts
// into the output directory. It has two modes: brokersim (fresh in-process brokers per run, the
// fast mode) and real (one real Apache RocketMQ 5.x cluster started by internal/testsupport/rmqtest, with
// RocketMQ's own Java producers among the strategies; needs DETOUR_ROCKETMQ, see
// hack/setup-rocketmq.sh). Every scenario × strategy is repeated -reps times, interleaved, and
// reported as median with min-max.
//
// The full run (make bench) takes about two hours on 2 cores:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go run ./hack/faultbench -out bench
//
// The quick mode (under 5 minutes) and a quick look at one brokersim scenario:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go run ./hack/faultbench -quick -out /some/dir
//	go run ./hack/faultbench -out /some/dir -modes sim -reps 1 -duration 5s -scenarios blackhole
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/realenv"
	"github.com/detourmq/detour/hack/faultbench/internal/report"
	"github.com/detourmq/detour/hack/faultbench/internal/running"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// config is the command line: the settings the report states, and what to run and write.
type config struct {
	report.Settings
	Out           string
	Scenarios     []string
	Charts        bool
	Raw           string
	RealScenarios []string
	// Rewrite only renders the outputs again from the results.json in Out; Merge names other
	// runs' results.json files whose modes it adds.
	Rewrite bool
	Merge   string
	Note    string
	// RewriteCommand replaces the report's command line (for runs made in parts).
	RewriteCommand string
}

// listFlags are the comma-separated flags that name modes, scenarios and strategies; they are
// read into the config's lists once the quick defaults are applied.
type listFlags struct {
	modes, realScen, realStrat, scen, strat *string
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("faultbench", flag.ContinueOnError)
	c := config{}
	lists := defineFlags(fs, &c)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Quick {
		applyQuick(&c, lists, set)
	}
	if c.Params.Duration < time.Second || c.RealParams.Duration < time.Second || c.Params.Rate <= 0 || c.Params.Senders <= 0 || c.Params.BodyLen <= 0 || c.Params.Drain < 0 {
		return c, errors.New("duration must be at least 1s; rate, senders and body must be positive; drain not negative")
	}
	if c.Reps < 1 || c.Reps > 20 {
		return c, errors.New("reps must be between 1 and 20")
	}
	d := c.RealParams.Duration
	c.RealParams = c.Params
	c.RealParams.Duration = d
	if err := pickLists(&c, lists); err != nil {
		return c, err
	}
	c.Command = commandLine(fs, c)
	return c, nil
}

// defineFlags declares every flag on fs, the plain ones straight into c.
func defineFlags(fs *flag.FlagSet, c *config) listFlags {
	var l listFlags
	fs.StringVar(&c.Out, "out", "bench", "output directory for results.json, results.md and the charts")
	fs.DurationVar(&c.Params.Duration, "duration", 4*time.Second, "brokersim mode: measured time per run (the fault schedule scales with it)")
	fs.DurationVar(&c.RealParams.Duration, "real-duration", 12*time.Second, "real mode: measured time per run (the fault schedule scales with it)")
	fs.IntVar(&c.Reps, "reps", 3, "repetitions of every scenario × strategy, interleaved")
	l.modes = fs.String("modes", "sim,real", "comma-separated modes: sim (brokersim), real (real RocketMQ brokers and Java producers)")
	fs.BoolVar(&c.Quick, "quick", false, "a quick run (under 5 minutes): one repetition of 6 s real-broker runs of detour, java-5 and java-default in blackhole, slow and dead, no brokersim mode; flags given explicitly still win")
	fs.BoolVar(&c.Rewrite, "rewrite", false, "run nothing: render results.md, the medians and the verdicts again from the results.json in -out")
	fs.StringVar(&c.RewriteCommand, "command", "", "with -rewrite: the command line to show as how to reproduce the run (for runs made in parts)")
	fs.StringVar(&c.Note, "note", "", "with -rewrite: a note on how the run was made, added to the report")
	fs.StringVar(&c.Merge, "merge", "", "with -rewrite: comma-separated results.json files of other runs whose modes are added (the modes of one invocation run one after another; this joins modes run separately)")
	l.realScen = fs.String("real-scenarios", strings.Join(scenario.RealNames, ","), "comma-separated real-broker scenarios")
	l.realStrat = fs.String("real-strategies", strings.Join(strategy.DefaultReal, ","), "comma-separated real-broker strategies (known: "+strings.Join(strategy.RealNames, ", ")+")")
	fs.IntVar(&c.Params.Rate, "rate", 200, "messages per second, over all senders")
	fs.IntVar(&c.Params.Senders, "senders", 4, "concurrent synchronous senders")
	fs.DurationVar(&c.Params.Drain, "drain", 10*time.Second, "how long to wait for sends in flight after the run's time is up")
	fs.IntVar(&c.Params.BodyLen, "body", 128, "message body size in bytes")
	fs.DurationVar(&c.Params.ScheduleSlack, "schedule-slack", 100*time.Millisecond, "how late a fault step may be applied before the run is flagged as not comparable")
	l.scen = fs.String("scenarios", strings.Join(scenario.SimNames, ","), "comma-separated scenarios to run")
	l.strat = fs.String("strategies", strings.Join(strategy.SimNames, ","), "comma-separated strategies to run")
	fs.BoolVar(&c.Charts, "charts", true, "draw PNG charts")
	fs.StringVar(&c.Raw, "raw", "", "if set, a directory to write every send and attempt of every run into as CSV (large; for investigation)")
	return l
}

// applyQuick sets the quick run's defaults for every flag not given explicitly (set names the
// given ones): explicit flags win over the quick defaults.
func applyQuick(c *config, l listFlags, set map[string]bool) {
	if !set["reps"] {
		c.Reps = 1
	}
	if !set["modes"] {
		*l.modes = "real"
	}
	if !set["real-duration"] {
		c.RealParams.Duration = 6 * time.Second
	}
	if !set["real-strategies"] {
		*l.realStrat = "detour,java-5,java-default"
	}
	if !set["real-scenarios"] {
		*l.realScen = "blackhole,slow,dead"
	}
}

// pickLists reads the list flags into c, refusing unknown names.
func pickLists(c *config, l listFlags) error {
	var err error
	// Real brokers first: they are what the benchmark is for, and a run that is cut off keeps them.
	if c.Modes, err = pickList(*l.modes, []string{"real", "sim"}, "mode"); err != nil {
		return err
	}
	if c.RealScenarios, err = pickList(*l.realScen, scenario.RealNames, "real-broker scenario"); err != nil {
		return err
	}
	if c.RealStrategies, err = pickList(*l.realStrat, strategy.RealNames, "real-broker strategy"); err != nil {
		return err
	}
	if c.Scenarios, err = pickList(*l.scen, scenario.SimNames, "scenario"); err != nil {
		return err
	}
	c.Strategies, err = pickList(*l.strat, strategy.SimNames, "strategy")
	return err
}

// commandLine is the command that reproduces the run: every flag given, in fs's order.
func commandLine(fs *flag.FlagSet, c config) string {
	cmd := []string{"go run ./hack/faultbench", "-out " + c.Out}
	if c.Quick {
		cmd = append(cmd, "-quick")
	}
	fs.Visit(func(f *flag.Flag) {
		// -raw only adds investigation files; it changes nothing measured.
		if f.Name != "out" && f.Name != "raw" && f.Name != "quick" {
			cmd = append(cmd, "-"+f.Name+" "+f.Value.String())
		}
	})
	return strings.Join(cmd, " ")
}

// pickList parses a comma-separated list of known names, keeping the known order.
func pickList(s string, known []string, what string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %s %q (known: %s)", what, n, strings.Join(known, ", "))
		}
		want[n] = true
	}
	var out []string
	for _, n := range known {
		if want[n] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s selected", what)
	}
	return out, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "faultbench:", err)
		os.Exit(2)
	}
	if c.Rewrite {
		var merge []string
		if c.Merge != "" {
			merge = strings.Split(c.Merge, ",")
		}
		if err := rewrite(c.Out, merge, c.Note, c.RewriteCommand); err != nil {
			fmt.Fprintln(os.Stderr, "faultbench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "faultbench:", err)
		os.Exit(1)
	}
}

// run runs every selected mode, scenario, repetition and strategy and writes the outputs after
// each scenario, so a long run that is interrupted still leaves the scenarios it finished.
func run(ctx context.Context, c config, w interface{ Write([]byte) (int, error) }) error {
	// rocketmq-client-go logs every retry at warn level to stdout; its outcomes are recorded here.
	rlog.SetLogLevel("fatal")
	var logMu sync.Mutex
	log := realenv.Logf(func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	})
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	b := &bench{c: c, log: log, charts: map[string][]string{}, started: time.Now(), loadStart: report.LoadAvg()}
	for _, mode := range c.Modes {
		var err error
		if mode == "sim" {
			err = b.runSim(ctx)
		} else {
			err = b.runReal(ctx)
		}
		if err != nil {
			return err
		}
	}
	log("wrote %s in %v", filepath.Join(c.Out, "results.json"), time.Since(b.started).Round(time.Second))
	if len(b.failed) > 0 {
		return fmt.Errorf("fairness checks failed:\n  %s", strings.Join(b.failed, "\n  "))
	}
	return nil
}

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
	b.log("%-4s %-11s #%d %-18s issued %4d/%d ok %6.2f%% p50 %7.2fms p99 %8.2fms bad %5.2f%% while-faulty %5.2f%% isolate %s noise-p99 %.2fms load %.0f%s",
		mode, d.Scenario.Name, rep+1, d.Strategy, r.Issued, r.Scheduled, r.SuccessPct, r.P50Ms, r.P99Ms, r.BadSharePct,
		r.BadShareWhileFaultyPct, report.FmtOpt(r.IsolateMs), r.NoiseP99Ms, r.LoadAvg1, checksNote(r))
	for _, ch := range r.Checks {
		b.failed = append(b.failed, fmt.Sprintf("%s/%s/%s#%d: %s", mode, d.Scenario.Name, d.Strategy, rep+1, ch))
	}
	return r
}

// finishScenario analyzes the scenario's runs, draws its charts and rewrites the outputs.
func (b *bench) finishScenario(mode string, sc scenario.Scenario, rs []analysis.Result, runs []*scenario.RunData, strategies []string) error {
	explainSlow(rs, runs)
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
		if err := e.ArmHangGate(); err != nil {
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

// rewrite renders results.md, the medians and the verdicts again from the results.json in dir,
// with the charts that are there; the runs' own numbers are not touched. The modes of the
// results.json files in merge are added (their charts must be copied into dir by hand).
func rewrite(dir string, merge []string, note, command string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	for _, m := range merge {
		if err := mergeRun(&rep, m, dir); err != nil {
			return err
		}
	}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if command != "" {
		rep.Command = command
	}
	rep.Medians = analysis.Medians(rep.Results)
	rep.Verdicts = analysis.Verdicts(rep.Medians)
	charts := map[string][]string{}
	for _, sc := range rep.Scenarios {
		names := []string{sc.Name + "-latency.png", sc.Name + "-p99.png"}
		if sc.Mode == "real" {
			names = []string{"real-" + sc.Name + "-p99.png", "real-" + sc.Name + "-latency.png"}
		}
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				charts[sc.Mode+"/"+sc.Name] = append(charts[sc.Mode+"/"+sc.Name], filepath.Join(dir, n))
			}
		}
	}
	if err := report.WriteJSON(filepath.Join(dir, "results.json"), &rep); err != nil {
		return err
	}
	return report.WriteMarkdown(filepath.Join(dir, "results.md"), &rep, charts)
}

// mergeRun adds the modes of the run whose results.json is at path to rep (read from dir),
// refusing a mode rep already has.
func mergeRun(rep *report.Report, path, dir string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var o report.Report
	if err := json.Unmarshal(raw, &o); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, sc := range rep.Scenarios {
		have[sc.Mode] = true
	}
	for _, sc := range o.Scenarios {
		if have[sc.Mode] {
			return fmt.Errorf("%s: mode %s is already in %s", path, sc.Mode, dir)
		}
	}
	rep.Scenarios = append(rep.Scenarios, o.Scenarios...)
	rep.Results = append(rep.Results, o.Results...)
	rep.Command += "; " + o.Command
	for _, s := range o.Strategies {
		if !slices.ContainsFunc(rep.Strategies, func(x report.StrategyJSON) bool { return x.Name == s.Name }) {
			rep.Strategies = append(rep.Strategies, s)
		}
	}
	for k, v := range o.Machine.NoiseP99Ms {
		rep.Machine.NoiseP99Ms[k] = v
	}
	rep.Machine.LoadAvgNow = o.Machine.LoadAvgNow
	rep.Machine.ElapsedS = max(rep.Machine.ElapsedS, o.Machine.ElapsedS)
	return nil
}
