package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// Settings are how the benchmark was run, as its report states them.
type Settings struct {
	Params     scenario.Params
	Strategies []string
	// Modes are "real" (a real RocketMQ cluster) and "sim" (brokersim), in that order.
	Modes []string
	// Reps is how many times every scenario × strategy runs, interleaved.
	Reps int
	// Real* are the real-broker mode's parameters and strategies.
	RealParams     scenario.Params
	RealStrategies []string
	Quick          bool
	// Command is the command line that reproduces the run, for the report.
	Command string
}

// Report is results.json.
type Report struct {
	Command    string      `json:"command"`
	Params     paramsJSON  `json:"params"`
	RealParams *paramsJSON `json:"realParams,omitempty"`
	Reps       int         `json:"reps"`
	Quick      bool        `json:"quick"`
	// Notes say how the run was made where the command line does not (added by -rewrite -note).
	Notes      []string          `json:"notes,omitempty"`
	Machine    machine           `json:"machine"`
	Scenarios  []ScenarioJSON    `json:"scenarios"`
	Strategies []StrategyJSON    `json:"strategies"`
	Definition map[string]string `json:"definitions"`
	// Medians summarize the repetitions of every mode × scenario × strategy.
	Medians []analysis.Median `json:"medians"`
	// Verdicts judge detour on medians: against the targets and against the Java producers.
	Verdicts []analysis.Verdict `json:"verdicts"`
	Results  []analysis.Result  `json:"results"`
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
	// LoadAvgStart and LoadAvgNow are /proc/loadavg (1, 5, 15 min) when the run started and when
	// this file was written: other work on the machine competes with every run.
	LoadAvgStart [3]float64 `json:"loadAvgStart"`
	LoadAvgNow   [3]float64 `json:"loadAvgNow"`
	// ElapsedS is the wall time of the whole invocation so far.
	ElapsedS float64 `json:"elapsedS"`
	// NoiseP99Ms is, per mode, the median and range over runs of how late 1 ms sleeps woke up
	// (p99 of each run).
	NoiseP99Ms map[string]analysis.Stat `json:"noiseP99Ms"`
}

// ScenarioJSON is a scenario as results.json describes it.
type ScenarioJSON struct {
	Mode        string       `json:"mode"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	OnsetMs     float64      `json:"onsetMs"`
	HealMs      float64      `json:"healMs,omitempty"`
	FaultyMs    [][2]float64 `json:"faultyMs"`
}

// StrategyJSON is a strategy as results.json describes it.
type StrategyJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

var definitions = map[string]string{
	"latency":                "time of the Send/SendSync/send() call, failed sends included; percentiles are nearest-rank over every issued send of the run",
	"badSharePct":            "share of sends with at least one attempt on the bad broker",
	"badShareAfterSignalPct": "the same among sends started after the first signal and, in the recovery scenario, before the broker healed (information)",
	"badShareWhileFaultyPct": "the same among sends started while the bad broker was faulty (down, stalled, killed, marked terminating or restarting); target <= 1 % for detour",
	"firstFailureMs":         "end of the first attempt on the bad broker, at or after the onset, that failed or took >= 500 ms",
	"onsetMs":                "when the first step of the fault schedule was carried out (a moment after it was due)",
	"signalMs":               "first failure; in the terminating scenario the pod mark (onset); the onset if no failure was seen",
	"detectMs":               "first failure - onset",
	"isolateMs":              "signal -> start of the last attempt on the bad broker that is followed by a quiet span (min(1 s, duration/10)) with no attempt on it and at least rate*quiet/2 attempts on the others; 0 if it got no attempt after the onset; null if that never happened",
	"recoverMs":              "recovery scenario: heal -> start of the first successful attempt on the bad broker; null if none within the run",
	"cutShort":               "fewer sends issued than scheduled (senders stuck past the end of the run), or sends abandoned after the drain time",
	"median":                 "median over the repetitions (mean of the middle two for an even count), with min and max; targets and comparisons are judged on medians",
}

// WriteJSON writes rep as results.json at path.
func WriteJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func paramsOf(p scenario.Params) paramsJSON {
	return paramsJSON{
		DurationMs: analysis.Ms(p.Duration), Rate: p.Rate, Senders: p.Senders, ScheduledPerRun: p.Scheduled(),
		DrainMs: analysis.Ms(p.Drain), BodyBytes: p.BodyLen, Brokers: scenario.BrokerNames, BadBroker: scenario.BadBroker, QueuesPerBroker: scenario.Queues,
		ScheduleSlackMs: analysis.Ms(p.ScheduleSlack),
	}
}

// ScenarioOf describes a scenario of a mode for results.json.
func ScenarioOf(mode string, sc scenario.Scenario) ScenarioJSON {
	sj := ScenarioJSON{Mode: mode, Name: sc.Name, Description: sc.Description, OnsetMs: analysis.Ms(sc.Onset), HealMs: analysis.Ms(sc.Heal)}
	for _, w := range sc.Faulty {
		sj.FaultyMs = append(sj.FaultyMs, [2]float64{analysis.Ms(w.From), analysis.Ms(w.To)})
	}
	return sj
}

// LoadAvg reads the machine's load averages; zeros when it cannot.
func LoadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	_, _ = fmt.Sscan(string(b), &l[0], &l[1], &l[2])
	return l
}

// NewReport builds the report of a benchmark run with settings c that started at started
// (with the load average load0): its scenarios, results, medians, verdicts and machine.
func NewReport(c Settings, scs []ScenarioJSON, rs []analysis.Result, started time.Time, load0 [3]float64) *Report {
	rep := &Report{
		Command: c.Command,
		Params:  paramsOf(c.Params),
		Reps:    c.Reps,
		Quick:   c.Quick,
		Machine: machine{
			CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			Date: time.Now().UTC().Format(time.RFC3339), LoadAvgStart: load0, LoadAvgNow: LoadAvg(),
			ElapsedS: math.Round(time.Since(started).Seconds()), NoiseP99Ms: map[string]analysis.Stat{},
		},
		Scenarios:  scs,
		Definition: definitions,
		Results:    rs,
	}
	if slices.Contains(c.Modes, "real") {
		rp := paramsOf(c.RealParams)
		rep.RealParams = &rp
	}
	seen := map[string]bool{}
	for _, list := range [][]string{c.Strategies, c.RealStrategies} {
		for _, s := range list {
			if !seen[s] {
				seen[s] = true
				rep.Strategies = append(rep.Strategies, StrategyJSON{Name: s, Description: strategy.Descriptions[s]})
			}
		}
	}
	rep.Medians = analysis.Medians(rs)
	rep.Verdicts = analysis.Verdicts(rep.Medians)
	for _, mode := range []string{"sim", "real"} {
		var v []float64
		for _, r := range rs {
			if r.Mode == mode {
				v = append(v, r.NoiseP99Ms)
			}
		}
		if len(v) > 0 {
			rep.Machine.NoiseP99Ms[mode] = analysis.StatOf(v)
		}
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

// FmtOpt formats an optional number of milliseconds; "—" when there is none.
func FmtOpt(v *float64) string {
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

// WriteMarkdown writes results.md: what was compared and how, medians per mode, detour against
// the targets and the Java producers, why it missed any, and every run.
func WriteMarkdown(path string, rep *Report, charts map[string][]string) error {
	var b strings.Builder
	b.WriteString("# Fault benchmark\n\n")
	if rep.Quick {
		b.WriteString("**Quick mode** (`-quick`): one repetition, short real-broker runs, fewer strategies. " +
			"These numbers are a smoke test, not the benchmark.\n\n")
	}
	writeIntro(&b, rep)
	for _, mode := range []string{"real", "sim"} {
		writeMode(&b, rep, mode, charts)
	}
	writeEveryRun(&b, rep)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// writeIntro writes what was compared and how, the modes, the machine and the strategies.
func writeIntro(b *strings.Builder, rep *Report) {
	p := rep.Params
	fmt.Fprintf(b, "What was compared: ways of producing to three RocketMQ brokers (%s, %d write queues each) while one of "+
		"them, `%s`, goes bad. Every strategy gets the same workload: messages of %d bytes scheduled at a steady %d msg/s, "+
		"sent synchronously by %d concurrent senders that share the schedule (a sender that falls behind sends at once; "+
		"nothing is issued after the run's time, so a strategy whose senders are stuck issues fewer and is marked cut "+
		"short), 3 attempts within 3000 ms. Every send and attempt is recorded; the tables are computed from those records. "+
		"Each scenario × strategy ran %d time(s), interleaved (the strategy order rotates between repetitions); tables "+
		"show the median with min–max, and targets are judged on medians.\n\n",
		strings.Join(p.Brokers, ", "), p.QueuesPerBroker, p.BadBroker, p.BodyBytes, p.Rate, p.Senders, rep.Reps)
	for _, n := range rep.Notes {
		fmt.Fprintf(b, "Note: %s\n\n", n)
	}
	b.WriteString("Two modes:\n\n")
	if rp := rep.RealParams; rp != nil {
		fmt.Fprintf(b, "- **real**: one real Apache RocketMQ 5.5.0 cluster (name server and three master brokers, JVMs on "+
			"127.0.0.1, started by `internal/testsupport/rmqtest`), %.0f s runs (%d sends scheduled). Faults act on the bad broker's JVM "+
			"(SIGSTOP, SIGKILL, graceful stop and restart); after every run it is restored (resumed or restarted) and the "+
			"name server must publish the topic on all three brokers again before the next run. RocketMQ's own Java "+
			"producers run in their own JVM (started, warmed up with %d sends, then given the start time) on the same "+
			"shared schedule.\n", rp.DurationMs/1000, rp.ScheduledPerRun, len(scenario.BrokerNames)*scenario.Queues)
	}
	fmt.Fprintf(b, "- **sim**: fresh in-process brokersim brokers and name server for every run (the fast mode), "+
		"%.0f s runs (%d sends scheduled).\n\n", p.DurationMs/1000, p.ScheduledPerRun)
	m := rep.Machine
	fmt.Fprintf(b, "Reproduce with `%s` (`make bench` runs the full benchmark and the Go benchmarks). Run on %d CPUs, %s "+
		"%s/%s, %s, in %.0f min. Machine noise: load average %.2f / %.2f / %.2f at the start and %.2f / %.2f / %.2f at "+
		"the end (other work shared the machine)", rep.Command, m.CPUs, m.GoVersion, m.OS, m.Arch, m.Date, m.ElapsedS/60,
		m.LoadAvgStart[0], m.LoadAvgStart[1], m.LoadAvgStart[2], m.LoadAvgNow[0], m.LoadAvgNow[1], m.LoadAvgNow[2])
	for _, mode := range []string{"real", "sim"} {
		if n, ok := m.NoiseP99Ms[mode]; ok {
			fmt.Fprintf(b, "; p99 lateness of a 1 ms sleep during %s runs %s ms", mode, analysis.FmtStat(n, fmtMs))
		}
	}
	b.WriteString(". Every number, the definitions and the applied fault timeline of every run are in [results.json](results.json).\n\n")

	b.WriteString("Strategies:\n\n")
	for _, s := range rep.Strategies {
		fmt.Fprintf(b, "- `%s`: %s.\n", s.Name, s.Description)
	}
}

// writeMode writes one mode's section: its scenarios, the verdicts and door comparisons, the
// medians and the charts; nothing when the mode has no scenario.
func writeMode(b *strings.Builder, rep *Report, mode string, charts map[string][]string) {
	var scs []ScenarioJSON
	for _, sc := range rep.Scenarios {
		if sc.Mode == mode {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return
	}
	title := map[string]string{"real": "Real RocketMQ brokers", "sim": "brokersim"}[mode]
	fmt.Fprintf(b, "\n## %s\n\nScenarios:\n\n", title)
	for _, sc := range scs {
		fmt.Fprintf(b, "- `%s`: %s.\n", sc.Name, sc.Description)
	}
	writeVerdicts(b, rep, mode)
	writeDoors(b, rep, mode)
	writeGRPC(b, rep, mode)
	writeFacade(b, rep, mode)
	writeMedians(b, rep, mode)
	writeChartLinks(b, scs, mode, charts)
}

// writeMedians writes one mode's table of medians over the repetitions.
func writeMedians(b *strings.Builder, rep *Report, mode string) {
	b.WriteString("\n### Medians\n\nLatencies in ms. *issued*: sends issued of those scheduled (senders stuck in " +
		"slow sends issue fewer; success, latency and shares are over the issued sends). *bad while faulty*: % of sends started while the bad broker was " +
		"faulty that had an attempt on it; *after signal*: the same after the first failure (information); " +
		"*bad before onset*: the same before the fault (about 33 for a round robin over three brokers; near 0 means the " +
		"strategy avoided the bad broker before it went bad, e.g. after slow answers during its warm-up); " +
		"*isolate*: signal → last send to it before it went quiet (runs in which that happened).\n\n")
	b.WriteString("| scenario | strategy | issued % | success % | p50 | p99 | bad while faulty % | bad after signal % | bad before onset % | isolate | noise p99 | notes |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, md := range rep.Medians {
		if md.Mode != mode {
			continue
		}
		iso := "never"
		if md.IsolateMs != nil {
			iso = analysis.FmtStat(*md.IsolateMs, fmtMs)
			if md.Isolated < md.Runs {
				iso += fmt.Sprintf(" (%d of %d runs)", md.Isolated, md.Runs)
			}
		}
		if md.Strategy == "oracle" {
			iso = "—"
		}
		var notes []string
		if md.CutShort > 0 {
			notes = append(notes, fmt.Sprintf("%d run(s) cut short", md.CutShort))
		}
		if md.FailedChecks > 0 {
			notes = append(notes, fmt.Sprintf("%d run(s) with failed checks", md.FailedChecks))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", md.Scenario, md.Strategy,
			analysis.FmtStat(md.IssuedPct, analysis.FmtPct), analysis.FmtStat(md.SuccessPct, analysis.FmtPct), analysis.FmtStat(md.P50Ms, fmtMs), analysis.FmtStat(md.P99Ms, fmtMs),
			analysis.FmtStat(md.BadShareWhileFaultyPct, analysis.FmtPct), analysis.FmtStat(md.BadShareAfterSignalPct, analysis.FmtPct),
			analysis.FmtStat(md.BadShareBeforeOnsetPct, analysis.FmtPct), iso,
			analysis.FmtStat(md.NoiseP99Ms, fmtMs), strings.Join(notes, "; "))
	}
}

// writeChartLinks links one mode's charts and shows the first of each scenario (and the second
// in brokersim mode).
func writeChartLinks(b *strings.Builder, scs []ScenarioJSON, mode string, charts map[string][]string) {
	b.WriteString("\nCharts (the median run of each strategy by p99; dashed lines are the fault steps):\n\n")
	for _, sc := range scs {
		for _, c := range charts[mode+"/"+sc.Name] {
			fmt.Fprintf(b, "- [%s](%s)\n", filepath.Base(c), filepath.Base(c))
		}
	}
	for _, sc := range scs {
		if cs := charts[mode+"/"+sc.Name]; len(cs) > 0 {
			fmt.Fprintf(b, "\n![%s](%s)\n", filepath.Base(cs[0]), filepath.Base(cs[0]))
			if mode == "sim" && len(cs) > 1 {
				fmt.Fprintf(b, "\n![%s](%s)\n", filepath.Base(cs[1]), filepath.Base(cs[1]))
			}
		}
	}
}

// writeEveryRun writes the table of every run.
func writeEveryRun(b *strings.Builder, rep *Report) {
	b.WriteString("\n## Every run\n\nLatencies in ms. *bad share*: % of sends with an attempt on the bad broker — over the run / " +
		"after the first signal / while it was faulty. *detect*: onset → first failure; *isolate*: signal → last send to it " +
		"before it went quiet; *recover*: healed → first successful send to it; *noise p99*: how late 1 ms sleeps woke up " +
		"during the run; *load*: the machine's 1-minute load average when the run ended.\n\n")
	b.WriteString("| mode | scenario | # | strategy | issued / scheduled | success % | p50 | p99 | p99.9 | max | bad share % (run / after signal / faulty) | detect | isolate | recover | noise p99 | load | notes |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Results {
		var notes []string
		if r.CutShort {
			notes = append(notes, "cut short")
		}
		if r.Abandoned > 0 {
			notes = append(notes, fmt.Sprintf("%d abandoned", r.Abandoned))
		}
		notes = append(notes, r.Checks...)
		if len(r.Errors) > 0 && r.Failed > 0 {
			e := r.Errors[0].Text
			if len(e) > 80 {
				e = e[:80] + "…"
			}
			notes = append(notes, fmt.Sprintf("%d× `%s`", r.Errors[0].Count, strings.ReplaceAll(e, "|", "/")))
		}
		recov, isolate, detect := "—", "—", "—"
		if r.RecoverMs != nil {
			recov = fmtMs(*r.RecoverMs)
		}
		if r.Strategy != "oracle" {
			isolate = FmtOpt(r.IsolateMs)
		}
		if r.DetectMs != nil {
			detect = fmtMs(*r.DetectMs)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %d / %d | %.2f | %s | %s | %s | %s | %.2f / %.2f / %.2f | %s | %s | %s | %s | %.0f | %s |\n",
			r.Mode, r.Scenario, r.Rep, r.Strategy, r.Issued, r.Scheduled, r.SuccessPct, fmtMs(r.P50Ms), fmtMs(r.P99Ms),
			fmtMs(r.P999Ms), fmtMs(r.MaxMs), r.BadSharePct, r.BadShareAfterSignalPct, r.BadShareWhileFaultyPct, detect,
			isolate, recov, fmtMs(r.NoiseP99Ms), r.LoadAvg1, strings.Join(notes, "; "))
	}
}

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

// writeFacade compares RocketMQ's default Java producer directly against the name server and
// through detour's name-server facade, scenario by scenario.
func writeFacade(b *strings.Builder, rep *Report, mode string) {
	var rows []string
	for _, sc := range rep.Scenarios {
		if sc.Mode != mode {
			continue
		}
		direct, through := findMedian(rep, mode, sc.Name, "java-default"), findMedian(rep, mode, sc.Name, strategy.Facade)
		if direct == nil || through == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s → %s | %s → %s | %s → %s | %s → %s |", sc.Name,
			analysis.FmtStat(direct.IssuedPct, analysis.FmtPct), analysis.FmtStat(through.IssuedPct, analysis.FmtPct),
			analysis.FmtStat(direct.SuccessPct, analysis.FmtPct), analysis.FmtStat(through.SuccessPct, analysis.FmtPct),
			analysis.FmtStat(direct.P99Ms, fmtMs), analysis.FmtStat(through.P99Ms, fmtMs),
			analysis.FmtStat(direct.BadShareWhileFaultyPct, analysis.FmtPct), analysis.FmtStat(through.BadShareWhileFaultyPct, analysis.FmtPct)))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### The unmodified Java producer through the name-server facade (medians)\n\n"+
		"`java-default` (RocketMQ's producer with default settings, against the name server) → `%s` (the same "+
		"producer, its namesrvAddr pointed at detour's facade, route poll %v). Nothing in the application changes; "+
		"the facade publishes the queues of brokers detour isolates without the write bit. `java-default` keeps "+
		"RocketMQ's 30 s poll: where the name server itself drops the broker (dead: the broker's connection closes; "+
		"rolling: it unregisters), part of the gain is the shorter poll alone; in blackhole, slow and flapping the name "+
		"server keeps publishing the broker, and only the facade hides it.\n\n", strategy.Facade, strategy.FacadeJavaPoll)
	b.WriteString("| scenario | issued % | success % | p99 ms | bad while faulty % |\n|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n")
}

func findMedian(rep *Report, mode, sc, st string) *analysis.Median {
	for i := range rep.Medians {
		m := &rep.Medians[i]
		if m.Mode == mode && m.Scenario == sc && m.Strategy == st {
			return m
		}
	}
	return nil
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

// WriteRaw writes a run's sends and attempts as CSV files, for looking into a result.
func WriteRaw(dir, mode string, d *scenario.RunData) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("seq,due_ms,start_ms,latency_ms,ok,broker,tried,err\n")
	for _, s := range d.Sends {
		fmt.Fprintf(&b, "%d,%.3f,%.3f,%.3f,%t,%s,%s,%q\n", s.Seq, analysis.Ms(s.Due), analysis.Ms(s.Start), analysis.Ms(s.Latency), s.OK, s.Broker,
			strings.Join(s.Tried, " "), s.Err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%d", mode, d.Scenario.Name, d.Strategy, d.Rep))
	if err := os.WriteFile(base+"-sends.csv", []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("broker,start_ms,end_ms,ok\n")
	for _, a := range d.Attempts {
		fmt.Fprintf(&b, "%s,%.3f,%.3f,%t\n", a.Broker, analysis.Ms(a.Start), analysis.Ms(a.End), a.OK)
	}
	return os.WriteFile(base+"-attempts.csv", []byte(b.String()), 0o644)
}
