package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/report"
)

// TestShortBlackholeRunMeasuresDetourAndKeepsTheOracleOffTheBadBroker runs the real harness for
// one short scenario: brokers, fault schedule, two strategies, analysis and every output file.
func TestShortBlackholeRunMeasuresDetourAndKeepsTheOracleOffTheBadBroker(t *testing.T) {
	out := t.TempDir()
	// A loaded test machine may run the fault schedule late; this test is about the harness, not
	// about timing, so it allows a generous slack.
	c, err := parseFlags([]string{"-out", out, "-modes", "sim", "-reps", "1", "-duration", "2s", "-drain", "3s", "-schedule-slack", "1s",
		"-scenarios", "blackhole", "-strategies", "detour,oracle"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var log bytes.Buffer
	if err := run(ctx, c, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}

	raw, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("got %d results, want detour and oracle", len(rep.Results))
	}
	if rep.Params.ScheduledPerRun != 400 || rep.Machine.CPUs < 1 || rep.Machine.GoVersion == "" {
		t.Errorf("run parameters or machine info missing: %+v %+v", rep.Params, rep.Machine)
	}
	by := map[string]analysis.Result{}
	for _, r := range rep.Results {
		by[r.Strategy] = r
		if r.Issued == 0 || r.Succeeded+r.Failed != r.Issued {
			t.Errorf("%s: issued %d, succeeded %d, failed %d", r.Strategy, r.Issued, r.Succeeded, r.Failed)
		}
		if len(r.Checks) != 0 {
			t.Errorf("%s: fairness checks failed: %v", r.Strategy, r.Checks)
		}
		if len(r.Timeline) != 1 || r.Timeline[0].ScheduledMs != 500 {
			t.Errorf("%s: fault schedule %+v, want the black hole at 500 ms", r.Strategy, r.Timeline)
		}
	}
	oracle, detour := by["oracle"], by["detour"]
	if oracle.BadAttempts != 0 || oracle.BadBrokerReceived != 0 || oracle.BadSharePct != 0 {
		t.Errorf("oracle reached the bad broker: %d attempts, broker counted %d", oracle.BadAttempts, oracle.BadBrokerReceived)
	}
	// Before the onset detour spreads over all three brokers, so it meets the black hole; the bad
	// broker's own counter must agree with the attempts the harness recorded reaching it.
	if detour.BadAttempts == 0 || detour.BadBrokerReceived == 0 {
		t.Errorf("detour never reached the bad broker: %d attempts, broker counted %d", detour.BadAttempts, detour.BadBrokerReceived)
	}
	if int64(detour.BadAttempts) != detour.BadBrokerReceived {
		t.Errorf("harness recorded %d attempts on the bad broker, the broker counted %d", detour.BadAttempts, detour.BadBrokerReceived)
	}
	if detour.FirstFailureMs == nil || *detour.FirstFailureMs < 500 {
		t.Errorf("no failure on the black-holed broker after the onset was recorded: %v", detour.FirstFailureMs)
	}
	if detour.Targets == nil || oracle.Targets != nil {
		t.Errorf("targets belong to detour only: detour %v, oracle %v", detour.Targets, oracle.Targets)
	}

	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## brokersim", "| blackhole | detour |", "| blackhole | oracle |", c.Command, "blackhole-latency.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	for _, name := range []string{"blackhole-latency.png", "blackhole-p99.png"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", name)
		}
	}
}

// TestParseFlagsRefusesUnknownNames checks that a typo in a scenario or strategy fails loudly
// instead of silently running nothing.
func TestParseFlagsRefusesUnknownNames(t *testing.T) {
	for _, args := range [][]string{
		{"-scenarios", "blackhol"},
		{"-strategies", "detour,rocketmq6"},
		{"-duration", "100ms"},
		{"-modes", "sim,simulated"},
		{"-real-scenarios", "terminating"},
		{"-real-strategies", "java-6"},
		{"-reps", "0"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%v) accepted it", args)
		}
	}
}

// TestQuickKeepsExplicitFlags checks that -quick sets its defaults and that flags given explicitly
// win over them.
func TestQuickKeepsExplicitFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Reps != 1 || len(c.Modes) != 1 || c.Modes[0] != "real" || c.RealParams.Duration != 6*time.Second ||
		strings.Join(c.RealStrategies, ",") != "detour,java-5,java-default" || !strings.Contains(c.Command, "-quick") {
		t.Errorf("quick config %+v", c)
	}
	c, err = parseFlags([]string{"-quick", "-reps", "3", "-real-strategies", "detour,java-4.9"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Reps != 3 || strings.Join(c.RealStrategies, ",") != "detour,java-4.9" {
		t.Errorf("explicit flags lost under -quick: reps %d, strategies %v", c.Reps, c.RealStrategies)
	}
	if c.RealParams.Rate != c.Params.Rate || c.RealParams.Senders != c.Params.Senders || c.RealParams.BodyLen != c.Params.BodyLen {
		t.Errorf("real mode's workload differs from brokersim's: %+v vs %+v", c.RealParams, c.Params)
	}
}
