// Command faultbench is detour's fault benchmark. For each scenario (a broker that goes bad in
// one way) and each strategy (how the producer copes), it sends the same paced workload to three
// loopback brokersim brokers, records every send and attempt, and writes results.json,
// results.md and PNG charts into the output directory.
//
// The default run (six scenarios × six strategies × 20 s) takes about 15 minutes:
//
//	go run ./hack/faultbench -out bench
//
// A quick look at one scenario:
//
//	go run ./hack/faultbench -out /some/dir -duration 5s -scenarios blackhole
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// config is the command line.
type config struct {
	Out        string
	Params     params
	Scenarios  []string
	Strategies []string
	Charts     bool
	Raw        string
	// Command is the command line that reproduces the run, for the report.
	Command string
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("faultbench", flag.ContinueOnError)
	c := config{}
	fs.StringVar(&c.Out, "out", "bench", "output directory for results.json, results.md and the charts")
	fs.DurationVar(&c.Params.Duration, "duration", 20*time.Second, "measured time per run (the fault schedule scales with it)")
	fs.IntVar(&c.Params.Rate, "rate", 200, "messages per second, over all senders")
	fs.IntVar(&c.Params.Senders, "senders", 4, "concurrent synchronous senders")
	fs.DurationVar(&c.Params.Drain, "drain", 10*time.Second, "how long to wait for sends in flight after the run's time is up")
	fs.IntVar(&c.Params.BodyLen, "body", 128, "message body size in bytes")
	fs.DurationVar(&c.Params.ScheduleSlack, "schedule-slack", 100*time.Millisecond, "how late a fault step may be applied before the run is flagged as not comparable")
	scen := fs.String("scenarios", strings.Join(scenarioNames, ","), "comma-separated scenarios to run")
	strat := fs.String("strategies", strings.Join(strategyNames, ","), "comma-separated strategies to run")
	fs.BoolVar(&c.Charts, "charts", true, "draw PNG charts")
	fs.StringVar(&c.Raw, "raw", "", "if set, a directory to write every send and attempt of every run into as CSV (large; for investigation)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.Params.Duration < time.Second || c.Params.Rate <= 0 || c.Params.Senders <= 0 || c.Params.BodyLen <= 0 || c.Params.Drain < 0 {
		return c, errors.New("duration must be at least 1s; rate, senders and body must be positive; drain not negative")
	}
	var err error
	if c.Scenarios, err = pickList(*scen, scenarioNames, "scenario"); err != nil {
		return c, err
	}
	if c.Strategies, err = pickList(*strat, strategyNames, "strategy"); err != nil {
		return c, err
	}
	cmd := []string{"go run ./hack/faultbench", "-out " + c.Out}
	fs.Visit(func(f *flag.Flag) {
		// -raw only adds investigation files; it changes nothing measured.
		if f.Name != "out" && f.Name != "raw" {
			cmd = append(cmd, "-"+f.Name+" "+f.Value.String())
		}
	})
	c.Command = strings.Join(cmd, " ")
	return c, nil
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "faultbench:", err)
		os.Exit(1)
	}
}

// logf writes progress lines.
type logf func(format string, args ...any)

// run runs every selected scenario × strategy and writes the outputs after each scenario, so a
// long run that is interrupted still leaves the scenarios it finished.
func run(ctx context.Context, c config, w interface{ Write([]byte) (int, error) }) error {
	// rocketmq-client-go logs every retry at warn level to stdout; its outcomes are recorded here.
	rlog.SetLogLevel("fatal")
	log := logf(func(format string, args ...any) {
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	})
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	var (
		scs     []scenario
		results []result
		charts  = map[string][]string{}
		failed  []string
	)
	for _, name := range c.Scenarios {
		sc, err := buildScenario(name, c.Params.Duration)
		if err != nil {
			return err
		}
		scs = append(scs, sc)
		var runs []*runData
		for _, st := range c.Strategies {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, err := runOne(ctx, sc, st, c.Params)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", name, st, err)
			}
			r := analyze(d)
			log("%-11s %-18s issued %4d/%d ok %6.2f%% p50 %7.2fms p99 %8.2fms p99.9 %8.2fms bad %5.2f%% after-signal %5.2f%% isolate %s%s",
				name, st, r.Issued, r.Scheduled, r.SuccessPct, r.P50Ms, r.P99Ms, r.P999Ms, r.BadSharePct,
				r.BadShareAfterSignalPct, fmtOpt(r.IsolateMs), checksNote(r))
			for _, ch := range r.Checks {
				failed = append(failed, name+"/"+st+": "+ch)
			}
			results = append(results, r)
			runs = append(runs, d)
			if c.Raw != "" {
				if err := writeRaw(c.Raw, d); err != nil {
					return err
				}
			}
		}
		explainSlow(results, runs)
		if c.Charts {
			paths, err := writeCharts(c.Out, sc, runs)
			if err != nil {
				return fmt.Errorf("charts for %s: %w", name, err)
			}
			charts[name] = paths
		}
		applyTargets(results)
		rep := newReport(c.Command, c.Params, scs, c.Strategies, results)
		if err := writeJSON(filepath.Join(c.Out, "results.json"), rep); err != nil {
			return err
		}
		if err := writeMarkdown(filepath.Join(c.Out, "results.md"), rep, charts); err != nil {
			return err
		}
	}
	log("wrote %s", filepath.Join(c.Out, "results.json"))
	if len(failed) > 0 {
		return fmt.Errorf("fairness checks failed:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

// explainSlow adds, to detour's result of the scenario just run, where its sends slower than the
// oracle's p99 come from.
func explainSlow(results []result, runs []*runData) {
	var det, orc *runData
	for _, d := range runs {
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
	th := percentile(lat, 99)
	for i := range results {
		r := &results[i]
		if r.Scenario == det.Scenario.Name && r.Strategy == "detour" {
			b := slowerThan(det, th)
			b.OracleSlower = slowerThan(orc, th).Sends
			r.Slow = &b
		}
	}
}

func checksNote(r result) string {
	if len(r.Checks) == 0 {
		return ""
	}
	return " CHECKS: " + strings.Join(r.Checks, "; ")
}
