package analysis

import (
	"testing"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
)

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
			r := Analyze(tc.run)
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

func ms2f(d time.Duration) float64 { return Ms(d) }

// TestMediansAndVerdicts checks the statistics the tables and targets are judged on.
func TestMediansAndVerdicts(t *testing.T) {
	if s := StatOf([]float64{5, 1, 3}); s != (Stat{Median: 3, Min: 1, Max: 5}) {
		t.Errorf("statOf odd = %+v", s)
	}
	if s := StatOf([]float64{4, 1, 3, 10}); s.Median != 3.5 || s.Min != 1 || s.Max != 10 {
		t.Errorf("statOf even = %+v", s)
	}
	var rs []Result
	add := func(st string, rep int, ok, p99, bad float64) {
		rs = append(rs, Result{Mode: "real", Scenario: "blackhole", Strategy: st, Rep: rep, SuccessPct: ok, P99Ms: p99, BadShareWhileFaultyPct: bad})
	}
	for rep, v := range []float64{100, 100, 99} {
		add("detour", rep+1, v, []float64{100, 900, 115}[rep], []float64{0.05, 3, 0.02}[rep])
		add("oracle", rep+1, 100, 90, 0)
		add("java-5", rep+1, 99, 400, 2)
	}
	ms := Medians(rs)
	if len(ms) != 3 || ms[0].Strategy != "detour" || ms[0].Runs != 3 || ms[0].P99Ms.Median != 115 || ms[0].P99Ms.Max != 900 {
		t.Fatalf("medians %+v", ms)
	}
	vs := Verdicts(ms)
	if len(vs) != 2 {
		t.Fatalf("verdicts %+v", vs)
	}
	o, j := vs[0], vs[1]
	if o.Against != "oracle" || !o.SuccessPass || !o.P99Pass || !o.BadSharePass || o.P99Ratio != 1.28 {
		t.Errorf("against the oracle: %+v", o)
	}
	// A share the records cannot tell meets no target.
	if ShareWithin(unknownShare, TargetBadSharePct) || ShareWithin(unknownShare, 5) || FmtPct(unknownShare) != "n/a" {
		t.Errorf("an unknown share passes a target or prints as a number")
	}
	if j.Against != "java-5" || !j.Better || j.P99Ratio != 0.29 {
		t.Errorf("against java-5: %+v", j)
	}
}
