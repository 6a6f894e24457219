package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// report is results.json.
type report struct {
	Command    string            `json:"command"`
	Params     paramsJSON        `json:"params"`
	Machine    machine           `json:"machine"`
	Scenarios  []scenarioJSON    `json:"scenarios"`
	Strategies []strategyJSON    `json:"strategies"`
	Definition map[string]string `json:"definitions"`
	Results    []result          `json:"results"`
}

type paramsJSON struct {
	DurationMs      float64  `json:"durationMs"`
	Rate            int      `json:"ratePerSec"`
	Senders         int      `json:"senders"`
	ScheduledPerRun int      `json:"scheduledPerRun"`
	DrainMs         float64  `json:"drainMs"`
	BodyBytes       int      `json:"bodyBytes"`
	Brokers         []string `json:"brokers"`
	BadBroker       string   `json:"badBroker"`
	QueuesPerBroker int      `json:"queuesPerBroker"`
	ScheduleSlackMs float64  `json:"scheduleSlackMs"`
}

type machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Date      string `json:"date"`
}

type scenarioJSON struct {
	Name        string       `json:"name"`
	Description string       `json:"description"`
	OnsetMs     float64      `json:"onsetMs"`
	HealMs      float64      `json:"healMs,omitempty"`
	FaultyMs    [][2]float64 `json:"faultyMs"`
}

type strategyJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

var definitions = map[string]string{
	"latency":                "time of the Send/SendSync call, failed sends included; percentiles are nearest-rank over every issued send of the run",
	"badSharePct":            "share of sends with at least one attempt on the bad broker",
	"badShareAfterSignalPct": "the same among sends started after the first signal and, in the recovery scenario, before the broker healed (target: <= 1 % for detour)",
	"badShareWhileFaultyPct": "the same among sends started while the bad broker was faulty (down, slow, marked or closed)",
	"firstFailureMs":         "end of the first attempt on the bad broker, at or after the onset, that failed or took >= 500 ms",
	"onsetMs":                "when the first step of the fault schedule was carried out (a moment after it was due)",
	"signalMs":               "first failure; in the terminating scenario the pod mark (onset); the onset if no failure was seen",
	"detectMs":               "first failure - onset",
	"isolateMs":              "signal -> start of the last attempt on the bad broker that is followed by a quiet span (min(1 s, duration/10)) with no attempt on it and at least rate*quiet/2 attempts on the others; 0 if it got no attempt after the onset; null if that never happened",
	"recoverMs":              "recovery scenario: heal -> start of the first successful attempt on the bad broker; null if none within the run",
	"cutShort":               "fewer sends issued than scheduled (senders stuck past the end of the run), or sends abandoned after the drain time",
}

func writeJSON(path string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func newReport(cmd string, p params, scs []scenario, strategies []string, rs []result) *report {
	rep := &report{
		Command: cmd,
		Params: paramsJSON{
			DurationMs: ms(p.Duration), Rate: p.Rate, Senders: p.Senders, ScheduledPerRun: p.scheduled(),
			DrainMs: ms(p.Drain), BodyBytes: p.BodyLen, Brokers: brokerNames, BadBroker: badBroker, QueuesPerBroker: queues,
			ScheduleSlackMs: ms(p.ScheduleSlack),
		},
		Machine: machine{
			CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			Date: time.Now().UTC().Format(time.RFC3339),
		},
		Definition: definitions,
		Results:    rs,
	}
	for _, sc := range scs {
		sj := scenarioJSON{Name: sc.Name, Description: sc.Description, OnsetMs: ms(sc.Onset), HealMs: ms(sc.Heal)}
		for _, w := range sc.Faulty {
			sj.FaultyMs = append(sj.FaultyMs, [2]float64{ms(w.From), ms(w.To)})
		}
		rep.Scenarios = append(rep.Scenarios, sj)
	}
	for _, s := range strategies {
		rep.Strategies = append(rep.Strategies, strategyJSON{Name: s, Description: strategyDescriptions[s]})
	}
	return rep
}

func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fmtOpt(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmtMs(*v)
}

func mark(ok bool) string {
	if ok {
		return "pass"
	}
	return "**FAIL**"
}

// writeMarkdown writes results.md: what was compared and how, a summary of detour against the
// targets, and one table per scenario.
func writeMarkdown(path string, rep *report, charts map[string][]string) error {
	var b strings.Builder
	p := rep.Params
	fmt.Fprintf(&b, "# Fault benchmark\n\n")
	fmt.Fprintf(&b, "What was compared: six ways of producing to three RocketMQ brokers (%s, %d write queues each) "+
		"while one of them, `%s`, goes bad in six ways. Each strategy gets the same workload: %d messages of %d bytes "+
		"scheduled at a steady %d msg/s over %.0f s, sent synchronously by %d concurrent senders that share the schedule "+
		"(a sender that falls behind sends at once; nothing is issued after the %.0f s, so a strategy whose senders are "+
		"stuck issues fewer and is marked cut short). Every run starts fresh brokersim brokers and a name server on "+
		"127.0.0.1 (real RocketMQ remoting over TCP), warms up its connections outside the measurement, and runs the same "+
		"fault schedule, applied at fixed offsets from the start of the run. Every send and every attempt is recorded; "+
		"the tables below are computed from those records.\n\n",
		strings.Join(p.Brokers, ", "), p.QueuesPerBroker, p.BadBroker, p.ScheduledPerRun, p.BodyBytes, p.Rate,
		p.DurationMs/1000, p.Senders, p.DurationMs/1000)
	fmt.Fprintf(&b, "Reproduce with `%s` (or `make bench`, which also runs the Go benchmarks). "+
		"Run on %d CPUs, %s %s/%s, %s. The raw numbers, definitions and the applied fault timeline of every run are in "+
		"[results.json](results.json).\n\n", rep.Command, rep.Machine.CPUs, rep.Machine.GoVersion, rep.Machine.OS,
		rep.Machine.Arch, rep.Machine.Date)

	b.WriteString("Strategies:\n\n")
	for _, s := range rep.Strategies {
		fmt.Fprintf(&b, "- `%s`: %s.\n", s.Name, s.Description)
	}
	b.WriteString("\nScenarios:\n\n")
	for _, s := range rep.Scenarios {
		fmt.Fprintf(&b, "- `%s`: %s.\n", s.Name, s.Description)
	}

	b.WriteString("\n## detour against the targets\n\n")
	fmt.Fprintf(&b, "Targets: 100 %% success; p99 within %.1f× the oracle's; at most %.0f %% of sends reach the bad broker "+
		"after the first signal (the first failed or ≥ 500 ms attempt on it; in `terminating`, the pod mark).\n\n",
		targetP99Factor, targetBadSharePct)
	b.WriteString("| scenario | success % | target | p99 ms (oracle) | ×oracle | target | bad share after signal % | target |\n")
	b.WriteString("|---|---:|---|---:|---:|---|---:|---|\n")
	for _, r := range rep.Results {
		if r.Targets == nil {
			continue
		}
		t := r.Targets
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s (%s) | %.2f | %s | %.2f | %s |\n", r.Scenario, r.SuccessPct, mark(t.SuccessPass),
			fmtMs(r.P99Ms), fmtMs(t.OracleP99Ms), t.P99VsOracle, mark(t.P99Pass), r.BadShareAfterSignalPct, mark(t.BadSharePass))
	}

	writeMisses(&b, rep)

	b.WriteString("\n## Results per scenario\n\n")
	b.WriteString("Latencies in ms. *bad share*: % of sends with an attempt on the bad broker — over the run / after the " +
		"first signal / while it was faulty. *detect*: onset → first failure; *isolate*: signal → last send to it before " +
		"it went quiet; *recover*: healed → first successful send to it; *noise p99*: how late 1 ms sleeps woke up " +
		"during the run (the machine's own scheduling noise, part of every latency here). See `definitions` in " +
		"results.json.\n\n")
	for _, sc := range rep.Scenarios {
		fmt.Fprintf(&b, "### %s\n\n%s.\n\n", sc.Name, sc.Description)
		b.WriteString("| strategy | sends issued / scheduled | success % | p50 | p99 | p99.9 | max | bad share % (run / after signal / faulty) | detect | isolate | recover | noise p99 | targets | notes |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|\n")
		for _, r := range rep.Results {
			if r.Scenario != sc.Name {
				continue
			}
			var notes []string
			if r.CutShort {
				notes = append(notes, "cut short")
			}
			if r.Abandoned > 0 {
				notes = append(notes, fmt.Sprintf("%d abandoned", r.Abandoned))
			}
			notes = append(notes, r.Checks...)
			tg := "—"
			if t := r.Targets; t != nil {
				tg = fmt.Sprintf("success %s, p99 %s, share %s", mark(t.SuccessPass), mark(t.P99Pass), mark(t.BadSharePass))
			}
			recov, isolate := "—", "—"
			if sc.HealMs > 0 && r.Strategy != "oracle" {
				recov = fmtOpt(r.RecoverMs)
			}
			if r.Strategy != "oracle" {
				isolate = fmtOpt(r.IsolateMs)
			}
			detect := "—"
			if r.DetectMs != nil {
				detect = fmtMs(*r.DetectMs)
			}
			fmt.Fprintf(&b, "| %s | %d / %d | %.2f | %s | %s | %s | %s | %.2f / %.2f / %.2f | %s | %s | %s | %s | %s | %s |\n",
				r.Strategy, r.Issued, r.Scheduled, r.SuccessPct, fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtMs(r.P999Ms), fmtMs(r.MaxMs),
				r.BadSharePct, r.BadShareAfterSignalPct, r.BadShareWhileFaultyPct, detect, isolate, recov,
				fmtMs(r.NoiseP99Ms), tg,
				strings.Join(notes, "; "))
		}
		b.WriteString("\n")
		for _, c := range charts[sc.Name] {
			fmt.Fprintf(&b, "![%s](%s)\n", filepath.Base(c), filepath.Base(c))
		}
		if len(charts[sc.Name]) > 0 {
			b.WriteString("\n")
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// writeRaw writes a run's sends and attempts as CSV files, for looking into a result.
func writeRaw(dir string, d *runData) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("seq,due_ms,start_ms,latency_ms,ok,broker,tried,err\n")
	for _, s := range d.Sends {
		fmt.Fprintf(&b, "%d,%.3f,%.3f,%.3f,%t,%s,%s,%q\n", s.Seq, ms(s.Due), ms(s.Start), ms(s.Latency), s.OK, s.Broker,
			strings.Join(s.Tried, " "), s.Err)
	}
	base := filepath.Join(dir, d.Scenario.Name+"-"+d.Strategy)
	if err := os.WriteFile(base+"-sends.csv", []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("broker,start_ms,end_ms,ok\n")
	for _, a := range d.Attempts {
		fmt.Fprintf(&b, "%s,%.3f,%.3f,%t\n", a.Broker, ms(a.Start), ms(a.End), a.OK)
	}
	return os.WriteFile(base+"-attempts.csv", []byte(b.String()), 0o644)
}

// writeMisses explains, from the run's own records, every target detour missed.
func writeMisses(b *strings.Builder, rep *report) {
	var lines []string
	for _, r := range rep.Results {
		t := r.Targets
		if t == nil {
			continue
		}
		if !t.SuccessPass {
			l := fmt.Sprintf("- **%s, success**: %d of %d issued sends failed", r.Scenario, r.Failed, r.Issued)
			if r.Issued < r.Scheduled {
				l += fmt.Sprintf(" and %d scheduled sends were never issued", r.Scheduled-r.Issued)
			}
			for _, e := range r.Errors {
				l += fmt.Sprintf("; %d× `%s`", e.Count, e.Text)
			}
			lines = append(lines, l+".")
		}
		if !t.P99Pass && r.Slow != nil {
			s := r.Slow
			l := fmt.Sprintf("- **%s, p99**: detour's p99 is %s ms, %.2f× the oracle's %s ms. Of detour's %d sends slower "+
				"than %s ms, %d reached %s, %d needed a retry, %d started before the fault's onset (when nothing was "+
				"wrong) and %d neither reached %s nor needed a retry; the oracle had %d sends above that line (1 %% of "+
				"its sends, by definition). Scheduling noise of the machine during the runs (p99 lateness of a 1 ms "+
				"sleep): detour's run %s ms, the oracle's %s ms.",
				r.Scenario, fmtMs(r.P99Ms), t.P99VsOracle, fmtMs(t.OracleP99Ms), s.Sends, fmtMs(s.ThresholdMs), s.TouchedBad,
				badBroker, s.Retried, s.BeforeOnset, s.Unexplained, badBroker, s.OracleSlower, fmtMs(r.NoiseP99Ms),
				fmtMs(oracleNoise(rep, r.Scenario)))
			if 2*s.Unexplained >= s.Sends {
				l += " Most of the excess is in sends that neither reached " + badBroker + " nor needed a retry, which " +
					"the fault does not explain: it is run-to-run variation of sub-millisecond loopback sends on this " +
					"machine rather than a cost of the fault."
			} else {
				l += " Most of the excess is in sends that reached " + badBroker + " or needed a retry: it is a cost of the fault."
			}
			lines = append(lines, l)
		}
		if !t.BadSharePass {
			a := r.AfterSignal
			l := fmt.Sprintf("- **%s, bad-broker share**: %.2f %% of sends after the signal reached %s: %d sends, "+
				"%d of them while it was faulty (%.2f %% of sends started in its faulty spans) and %d while it was "+
				"healthy; %d of them failed.", r.Scenario, r.BadShareAfterSignalPct, badBroker, a.BadSends, a.WhileFaulty,
				r.BadShareWhileFaultyPct, a.BadSends-a.WhileFaulty, a.Failed)
			if len(r.Isolations) > 0 {
				var ch []string
				for _, c := range r.Isolations {
					verb := "left isolation"
					if c.Isolated {
						verb = "isolated (" + c.Reason + ")"
					}
					ch = append(ch, fmt.Sprintf("%s at %.1f s", verb, c.AtMs/1000))
				}
				l += " The runtime reported " + badBroker + " " + strings.Join(ch, ", ") + "."
			}
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\nWhy targets were missed, from this run's records:\n\n")
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n")
}

func oracleNoise(rep *report, scenario string) float64 {
	for _, r := range rep.Results {
		if r.Scenario == scenario && r.Strategy == "oracle" {
			return r.NoiseP99Ms
		}
	}
	return 0
}
