package fault

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func mustPreset(t testing.TB, name string) *Table {
	t.Helper()
	tab, err := PresetTable(name)
	if err != nil {
		t.Fatalf("PresetTable(%q): %v", name, err)
	}
	return tab
}

func TestPresetRulesMatchRocketMQ(t *testing.T) {
	tests := []struct {
		name      string
		latency   []int64
		isolation []int64
		failure   int64
	}{
		{PresetRocketMQ5, []int64{50, 100, 550, 1800, 3000, 5000, 15000}, []int64{0, 0, 2000, 5000, 6000, 10000, 30000}, 10000},
		{PresetRocketMQ4, []int64{50, 100, 550, 1000, 2000, 3000, 15000}, []int64{0, 0, 30000, 60000, 120000, 180000, 600000}, 30000},
		{"", []int64{50, 100, 550, 1800, 3000, 5000, 15000}, []int64{0, 0, 2000, 5000, 6000, 10000, 30000}, 10000},
	}
	for _, tc := range tests {
		t.Run("preset "+tc.name, func(t *testing.T) {
			tab := mustPreset(t, tc.name)
			rules := tab.Rules()
			if len(rules) != len(tc.latency) {
				t.Fatalf("got %d rules, want %d", len(rules), len(tc.latency))
			}
			for i, r := range rules {
				if r.LatencyMillis != tc.latency[i] || r.IsolationMillis != tc.isolation[i] {
					t.Errorf("rule %d = %+v, want {%d %d}", i, r, tc.latency[i], tc.isolation[i])
				}
			}
			if got := tab.FailureLatency(); got != ms(tc.failure) {
				t.Errorf("FailureLatency = %v, want %v", got, ms(tc.failure))
			}
			if got := tab.FailureLatencyMillis(); got != tc.failure {
				t.Errorf("FailureLatencyMillis = %d, want %d", got, tc.failure)
			}
			if got, want := tab.MaxIsolation(), ms(tc.isolation[len(tc.isolation)-1]); got != want {
				t.Errorf("MaxIsolation = %v, want %v", got, want)
			}
		})
	}
}

// The duration checks of RocketMQ's 4.x MQFaultStrategyTest (pull request 1593).
func TestRocketMQ4IsolationForMatchesMQFaultStrategyTest(t *testing.T) {
	tab := mustPreset(t, PresetRocketMQ4)
	cases := []struct{ latency, want int64 }{
		{-1, 0}, {20, 0}, {80, 0}, {120, 0},
		{600, 30000}, {1200, 60000}, {2300, 120000}, {3400, 180000}, {16000, 600000},
	}
	for _, c := range cases {
		if got := tab.IsolationFor(ms(c.latency)); got != ms(c.want) {
			t.Errorf("IsolationFor(%dms) = %v, want %v", c.latency, got, ms(c.want))
		}
	}
	// A 4.x failure counts as 30000 ms, which isolates for ten minutes.
	if got := tab.FailureIsolation(); got != 10*time.Minute {
		t.Errorf("FailureIsolation = %v, want 10m", got)
	}
}

// The 5.x lookup table of computeNotAvailableDuration, including every boundary.
func TestRocketMQ5IsolationForWalksFromHighestThreshold(t *testing.T) {
	tab := mustPreset(t, PresetRocketMQ5)
	cases := []struct{ latency, want int64 }{
		{-1, 0}, {0, 0}, {49, 0}, {50, 0}, {99, 0}, {100, 0}, {549, 0},
		{550, 2000}, {1799, 2000}, {1800, 5000}, {2999, 5000}, {3000, 6000}, {4999, 6000},
		{5000, 10000}, {10000, 10000}, {14999, 10000}, {15000, 30000}, {3_600_000, 30000},
	}
	for _, c := range cases {
		if got := tab.IsolationFor(ms(c.latency)); got != ms(c.want) {
			t.Errorf("IsolationFor(%dms) = %v, want %v", c.latency, got, ms(c.want))
		}
	}
	// Just below a threshold in sub-millisecond terms stays below it.
	if got := tab.IsolationFor(ms(550) - time.Microsecond); got != 0 {
		t.Errorf("IsolationFor(549.999ms) = %v, want 0", got)
	}
	if got := tab.FailureIsolation(); got != 10*time.Second {
		t.Errorf("FailureIsolation = %v, want 10s", got)
	}
}

func TestCustomTableIsolationFor(t *testing.T) {
	tab, err := NewTable([]Rule{{0, 0}, {200, 1000}, {200_000, 1000}, {300_000, 3_600_000}}, 250_000)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ latency, want int64 }{{-5, 0}, {0, 0}, {199, 0}, {200, 1000}, {299_999, 1000}, {300_000, 3_600_000}}
	for _, c := range cases {
		if got := tab.IsolationFor(ms(c.latency)); got != ms(c.want) {
			t.Errorf("IsolationFor(%dms) = %v, want %v", c.latency, got, ms(c.want))
		}
	}
	if got := tab.FailureIsolation(); got != time.Second {
		t.Errorf("FailureIsolation = %v, want 1s", got)
	}
}

func TestNewTableRejectsInvalidTablesNamingRuleAndIndex(t *testing.T) {
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{LatencyMillis: int64(i)}
	}
	tests := []struct {
		name    string
		rules   []Rule
		failure int64
		index   int
		field   string
		text    string
	}{
		{"no rules", nil, 1000, -1, "rules", "1 to 32 rules, got 0"},
		{"too many rules", many, 1000, -1, "rules", "got 33"},
		{"zero failure latency", []Rule{{50, 0}}, 0, -1, "failureLatencyMillis", "0 is outside 1..3600000"},
		{"negative failure latency", []Rule{{50, 0}}, -1, -1, "failureLatencyMillis", "-1 is outside"},
		{"failure latency over an hour", []Rule{{50, 0}}, 3_600_001, -1, "failureLatencyMillis", "3600001 is outside"},
		{"negative latency", []Rule{{50, 0}, {-1, 0}}, 1000, 1, "latencyMillis", "rules[1].latencyMillis: -1 is outside 0..3600000"},
		{"latency over an hour", []Rule{{3_600_001, 0}}, 1000, 0, "latencyMillis", "rules[0].latencyMillis: 3600001"},
		{"negative isolation", []Rule{{50, -3}}, 1000, 0, "isolationMillis", "rules[0].isolationMillis: -3 is outside"},
		{"isolation over an hour", []Rule{{50, 0}, {60, 3_600_001}}, 1000, 1, "isolationMillis", "rules[1].isolationMillis"},
		{"equal latencies", []Rule{{50, 0}, {100, 0}, {100, 10}}, 1000, 2, "latencyMillis", "rules[2].latencyMillis: 100 must be greater than rules[1].latencyMillis 100"},
		{"decreasing latencies", []Rule{{50, 0}, {40, 0}}, 1000, 1, "latencyMillis", "strictly increase"},
		{"decreasing isolation", []Rule{{50, 0}, {100, 2000}, {200, 1000}}, 1000, 2, "isolationMillis", "rules[2].isolationMillis: 1000 must not be less than rules[1].isolationMillis 2000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := NewTable(tc.rules, tc.failure)
			if err == nil {
				t.Fatalf("NewTable accepted %v (failure %d): %v", tc.rules, tc.failure, tab.Rules())
			}
			if !errors.Is(err, ErrInvalidTable) {
				t.Errorf("error %v is not ErrInvalidTable", err)
			}
			var te *TableError
			if !errors.As(err, &te) {
				t.Fatalf("error %T is not a *TableError", err)
			}
			if te.Index != tc.index || te.Field != tc.field {
				t.Errorf("index/field = %d/%s, want %d/%s", te.Index, te.Field, tc.index, tc.field)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
		})
	}
}

func TestNewTableAcceptsBoundaryValues(t *testing.T) {
	rules := make([]Rule, MaxRules)
	for i := range rules {
		rules[i] = Rule{LatencyMillis: int64(i), IsolationMillis: MaxMillis}
	}
	rules[0] = Rule{0, 0}
	rules[MaxRules-1].LatencyMillis = MaxMillis
	if _, err := NewTable(rules, MaxMillis); err != nil {
		t.Errorf("32 rules with values at both bounds: %v", err)
	}
	if _, err := NewTable([]Rule{{0, 0}}, 1); err != nil {
		t.Errorf("a single zero rule with failure latency 1: %v", err)
	}
}

func TestTableIsImmutable(t *testing.T) {
	in := []Rule{{50, 0}, {100, 1000}}
	tab, err := NewTable(in, 500)
	if err != nil {
		t.Fatal(err)
	}
	in[1].IsolationMillis = 99999
	out := tab.Rules()
	out[0].LatencyMillis = 7
	if got := tab.Rules(); !slices.Equal(got, []Rule{{50, 0}, {100, 1000}}) {
		t.Errorf("table changed through its input or output slices: %v", got)
	}
	if got := tab.IsolationFor(ms(100)); got != time.Second {
		t.Errorf("IsolationFor(100ms) = %v, want 1s", got)
	}
}

func TestPresetTableRejectsUnknownName(t *testing.T) {
	for _, name := range []string{"rocketmq5", "RocketMQ3", "Custom"} {
		if _, err := PresetTable(name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("PresetTable(%q) error = %v, want one naming the preset", name, err)
		}
	}
}
