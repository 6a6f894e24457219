package analysis

import (
	"fmt"
	"math"
	"slices"
)

// Stat is a median with the range it comes from.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// StatOf summarizes values; the median of an even count is the mean of the middle two.
func StatOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: math.Round(m*1000) / 1000, Min: s[0], Max: s[len(s)-1]}
}

// Median is one mode × scenario × strategy over its repetitions.
type Median struct {
	Mode     string `json:"mode"`
	Scenario string `json:"scenario"`
	Strategy string `json:"strategy"`
	Runs     int    `json:"runs"`

	// IssuedPct is issued over scheduled sends: a strategy whose senders are stuck issues fewer,
	// and its other measures are over the sends it did issue.
	IssuedPct              Stat `json:"issuedPct"`
	SuccessPct             Stat `json:"successPct"`
	P50Ms                  Stat `json:"p50Ms"`
	P99Ms                  Stat `json:"p99Ms"`
	BadShareWhileFaultyPct Stat `json:"badShareWhileFaultyPct"`
	BadShareAfterSignalPct Stat `json:"badShareAfterSignalPct"`
	BadShareBeforeOnsetPct Stat `json:"badShareBeforeOnsetPct"`
	NoiseP99Ms             Stat `json:"noiseP99Ms"`
	// SlowSharePct is over the runs whose matching oracle (SlowAgainst) ran in the same
	// repetition; n/a when none did.
	SlowSharePct    Stat   `json:"slowSharePct"`
	SlowAgainst     string `json:"slowShareAgainst"`
	ExtraSendsPct   Stat   `json:"extraSendsPct"`
	CopiesStored    Stat   `json:"copiesStored"`
	CopiesStoredPct Stat   `json:"copiesStoredPct"`
	NoBadBroker     bool   `json:"noBadBroker,omitempty"`
	// IsolateMs is over the runs in which the bad broker was isolated at all; Isolated counts them.
	IsolateMs *Stat `json:"isolateMs,omitempty"`
	Isolated  int   `json:"isolatedRuns"`
	// CutShort and FailedChecks count runs.
	CutShort     int `json:"cutShortRuns"`
	FailedChecks int `json:"runsWithFailedChecks"`
}

// Medians summarizes every mode × scenario × strategy over its repetitions, in the order the
// results first name them.
func Medians(rs []Result) []Median {
	type key struct{ mode, scenario, strategy string }
	var keys []key
	by := map[key][]Result{}
	for _, r := range rs {
		k := key{r.Mode, r.Scenario, r.Strategy}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	var out []Median
	for _, k := range keys {
		g := by[k]
		m := Median{Mode: k.mode, Scenario: k.scenario, Strategy: k.strategy, Runs: len(g)}
		col := func(f func(r Result) float64) Stat {
			var v []float64
			for _, r := range g {
				v = append(v, f(r))
			}
			return StatOf(v)
		}
		m.IssuedPct = col(func(r Result) float64 { return pct(r.Issued, r.Scheduled) })
		m.SuccessPct = col(func(r Result) float64 { return r.SuccessPct })
		m.P50Ms = col(func(r Result) float64 { return r.P50Ms })
		m.P99Ms = col(func(r Result) float64 { return r.P99Ms })
		m.BadShareWhileFaultyPct = col(func(r Result) float64 { return r.BadShareWhileFaultyPct })
		m.BadShareAfterSignalPct = col(func(r Result) float64 { return r.BadShareAfterSignalPct })
		m.BadShareBeforeOnsetPct = col(func(r Result) float64 { return r.BadShareBeforeOnsetPct })
		m.NoiseP99Ms = col(func(r Result) float64 { return r.NoiseP99Ms })
		fillHedgeMedians(&m, g)
		var iso []float64
		for _, r := range g {
			if r.IsolateMs != nil {
				iso = append(iso, *r.IsolateMs)
			}
			if r.CutShort {
				m.CutShort++
			}
			if len(r.Checks) > 0 {
				m.FailedChecks++
			}
		}
		m.Isolated = len(iso)
		if len(iso) > 0 {
			s := StatOf(iso)
			m.IsolateMs = &s
		}
		out = append(out, m)
	}
	return out
}

// fillHedgeMedians fills m's slow share (over the runs that have one), extra sends and copies.
func fillHedgeMedians(m *Median, g []Result) {
	var slow, extra, copies, copiesPct []float64
	for _, r := range g {
		if r.SlowSharePct != unknownShare {
			slow = append(slow, r.SlowSharePct)
		}
		extra = append(extra, r.ExtraSendsPct)
		copies = append(copies, float64(r.Hedges.CopyStored))
		copiesPct = append(copiesPct, r.CopiesStoredPct)
		m.SlowAgainst, m.NoBadBroker = r.SlowAgainst, r.NoBadBroker
	}
	m.SlowSharePct = Stat{Median: unknownShare, Min: unknownShare, Max: unknownShare}
	if len(slow) > 0 {
		m.SlowSharePct = StatOf(slow)
	}
	m.ExtraSendsPct, m.CopiesStored, m.CopiesStoredPct = StatOf(extra), StatOf(copies), StatOf(copiesPct)
}

// Verdict judges detour's medians in one scenario against a baseline: the oracle (the targets) or
// a Java producer (at least as good on every measure; better on at least one).
type Verdict struct {
	Mode     string `json:"mode"`
	Scenario string `json:"scenario"`
	Against  string `json:"against"`
	// P99Ratio is detour's median p99 over the baseline's.
	P99Ratio float64 `json:"p99Ratio"`
	// For the oracle: success 100 %, p99 within 1.5x, bad share while faulty <= 1 %.
	// For a Java producer: success not lower, p99 not higher, bad share while faulty not higher.
	SuccessPass  bool `json:"successPass"`
	P99Pass      bool `json:"p99Pass"`
	BadSharePass bool `json:"badSharePass"`
	// Better: against a Java producer, strictly better on at least one measure.
	Better bool `json:"better,omitempty"`
}

// MustBeBetter are the scenarios in which detour must beat the Java producers with fault
// tolerance on, not only match them.
var MustBeBetter = map[string]bool{"blackhole": true, "slow": true, "flapping": true, "rolling": true}

// javaBaselines are the producers detour is judged against; java-default is reported beside them.
var javaBaselines = []string{"java-5", "java-4.9", "java-default"}

// FindMedian returns the medians of strategy st in scenario sc of mode among ms, nil when it did
// not run there.
func FindMedian(ms []Median, mode, sc, st string) *Median {
	for i := range ms {
		if ms[i].Mode == mode && ms[i].Scenario == sc && ms[i].Strategy == st {
			return &ms[i]
		}
	}
	return nil
}

// Verdicts judges detour's medians in every scenario against the oracle (the targets) and against
// each Java producer.
func Verdicts(ms []Median) []Verdict {
	find := func(mode, sc, st string) *Median { return FindMedian(ms, mode, sc, st) }
	var out []Verdict
	for _, d := range ms {
		if d.Strategy != "detour" || d.NoBadBroker {
			continue
		}
		if o := find(d.Mode, d.Scenario, "oracle"); o != nil {
			v := Verdict{Mode: d.Mode, Scenario: d.Scenario, Against: "oracle", P99Ratio: ratio(d.P99Ms.Median, o.P99Ms.Median),
				SuccessPass:  d.SuccessPct.Median >= 100,
				P99Pass:      d.P99Ms.Median <= TargetP99Factor*o.P99Ms.Median,
				BadSharePass: ShareWithin(d.BadShareWhileFaultyPct.Median, TargetBadSharePct)}
			out = append(out, v)
		}
		for _, j := range javaBaselines {
			b := find(d.Mode, d.Scenario, j)
			if b == nil {
				continue
			}
			v := Verdict{Mode: d.Mode, Scenario: d.Scenario, Against: j, P99Ratio: ratio(d.P99Ms.Median, b.P99Ms.Median),
				SuccessPass:  d.SuccessPct.Median >= b.SuccessPct.Median,
				P99Pass:      d.P99Ms.Median <= b.P99Ms.Median,
				BadSharePass: ShareWithin(d.BadShareWhileFaultyPct.Median, b.BadShareWhileFaultyPct.Median)}
			v.Better = v.SuccessPass && v.P99Pass && v.BadSharePass && (d.SuccessPct.Median > b.SuccessPct.Median ||
				d.P99Ms.Median < b.P99Ms.Median || d.BadShareWhileFaultyPct.Median < b.BadShareWhileFaultyPct.Median)
			out = append(out, v)
		}
	}
	return out
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(100*a/b) / 100
}

// FmtStat formats a median with its min–max range, each with f.
func FmtStat(s Stat, f func(float64) string) string {
	if s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}

// FmtPct formats a percentage.
func FmtPct(v float64) string {
	if v == unknownShare {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}
