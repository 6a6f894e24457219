package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/report"
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
	l.realScen = fs.String("real-scenarios", strings.Join(scenario.DefaultReal, ","), "comma-separated real-broker scenarios (known: "+strings.Join(scenario.RealNames, ", ")+")")
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
