package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
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
	// HedgeChecks judge the hedging rows on medians (issue 50's targets).
	HedgeChecks []analysis.HedgeCheck `json:"hedgeChecks,omitempty"`
	Results     []analysis.Result     `json:"results"`
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
	"slowSharePct": "share of sends slower than twice the p99 of the matching oracle's run of the same repetition " +
		"(slowShareAgainst: oracle+hedge for detour+hedge and itself, grpc+oracle+hedge for every grpc row, oracle for every other row); " +
		"n/a when that oracle did not run or the scenario has no bad broker; its median is over the runs that have one",
	"extraSendsPct":   "hedges sent by detour's runtime over issued sends (0 for strategies that never hedge)",
	"copiesStoredPct": "sends of which both the attempt and its hedge stored the message (two copies, one message id), over issued sends",
	"median":          "median over the repetitions (mean of the middle two for an even count), with min and max; targets and comparisons are judged on medians",
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
	rep.HedgeChecks = analysis.HedgeVerdicts(rep.Medians)
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
