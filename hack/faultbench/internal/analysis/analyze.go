package analysis

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// badLatency is the attempt latency at which a successful attempt on the bad broker counts as a
// failure signal: just under RocketMQ5's lowest isolating threshold (550 ms), far above any
// healthy loopback send.
const badLatency = 500 * time.Millisecond

// Targets from the design: every detour send succeeds, detour's p99 is within this factor of the
// oracle's, and at most this share of sends reaches the bad broker while it is faulty.
const (
	TargetP99Factor   = 1.3
	TargetBadSharePct = 0.1
)

// ShareWithin reports whether a known share is at most limit.
func ShareWithin(share, limit float64) bool { return share >= 0 && share <= limit }

// badShare is the share of the sends keep selects that reached the bad broker, in percent, as the
// run's records can tell it (see BadSource); unknownShare when they cannot.
func badShare(d *scenario.RunData, keep func(s *scenario.SendRec) bool) float64 {
	n, bad := 0, 0
	for i := range d.Sends {
		s := &d.Sends[i]
		if keep(s) {
			n++
			if d.BadFrom == scenario.BadFromSends && TouchesBad(s) {
				bad++
			}
		}
	}
	switch d.BadFrom {
	case scenario.BadUnknown:
		return unknownShare
	case scenario.BadFromAttempts:
		for _, a := range d.Attempts {
			if a.Broker == scenario.BadBroker && keep(&scenario.SendRec{Start: a.Start}) {
				bad++
			}
		}
		bad = min(bad, n)
	}
	return pct(bad, n)
}

// unknownShare stands for a share the records cannot tell; reports print it as n/a and no target
// is met by it.
const unknownShare = -1

// Result is one scenario × strategy, as results.json holds it. Times are milliseconds; those
// relative to the run are offsets from the start of the measured workload.
type Result struct {
	// Mode is "sim" (brokersim) or "real" (real RocketMQ brokers); Rep counts from 1.
	Mode     string `json:"mode"`
	Scenario string `json:"scenario"`
	Strategy string `json:"strategy"`
	Rep      int    `json:"rep"`

	Scheduled int  `json:"scheduled"`
	Issued    int  `json:"issued"`
	CutShort  bool `json:"cutShort"`
	Abandoned int  `json:"abandoned"`
	Succeeded int  `json:"succeeded"`
	Failed    int  `json:"failed"`

	SuccessPct float64 `json:"successPct"`
	P50Ms      float64 `json:"p50Ms"`
	P99Ms      float64 `json:"p99Ms"`
	P999Ms     float64 `json:"p999Ms"`
	MaxMs      float64 `json:"maxMs"`
	// SendsOver500Ms counts sends that took badLatency or longer.
	SendsOver500Ms int `json:"sendsOver500Ms"`
	// ScheduleLagP99Ms is the p99 of how late sends started against the schedule (senders stuck
	// in slow sends fall behind).
	ScheduleLagP99Ms float64 `json:"scheduleLagP99Ms"`
	// NoiseP99Ms and NoiseMaxMs are how late 1 ms sleeps woke up during the run (p99 and worst):
	// the machine's scheduling noise, which every latency includes.
	NoiseP99Ms float64 `json:"noiseP99Ms"`
	NoiseMaxMs float64 `json:"noiseMaxMs"`
	// LoadAvg1 is the machine's 1-minute load average when the run ended.
	LoadAvg1 float64 `json:"loadAvg1"`

	// Shares of sends with at least one attempt on the bad broker, in percent: over the whole
	// run, among sends started after the fault's onset, after the first signal (until the broker
	// heals, in the recovery scenario), and while the bad broker was in a faulty span.
	BadSharePct float64 `json:"badSharePct"`
	// BadShareBeforeOnsetPct is the share before the fault: about a third for a round robin over
	// three brokers; near 0 means the strategy entered the run avoiding the bad broker already
	// (isolated after slow answers during its warm-up), which flatters its shares during the fault.
	BadShareBeforeOnsetPct float64 `json:"badShareBeforeOnsetPct"`
	BadShareAfterOnsetPct  float64 `json:"badShareAfterOnsetPct"`
	BadShareAfterSignalPct float64 `json:"badShareAfterSignalPct"`
	BadShareWhileFaultyPct float64 `json:"badShareWhileFaultyPct"`
	BadAttempts            int     `json:"badAttempts"`
	// AfterSignal breaks down the sends counted in BadShareAfterSignalPct.
	AfterSignal afterSignal `json:"afterSignalBadSends"`
	// Slow breaks down, for detour, the sends slower than the oracle's p99 in the same scenario.
	Slow *SlowBreakdown `json:"slowerThanOracleP99,omitempty"`
	// SlowSharePct is the share of sends slower than twice the p99 of the matching oracle's run of
	// the same repetition (SlowAgainst; strategy.MatchingOracle), in percent; n/a (-1) when that
	// oracle did not run or the scenario has no bad broker. SlowThresholdMs is the threshold.
	SlowSharePct    float64 `json:"slowSharePct"`
	SlowAgainst     string  `json:"slowShareAgainst"`
	SlowThresholdMs float64 `json:"slowShareThresholdMs,omitempty"`
	// Hedges are the runtime's hedge events; ExtraSendsPct is hedges sent over issued sends and
	// CopiesStoredPct copies stored over issued sends, in percent (0 for strategies that never hedge).
	Hedges          scenario.HedgeCounts `json:"hedges"`
	ExtraSendsPct   float64              `json:"extraSendsPct"`
	CopiesStoredPct float64              `json:"copiesStoredPct"`
	// BadBrokerReceived is the bad broker's own count of send requests during the run.
	BadBrokerReceived int64 `json:"badBrokerReceived"`

	// NoBadBroker: the scenario singles out no broker (all-slow): no bad share, no oracle.
	NoBadBroker bool `json:"noBadBroker,omitempty"`

	OnsetMs float64 `json:"onsetMs"`
	// FirstFailureMs is when the first attempt on the bad broker failed or took badLatency or
	// more (its end); nil if none did.
	FirstFailureMs *float64 `json:"firstFailureMs"`
	// SignalMs is the first signal: the pod mark in the terminating scenario, the first failure
	// elsewhere (the onset when no failure was seen).
	SignalMs float64 `json:"signalMs"`
	// DetectMs is first failure − onset.
	DetectMs *float64 `json:"detectMs"`
	// IsolateMs is signal → start of the last attempt on the bad broker before it got no traffic
	// for a quiet span; nil if that never happened.
	IsolateMs *float64 `json:"isolateMs"`
	// RecoverMs (recovery scenario) is heal → start of the first successful attempt on the bad
	// broker; nil if none came within the run.
	RecoverMs *float64 `json:"recoverMs"`

	Isolations []isoChange      `json:"badBrokerIsolationChanges,omitempty"`
	Timeline   []appliedActionM `json:"timeline"`
	ElapsedMs  float64          `json:"elapsedMs"`

	// Errors are the most frequent send errors (at most three), for failed sends.
	Errors []errCount `json:"errors,omitempty"`

	// Targets apply to the detour strategy only.
	Targets *targets `json:"targets,omitempty"`
	// Checks lists fairness checks that failed (empty when all held).
	Checks []string `json:"failedChecks"`
}

// isoChange is a scenario.IsoRec in milliseconds.
type isoChange struct {
	AtMs     float64 `json:"atMs"`
	Isolated bool    `json:"isolated"`
	Reason   string  `json:"reason,omitempty"`
}

// appliedActionM is scenario.AppliedAction in milliseconds.
type appliedActionM struct {
	Note        string  `json:"note"`
	ScheduledMs float64 `json:"scheduledMs"`
	AppliedMs   float64 `json:"appliedMs"`
}

// errCount is one error text and how many sends ended with it.
type errCount struct {
	Text  string `json:"text"`
	Count int    `json:"count"`
}

// afterSignal counts the sends after the signal that reached the bad broker: all of them, those
// started while it was faulty (the rest went to it while it was healthy, e.g. a flap's up phase),
// and those that failed.
type afterSignal struct {
	BadSends    int `json:"badSends"`
	WhileFaulty int `json:"whileFaulty"`
	Failed      int `json:"failed"`
}

// SlowBreakdown says where a strategy's sends slower than the oracle's p99 come from: sends that
// touched the bad broker, sends that needed a retry, and the rest, which the fault cannot explain.
type SlowBreakdown struct {
	ThresholdMs  float64 `json:"thresholdMs"`
	Sends        int     `json:"sends"`
	TouchedBad   int     `json:"touchedBad"`
	Retried      int     `json:"retried"`
	BeforeOnset  int     `json:"beforeOnset"`
	Unexplained  int     `json:"neitherBadNorRetried"`
	OracleSlower int     `json:"oracleSendsAboveThreshold"`
}

// SlowerThan counts d's sends slower than threshold and where they come from.
func SlowerThan(d *scenario.RunData, threshold time.Duration) SlowBreakdown {
	b := SlowBreakdown{ThresholdMs: Ms(threshold)}
	for i := range d.Sends {
		s := &d.Sends[i]
		if s.Latency <= threshold {
			continue
		}
		b.Sends++
		bad, retried := TouchesBad(s), len(s.Tried) > 1
		if bad {
			b.TouchedBad++
		}
		if retried {
			b.Retried++
		}
		if s.Start < d.Scenario.Onset {
			b.BeforeOnset++
		}
		if !bad && !retried {
			b.Unexplained++
		}
	}
	return b
}

type targets struct {
	OracleP99Ms  float64 `json:"oracleP99Ms"`
	P99VsOracle  float64 `json:"p99VsOracle"`
	SuccessPass  bool    `json:"success100"`
	P99Pass      bool    `json:"p99Within1_5xOracle"`
	BadSharePass bool    `json:"badShareWhileFaultyAtMost1Pct"`
}

// Ms is d in milliseconds, rounded to the microsecond.
func Ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func msp(d time.Duration) *float64 { v := Ms(d); return &v }

// Percentile is the nearest-rank percentile of sorted values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(10000*float64(n)/float64(of)) / 100
}

// TouchesBad says whether a send had an attempt on the bad broker.
func TouchesBad(s *scenario.SendRec) bool { return slices.Contains(s.Tried, scenario.BadBroker) }

// Analyze computes a run's result.
func Analyze(d *scenario.RunData) Result {
	sc := d.Scenario
	// The onset is when the first step of the schedule was carried out (a moment after it was
	// due): a send that started before that could not have known.
	onset := d.Onset()
	r := Result{
		Scenario: sc.Name, Strategy: d.Strategy,
		Scheduled: d.Params.Scheduled(), Issued: len(d.Sends), Abandoned: d.Abandoned,
		OnsetMs: Ms(onset), NoBadBroker: sc.NoBadBroker, ElapsedMs: Ms(d.Elapsed), BadBrokerReceived: d.BadSendsReceived,
		Checks: []string{},
	}
	for _, c := range d.Isos {
		r.Isolations = append(r.Isolations, isoChange{AtMs: Ms(c.At), Isolated: c.Isolated, Reason: c.Reason})
	}
	r.CutShort = r.Issued < r.Scheduled || r.Abandoned > 0
	for _, a := range d.Applied {
		r.Timeline = append(r.Timeline, appliedActionM{Note: a.Note, ScheduledMs: Ms(a.Scheduled), AppliedMs: Ms(a.Applied)})
	}
	measureLatencies(&r, d)
	measureHedges(&r, d)
	r.SlowSharePct, r.SlowAgainst = unknownShare, strategy.MatchingOracle(d.Strategy)
	signal := measureDetection(&r, d, onset)
	measureBadShares(&r, d, onset, signal)
	// Without a bad broker (all-slow) there is nothing to isolate.
	if at, ok := isolatedAt(d); ok && !sc.NoBadBroker {
		r.IsolateMs = msp(max(0, at-signal))
	}
	if sc.Heal > 0 {
		for _, a := range d.Attempts {
			if a.Broker == scenario.BadBroker && a.OK && a.Start >= sc.Heal {
				r.RecoverMs = msp(a.Start - sc.Heal)
				break
			}
		}
	}
	r.Checks = append(r.Checks, fairnessChecks(&r, d)...)
	return r
}

// measureLatencies fills r's outcome counts, latency and schedule-lag percentiles, top errors
// and the machine's noise.
func measureLatencies(r *Result, d *scenario.RunData) {
	lat := make([]time.Duration, 0, len(d.Sends))
	lag := make([]time.Duration, 0, len(d.Sends))
	for i := range d.Sends {
		s := &d.Sends[i]
		lat = append(lat, s.Latency)
		lag = append(lag, max(0, s.Start-s.Due))
		if s.OK {
			r.Succeeded++
		} else {
			r.Failed++
		}
		if s.Latency >= badLatency {
			r.SendsOver500Ms++
		}
	}
	slices.Sort(lat)
	slices.Sort(lag)
	r.Errors = topErrors(d.Sends, 3)
	r.SuccessPct = pct(r.Succeeded, r.Issued)
	r.P50Ms, r.P99Ms, r.P999Ms = Ms(Percentile(lat, 50)), Ms(Percentile(lat, 99)), Ms(Percentile(lat, 99.9))
	if len(lat) > 0 {
		r.MaxMs = Ms(lat[len(lat)-1])
	}
	r.ScheduleLagP99Ms = Ms(Percentile(lag, 99))
	noise := slices.Clone(d.Noise)
	slices.Sort(noise)
	r.NoiseP99Ms = Ms(Percentile(noise, 99))
	if len(noise) > 0 {
		r.NoiseMaxMs = Ms(noise[len(noise)-1])
	}
}

// measureHedges fills r's hedge counts and what they add over the issued sends.
func measureHedges(r *Result, d *scenario.RunData) {
	r.Hedges = d.Hedges
	r.ExtraSendsPct = pct(d.Hedges.Sent, r.Issued)
	r.CopiesStoredPct = pct(d.Hedges.CopyStored, r.Issued)
}

// SlowFactor is how many times the matching oracle's p99 a send must take to count as slow.
const SlowFactor = 2

// SlowShare is the share of sends slower than threshold, in percent.
func SlowShare(sends []scenario.SendRec, threshold time.Duration) float64 {
	n := 0
	for i := range sends {
		if sends[i].Latency > threshold {
			n++
		}
	}
	return pct(n, len(sends))
}

// ApplySlowShares sets the slow share of every result of one scenario: its sends slower than
// SlowFactor × the p99 of the matching oracle's run of the same repetition. runs are the runs the
// results were computed from; a result whose oracle did not run, or of a scenario without a bad
// broker, keeps n/a.
func ApplySlowShares(rs []Result, runs []*scenario.RunData) {
	type key struct {
		strategy string
		rep      int
	}
	by := map[key]*scenario.RunData{}
	for _, d := range runs {
		by[key{d.Strategy, d.Rep}] = d
	}
	for i := range rs {
		r := &rs[i]
		d, o := by[key{r.Strategy, r.Rep}], by[key{r.SlowAgainst, r.Rep}]
		if d == nil || o == nil || d.Scenario.NoBadBroker || len(o.Sends) == 0 {
			continue
		}
		lat := make([]time.Duration, 0, len(o.Sends))
		for _, s := range o.Sends {
			lat = append(lat, s.Latency)
		}
		slices.Sort(lat)
		th := SlowFactor * Percentile(lat, 99)
		r.SlowThresholdMs, r.SlowSharePct = Ms(th), SlowShare(d.Sends, th)
	}
}

// measureDetection counts the attempts on the bad broker, finds the first failure (the earliest
// end of a failed or slow attempt on it in the fault) and returns the signal: the first failure,
// or the onset when there was none or the scenario announces itself (terminating).
func measureDetection(r *Result, d *scenario.RunData, onset time.Duration) time.Duration {
	var firstFailure time.Duration = -1
	for _, a := range d.Attempts {
		if a.Broker != scenario.BadBroker {
			continue
		}
		r.BadAttempts++
		if a.End >= onset && (!a.OK || a.End-a.Start >= badLatency) && (firstFailure < 0 || a.End < firstFailure) {
			firstFailure = a.End
		}
	}
	signal := onset
	if firstFailure >= 0 {
		r.FirstFailureMs = msp(firstFailure)
		r.DetectMs = msp(firstFailure - onset)
		if d.Scenario.Name != "terminating" {
			signal = firstFailure
		}
	}
	r.SignalMs = Ms(signal)
	return signal
}

// measureBadShares fills the shares of sends that touched the bad broker, overall and around the
// onset and the signal, and what became of those after the signal.
func measureBadShares(r *Result, d *scenario.RunData, onset, signal time.Duration) {
	sc := d.Scenario
	if sc.NoBadBroker {
		r.BadSharePct, r.BadShareAfterOnsetPct, r.BadShareBeforeOnsetPct = unknownShare, unknownShare, unknownShare
		r.BadShareAfterSignalPct, r.BadShareWhileFaultyPct = unknownShare, unknownShare
		return
	}
	share := func(keep func(s *scenario.SendRec) bool) float64 { return badShare(d, keep) }
	r.BadSharePct = share(func(*scenario.SendRec) bool { return true })
	r.BadShareAfterOnsetPct = share(func(s *scenario.SendRec) bool { return s.Start >= onset })
	r.BadShareBeforeOnsetPct = share(func(s *scenario.SendRec) bool { return s.Start < onset })
	// After the signal, while the fault lasts: in the recovery scenario, traffic that returns to
	// the healed broker is the point (recoverMs measures it), not a miss.
	faultEnd := d.Params.Duration + d.Params.Drain
	if sc.Heal > 0 {
		faultEnd = sc.Heal
	}
	r.BadShareAfterSignalPct = share(func(s *scenario.SendRec) bool { return s.Start >= signal && s.Start < faultEnd })
	for i := range d.Sends {
		s := &d.Sends[i]
		if s.Start >= signal && s.Start < faultEnd && TouchesBad(s) {
			r.AfterSignal.BadSends++
			if sc.FaultyAt(s.Start) {
				r.AfterSignal.WhileFaulty++
			}
			if !s.OK {
				r.AfterSignal.Failed++
			}
		}
	}
	r.BadShareWhileFaultyPct = share(func(s *scenario.SendRec) bool { return sc.FaultyAt(s.Start) })
}

// fairnessChecks lists what makes a run unfair to compare: the oracle reaching the bad broker, a
// fault step applied late, a schedule not fully applied.
func fairnessChecks(r *Result, d *scenario.RunData) []string {
	var checks []string
	if strategy.IsOracle(d.Strategy) && (r.BadAttempts > 0 || d.BadSendsReceived > 0 || d.WarmupBadSends > 0 || r.BadSharePct > 0) {
		checks = append(checks, "oracle reached the bad broker")
	}
	for _, a := range d.Applied {
		if late := a.Applied - a.Scheduled; late > d.Params.ScheduleSlack && !a.Chained {
			checks = append(checks, "fault schedule step "+a.Note+" applied "+late.String()+" late")
		}
	}
	if len(d.Applied) != len(d.Scenario.Actions) {
		checks = append(checks, "fault schedule not fully applied")
	}
	return checks
}

// isolatedAt finds when sends stopped reaching the bad broker during its fault: the start of the
// last attempt on it (at or after the onset) that is followed by a quiet span in which it got no
// attempt while the others got plenty. The second condition keeps a stall (every sender stuck on
// the bad broker, so nobody sends anywhere) from passing for isolation. No attempt on the bad
// broker after the onset means it was isolated at the onset.
func isolatedAt(d *scenario.RunData) (time.Duration, bool) {
	sc := d.Scenario
	onset := d.Onset()
	quiet := min(time.Second, d.Params.Duration/10)
	need := max(10, int(float64(d.Params.Rate)*quiet.Seconds()/2))
	var bad []int
	for i, a := range d.Attempts {
		if a.Broker == scenario.BadBroker && a.End >= onset {
			bad = append(bad, i)
		}
	}
	if len(bad) == 0 {
		return onset, true
	}
	end := d.Params.Duration
	for k, i := range bad {
		a := d.Attempts[i]
		if sc.Heal > 0 && a.Start >= sc.Heal {
			break
		}
		until := end
		nextBad := len(d.Attempts)
		if k+1 < len(bad) {
			nextBad = bad[k+1]
			until = min(until, d.Attempts[nextBad].Start)
		}
		if sc.Heal > 0 {
			until = min(until, sc.Heal)
		}
		if until-a.Start < quiet {
			continue
		}
		others := 0
		for j := i + 1; j < nextBad && d.Attempts[j].Start < until; j++ {
			others++
		}
		if others >= need {
			return a.Start, true
		}
	}
	return 0, false
}

// ApplyTargets marks detour's results against the oracle of the same scenario.
func ApplyTargets(rs []Result) {
	type key struct {
		mode, scenario string
		rep            int
	}
	oracle := make(map[key]float64)
	for _, r := range rs {
		if r.Strategy == "oracle" {
			oracle[key{r.Mode, r.Scenario, r.Rep}] = r.P99Ms
		}
	}
	for i := range rs {
		r := &rs[i]
		if r.Strategy != "detour" || r.NoBadBroker {
			continue
		}
		o, ok := oracle[key{r.Mode, r.Scenario, r.Rep}]
		t := &targets{SuccessPass: r.Failed == 0 && r.Issued > 0 && !r.CutShort, BadSharePass: ShareWithin(r.BadShareWhileFaultyPct, TargetBadSharePct)}
		if ok && o > 0 {
			t.OracleP99Ms = o
			t.P99VsOracle = math.Round(100*r.P99Ms/o) / 100
			t.P99Pass = r.P99Ms <= TargetP99Factor*o
		}
		r.Targets = t
	}
}

// topErrors returns the n most frequent error texts of failed sends, shortened.
func topErrors(sends []scenario.SendRec, n int) []errCount {
	count := map[string]int{}
	for i := range sends {
		if e := sends[i].Err; e != "" {
			if len(e) > 200 {
				e = e[:200] + "…"
			}
			count[e]++
		}
	}
	var out []errCount
	for t, c := range count {
		out = append(out, errCount{Text: t, Count: c})
	}
	slices.SortFunc(out, func(a, b errCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Text, b.Text)
	})
	return out[:min(n, len(out))]
}
