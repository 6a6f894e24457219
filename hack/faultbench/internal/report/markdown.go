package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

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
	writeHedgeVerdicts(b, rep, mode)
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
		"*isolate*: signal → last send to it before it went quiet (runs in which that happened). " + slowColumns + "\n\n")
	b.WriteString("| scenario | strategy | issued % | success % | p50 | p99 | bad while faulty % | bad after signal % | bad before onset % | isolate | " +
		"slow % | matched oracle | extra sends % | copies stored | noise p99 | notes |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|\n")
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
		if strategy.IsOracle(md.Strategy) || md.NoBadBroker {
			iso = "—"
		}
		matched := md.SlowAgainst
		if md.NoBadBroker {
			matched = "—"
		}
		var notes []string
		if md.CutShort > 0 {
			notes = append(notes, fmt.Sprintf("%d run(s) cut short", md.CutShort))
		}
		if md.FailedChecks > 0 {
			notes = append(notes, fmt.Sprintf("%d run(s) with failed checks", md.FailedChecks))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", md.Scenario, md.Strategy,
			analysis.FmtStat(md.IssuedPct, analysis.FmtPct), analysis.FmtStat(md.SuccessPct, analysis.FmtPct), analysis.FmtStat(md.P50Ms, fmtMs), analysis.FmtStat(md.P99Ms, fmtMs),
			analysis.FmtStat(md.BadShareWhileFaultyPct, analysis.FmtPct), analysis.FmtStat(md.BadShareAfterSignalPct, analysis.FmtPct),
			analysis.FmtStat(md.BadShareBeforeOnsetPct, analysis.FmtPct), iso,
			analysis.FmtStat(md.SlowSharePct, analysis.FmtPct), matched, analysis.FmtStat(md.ExtraSendsPct, analysis.FmtPct),
			fmtCopies(md), analysis.FmtStat(md.NoiseP99Ms, fmtMs), strings.Join(notes, "; "))
	}
}

// slowColumns explains the slow share, extra sends and copies columns.
const slowColumns = "*slow*: % of sends slower than twice the p99 of the matched oracle's run of the same repetition " +
	"(`oracle+hedge` for `detour+hedge` and itself, `grpc+oracle+hedge` for every grpc row, `oracle` for every other row; " +
	"n/a where it did not run or the scenario has no bad broker); *extra sends*: hedges sent over sends; *copies stored*: " +
	"sends both of whose attempts stored the message (count, and % of sends)."

// fmtCopies formats a median count of copies stored with its share of sends.
func fmtCopies(md analysis.Median) string {
	return analysis.FmtStat(md.CopiesStored, func(v float64) string { return fmt.Sprintf("%.0f", v) }) +
		" (" + analysis.FmtStat(md.CopiesStoredPct, analysis.FmtPct) + " %)"
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
		"during the run; *load*: the machine's 1-minute load average when the run ended. *slow / extra / copies*: the slow " +
		"share against the matched oracle (see the medians), extra sends and copies stored, each in % of sends.\n\n")
	b.WriteString("| mode | scenario | # | strategy | issued / scheduled | success % | p50 | p99 | p99.9 | max | bad share % (run / after signal / faulty) | " +
		"slow / extra / copies % | detect | isolate | recover | noise p99 | load | notes |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|\n")
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
		if !strategy.IsOracle(r.Strategy) {
			isolate = FmtOpt(r.IsolateMs)
		}
		if r.DetectMs != nil {
			detect = fmtMs(*r.DetectMs)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %d / %d | %.2f | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s | %s | %s | %s | %.0f | %s |\n",
			r.Mode, r.Scenario, r.Rep, r.Strategy, r.Issued, r.Scheduled, r.SuccessPct, fmtMs(r.P50Ms), fmtMs(r.P99Ms),
			fmtMs(r.P999Ms), fmtMs(r.MaxMs), analysis.FmtPct(r.BadSharePct), analysis.FmtPct(r.BadShareAfterSignalPct),
			analysis.FmtPct(r.BadShareWhileFaultyPct), analysis.FmtPct(r.SlowSharePct), analysis.FmtPct(r.ExtraSendsPct),
			analysis.FmtPct(r.CopiesStoredPct), detect,
			isolate, recov, fmtMs(r.NoiseP99Ms), r.LoadAvg1, strings.Join(notes, "; "))
	}
}
