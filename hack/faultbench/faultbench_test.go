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
	"github.com/detourmq/detour/hack/faultbench/internal/realenv"
	"github.com/detourmq/detour/hack/faultbench/internal/report"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
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

// TestAnalyzeTellsIsolationFromStalls feeds the analysis synthetic runs: one where sends stop
// reaching the bad broker after its first failure, one where round robin keeps sending to it, and
// one where every sender is stuck on it (no attempts anywhere), which must not pass for isolation.
func TestAnalyzeTellsIsolationFromStalls(t *testing.T) {
	const ms = time.Millisecond
	p := scenario.Params{Duration: 10 * time.Second, Rate: 100, Senders: 1}
	sc := scenario.Scenario{Name: "blackhole", Onset: 2 * time.Second, Faulty: []scenario.Window{{From: 2 * time.Second, To: 10 * time.Second}}}
	// build sends one message every 10 ms; pick names the broker of each send's only attempt, or
	// "" for no send at that slot.
	build := func(pick func(i int) (string, time.Duration, bool)) *scenario.RunData {
		d := &scenario.RunData{Scenario: sc, Params: p}
		for i := 0; i < 1000; i++ {
			b, lat, ok := pick(i)
			if b == "" {
				continue
			}
			start := time.Duration(i) * 10 * ms
			d.Sends = append(d.Sends, scenario.SendRec{Seq: i, Due: start, Start: start, Latency: lat, OK: ok, Tried: []string{b}})
			d.Attempts = append(d.Attempts, scenario.AttemptRec{Broker: b, Start: start, End: start + lat, OK: ok})
		}
		return d
	}
	names := []string{scenario.BrokerA, scenario.BadBroker, scenario.BrokerC}
	tests := []struct {
		name        string
		run         *scenario.RunData
		wantIsolate *time.Duration
		wantShare   float64
	}{
		{
			name: "sends stop after the first failure",
			run: build(func(i int) (string, time.Duration, bool) {
				if i == 200 {
					return scenario.BadBroker, 300 * ms, false // fails at 2.3 s
				}
				if i > 200 && i < 230 {
					return "", 0, false // the sender was stuck in the failed send
				}
				if i > 200 {
					return names[2*(i%2)], ms, true // a and c only
				}
				return names[i%3], ms, true
			}),
			wantIsolate: new(time.Duration),
			wantShare:   0,
		},
		{
			name: "round robin keeps sending to the bad broker",
			run: build(func(i int) (string, time.Duration, bool) {
				b := names[i%3]
				return b, ms, b != scenario.BadBroker || i < 200
			}),
			wantIsolate: nil,
			wantShare:   33.33,
		},
		{
			name: "a stall with nobody sending is not isolation",
			run: build(func(i int) (string, time.Duration, bool) {
				if i >= 200 && i%300 < 150 {
					return "", 0, false // every sender stuck for 1.5 s
				}
				b := names[i%3]
				return b, ms, b != scenario.BadBroker || i < 200
			}),
			wantIsolate: nil,
			wantShare:   33.33,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := analysis.Analyze(tc.run)
			if r.FirstFailureMs == nil {
				t.Fatal("no first failure found")
			}
			switch {
			case tc.wantIsolate == nil && r.IsolateMs != nil:
				t.Errorf("isolated after %v ms, want never", *r.IsolateMs)
			case tc.wantIsolate != nil && (r.IsolateMs == nil || *r.IsolateMs != ms2f(*tc.wantIsolate)):
				t.Errorf("isolate %v, want %v", r.IsolateMs, *tc.wantIsolate)
			}
			if d := r.BadShareAfterSignalPct - tc.wantShare; d > 0.5 || d < -0.5 {
				t.Errorf("bad share after signal %.2f%%, want %.2f%%", r.BadShareAfterSignalPct, tc.wantShare)
			}
		})
	}
}

func ms2f(d time.Duration) float64 { return analysis.Ms(d) }

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

// TestMediansAndVerdicts checks the statistics the tables and targets are judged on.
func TestMediansAndVerdicts(t *testing.T) {
	if s := analysis.StatOf([]float64{5, 1, 3}); s != (analysis.Stat{Median: 3, Min: 1, Max: 5}) {
		t.Errorf("statOf odd = %+v", s)
	}
	if s := analysis.StatOf([]float64{4, 1, 3, 10}); s.Median != 3.5 || s.Min != 1 || s.Max != 10 {
		t.Errorf("statOf even = %+v", s)
	}
	var rs []analysis.Result
	add := func(st string, rep int, ok, p99, bad float64) {
		rs = append(rs, analysis.Result{Mode: "real", Scenario: "blackhole", Strategy: st, Rep: rep, SuccessPct: ok, P99Ms: p99, BadShareWhileFaultyPct: bad})
	}
	for rep, v := range []float64{100, 100, 99} {
		add("detour", rep+1, v, []float64{100, 900, 115}[rep], []float64{0.05, 3, 0.02}[rep])
		add("oracle", rep+1, 100, 90, 0)
		add("java-5", rep+1, 99, 400, 2)
	}
	ms := analysis.Medians(rs)
	if len(ms) != 3 || ms[0].Strategy != "detour" || ms[0].Runs != 3 || ms[0].P99Ms.Median != 115 || ms[0].P99Ms.Max != 900 {
		t.Fatalf("medians %+v", ms)
	}
	vs := analysis.Verdicts(ms)
	if len(vs) != 2 {
		t.Fatalf("verdicts %+v", vs)
	}
	o, j := vs[0], vs[1]
	if o.Against != "oracle" || !o.SuccessPass || !o.P99Pass || !o.BadSharePass || o.P99Ratio != 1.28 {
		t.Errorf("against the oracle: %+v", o)
	}
	// A share the records cannot tell meets no target.
	if analysis.ShareWithin(analysis.UnknownShare, analysis.TargetBadSharePct) || analysis.ShareWithin(analysis.UnknownShare, 5) || analysis.FmtPct(analysis.UnknownShare) != "n/a" {
		t.Errorf("an unknown share passes a target or prints as a number")
	}
	if j.Against != "java-5" || !j.Better || j.P99Ratio != 0.29 {
		t.Errorf("against java-5: %+v", j)
	}
}

// TestRealScenariosAndJavaRecords checks the real-broker schedules and the conversion of the Java
// producer's records onto the run's clock.
func TestRealScenariosAndJavaRecords(t *testing.T) {
	for _, n := range scenario.RealNames {
		sc, err := scenario.BuildRealScenario(n, 20*time.Second)
		if err != nil || len(sc.Actions) == 0 || len(sc.Faulty) == 0 || sc.Onset != 5*time.Second {
			t.Errorf("%s: %+v, %v", n, sc, err)
		}
	}
	sc, _ := scenario.BuildRealScenario("rolling", 20*time.Second)
	p := scenario.Params{Duration: 20 * time.Second, Rate: 200, Senders: 4, Drain: 10 * time.Second}
	d := &scenario.RunData{Scenario: sc, Params: p, Applied: []scenario.AppliedAction{
		{Note: "pod terminating", Scheduled: 5 * time.Second, Applied: 5 * time.Second, Done: 5 * time.Second},
		{Note: "graceful stop", Scheduled: 7 * time.Second, Applied: 7 * time.Second, Done: 9 * time.Second},
		{Note: "new broker registered", Applied: 9 * time.Second, Done: 17 * time.Second, Chained: true},
	}}
	d.Applied[0].Applied = 5200 * time.Millisecond // the pod mark came 200 ms late
	d.SettleFaulty()
	if w := d.Scenario.Faulty; len(w) != 1 || w[0].From != 5200*time.Millisecond || w[0].To != 17*time.Second {
		t.Errorf("rolling faulty span %+v, want 5.2 s (the mark, applied late) to 17 s (the new broker registered)", w)
	}
	fl, _ := scenario.BuildRealScenario("flapping", 20*time.Second)
	fd := &scenario.RunData{Scenario: fl, Params: p}
	for _, a := range fl.Actions {
		fd.Applied = append(fd.Applied, scenario.AppliedAction{Note: a.Note, Scheduled: a.At, Applied: a.At + 50*time.Millisecond})
	}
	fd.SettleFaulty()
	if w := fd.Scenario.Faulty; w[0].From != 5050*time.Millisecond || w[0].To != 8050*time.Millisecond || w[len(w)-1].To != 20*time.Second {
		t.Errorf("flapping faulty spans not moved to the applied steps: %+v", w)
	}
	if len(sc.Faulty) != 1 || sc.Faulty[0].To != 20*time.Second {
		t.Errorf("settleFaulty changed the shared scenario: %+v", sc.Faulty)
	}

	t0 := time.UnixMilli(1_700_000_000_000)
	sends := []rmqtest.JavaSend{{
		Slot: 10, StartMs: t0.UnixMilli() + 60, Start: time.UnixMilli(t0.UnixMilli() + 60), LatencyUs: 450_000, OK: true,
		Broker: scenario.BrokerA, Brokers: []string{scenario.BadBroker, scenario.BrokerA},
		Attempts: []rmqtest.JavaAttempt{{Broker: scenario.BadBroker, StartUs: 10, LatencyUs: 400_000}, {Broker: scenario.BrokerA, StartUs: 400_100, LatencyUs: 49_000, OK: true}},
	}}
	realenv.JavaRecords(d, sends, t0)
	s := d.Sends[0]
	if s.Due != 50*time.Millisecond || s.Start != 60*time.Millisecond || s.Latency != 450*time.Millisecond || !analysis.TouchesBad(&s) {
		t.Errorf("send %+v", s)
	}
	if len(d.Attempts) != 2 || d.Attempts[0].OK || d.Attempts[0].End != 460*time.Millisecond+10*time.Microsecond || !d.Attempts[1].OK {
		t.Errorf("attempts %+v", d.Attempts)
	}
}
