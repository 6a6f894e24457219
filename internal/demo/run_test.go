package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/fault"
)

// TestPhaseAtPlaysTheHealthyStartOnceThenLoops proves the script order: step 0 only at the
// start, then steps 1..n-1 over and over.
func TestPhaseAtPlaysTheHealthyStartOnceThenLoops(t *testing.T) {
	var got []int
	for k := range 10 {
		got = append(got, phaseAt(k, 4))
	}
	want := []int{0, 1, 2, 3, 1, 2, 3, 1, 2, 3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("phaseAt over 10 periods of a 4-step script = %v, want %v", got, want)
		}
	}
}

// TestP99IsTheNinetyNinthPercentileOfTheWindow proves the per-second p99 is the value at
// rank ceil(0.99 n), so one slow send in a hundred does not set it and two do.
func TestP99IsTheNinetyNinthPercentileOfTheWindow(t *testing.T) {
	window := func(slow int) []time.Duration {
		lat := make([]time.Duration, 100)
		for i := range lat {
			lat[i] = time.Millisecond
		}
		for i := range slow {
			lat[i] = 800 * time.Millisecond
		}
		return lat
	}
	cases := []struct {
		name string
		lat  []time.Duration
		want time.Duration
	}{
		{"empty", nil, 0},
		{"one send", []time.Duration{5 * time.Millisecond}, 5 * time.Millisecond},
		{"one slow send in a hundred", window(1), time.Millisecond},
		{"two slow sends in a hundred", window(2), 800 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := p99(tc.lat); got != tc.want {
				t.Fatalf("p99 = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestHistogramQuantileIsWithinFivePercent proves the constant-memory histogram answers a
// quantile within its 5% bucket width, from microseconds to seconds.
func TestHistogramQuantileIsWithinFivePercent(t *testing.T) {
	for _, d := range []time.Duration{3 * time.Microsecond, 700 * time.Microsecond, 42 * time.Millisecond, 2500 * time.Millisecond} {
		var h histogram
		for range 99 {
			h.add(d / 10)
		}
		h.add(d)
		h.add(d)
		got := h.quantile(0.99)
		if got < d || float64(got) > float64(d)*histGrowth {
			t.Errorf("p99 of a histogram whose top 2%% is %s = %s, want within [%s, +5%%]", d, got, d)
		}
	}
}

// TestFormatLineShowsSharesAndIsolations proves a live view line carries the step, the counts,
// every broker's share of the stored messages and the isolated brokers with their reasons.
func TestFormatLineShowsSharesAndIsolations(t *testing.T) {
	w := window{sends: 200, ok: 199, latencies: []time.Duration{time.Millisecond},
		perBroker: map[string]int{"broker-a": 100, "broker-c": 99}}
	line := formatLine(12*time.Second, "broker-b slow (800 ms)", w, []string{"broker-a", "broker-b", "broker-c"},
		[]fault.Item{{Broker: "broker-b", Reason: fault.ReasonSlowSend}})
	for _, want := range []string{"12s", "broker-b slow (800 ms)", "200 sends", "ok  99.5%", "p99   1.0ms",
		"broker-a  50%", "broker-b   0%", "broker-c  50%", "isolated: broker-b (SlowSend)"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if line := formatLine(time.Second, "x", window{}, []string{"a"}, nil); !strings.Contains(line, "isolated: none") {
		t.Errorf("line without isolations %q lacks 'isolated: none'", line)
	}
}
