package fault

import (
	"errors"
	"fmt"
	"time"
)

// Limits a threshold table must respect. They are the same bounds the FaultPolicy resource
// enforces, so a table that the API server accepts always builds here and the reverse.
const (
	// MaxRules is the largest number of rules a table may hold.
	MaxRules = 32
	// MaxMillis is the largest latency or isolation a rule may name: one hour.
	MaxMillis int64 = 3_600_000
)

// Names of the preset tables.
const (
	// PresetRocketMQ5 is the table of RocketMQ 5.1.4 and later (RIP-63), the default: latency 50,
	// 100, 550, 1800, 3000, 5000, 15000 ms isolates for 0, 0, 2000, 5000, 6000, 10000, 30000 ms; a
	// failure counts as 10000 ms.
	PresetRocketMQ5 = "RocketMQ5"
	// PresetRocketMQ4 is the table of RocketMQ 4.x up to 5.1.3: latency 50, 100, 550, 1000, 2000,
	// 3000, 15000 ms isolates for 0, 0, 30000, 60000, 120000, 180000, 600000 ms; a failure counts
	// as 30000 ms.
	PresetRocketMQ4 = "RocketMQ4"
)

// ErrInvalidTable is matched (with errors.Is) by every error NewTable returns.
var ErrInvalidTable = errors.New("invalid fault table")

// Rule maps a latency threshold to an isolation time: a send that took at least LatencyMillis
// isolates its broker for IsolationMillis, unless a higher threshold also matches.
type Rule struct {
	LatencyMillis   int64
	IsolationMillis int64
}

// Table is an immutable, validated threshold table together with the latency that a failed send
// counts as. Build one with NewTable or PresetTable; the zero value is not usable.
type Table struct {
	rules   []Rule
	latency []time.Duration // thresholds, strictly increasing
	isolate []time.Duration // isolation per threshold, non-decreasing
	failure time.Duration
}

// TableError explains why NewTable refused a table. Index is the offending rule's position, or
// -1 when the problem concerns the table as a whole or its failure latency.
type TableError struct {
	Index   int
	Field   string
	Message string
}

// Error names the rule and field, in the spelling the FaultPolicy resource uses.
func (e *TableError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("fault: %s: %s: %s", ErrInvalidTable, e.Field, e.Message)
	}
	return fmt.Sprintf("fault: %s: rules[%d].%s: %s", ErrInvalidTable, e.Index, e.Field, e.Message)
}

// Is lets errors.Is(err, ErrInvalidTable) recognise every TableError.
func (e *TableError) Is(target error) bool { return target == ErrInvalidTable }

// NewTable validates rules and builds a table. The rules must be 1 to MaxRules long, with
// latencies strictly increasing, isolations never decreasing and every value within
// 0..MaxMillis; failureLatencyMillis must be within 1..MaxMillis. The rules slice is copied.
func NewTable(rules []Rule, failureLatencyMillis int64) (*Table, error) {
	if len(rules) == 0 || len(rules) > MaxRules {
		return nil, &TableError{Index: -1, Field: "rules",
			Message: fmt.Sprintf("a table needs 1 to %d rules, got %d", MaxRules, len(rules))}
	}
	if failureLatencyMillis <= 0 || failureLatencyMillis > MaxMillis {
		return nil, &TableError{Index: -1, Field: "failureLatencyMillis",
			Message: fmt.Sprintf("%d is outside 1..%d", failureLatencyMillis, MaxMillis)}
	}
	t := &Table{
		rules:   make([]Rule, len(rules)),
		latency: make([]time.Duration, len(rules)),
		isolate: make([]time.Duration, len(rules)),
		failure: time.Duration(failureLatencyMillis) * time.Millisecond,
	}
	for i, r := range rules {
		if r.LatencyMillis < 0 || r.LatencyMillis > MaxMillis {
			return nil, &TableError{Index: i, Field: "latencyMillis",
				Message: fmt.Sprintf("%d is outside 0..%d", r.LatencyMillis, MaxMillis)}
		}
		if r.IsolationMillis < 0 || r.IsolationMillis > MaxMillis {
			return nil, &TableError{Index: i, Field: "isolationMillis",
				Message: fmt.Sprintf("%d is outside 0..%d", r.IsolationMillis, MaxMillis)}
		}
		if i > 0 {
			prev := rules[i-1]
			if r.LatencyMillis <= prev.LatencyMillis {
				return nil, &TableError{Index: i, Field: "latencyMillis",
					Message: fmt.Sprintf("%d must be greater than rules[%d].latencyMillis %d (latencies strictly increase)",
						r.LatencyMillis, i-1, prev.LatencyMillis)}
			}
			if r.IsolationMillis < prev.IsolationMillis {
				return nil, &TableError{Index: i, Field: "isolationMillis",
					Message: fmt.Sprintf("%d must not be less than rules[%d].isolationMillis %d (isolations never decrease)",
						r.IsolationMillis, i-1, prev.IsolationMillis)}
			}
		}
		t.rules[i] = r
		t.latency[i] = time.Duration(r.LatencyMillis) * time.Millisecond
		t.isolate[i] = time.Duration(r.IsolationMillis) * time.Millisecond
	}
	return t, nil
}

// PresetTable returns a named preset table: PresetRocketMQ5 (also for the empty name) or
// PresetRocketMQ4. A table carries numbers only; how updates apply them is Options.Semantics.
func PresetTable(name string) (*Table, error) {
	switch name {
	case PresetRocketMQ5, "":
		return newPreset([]int64{50, 100, 550, 1800, 3000, 5000, 15000},
			[]int64{0, 0, 2000, 5000, 6000, 10000, 30000}, 10000), nil
	case PresetRocketMQ4:
		return newPreset([]int64{50, 100, 550, 1000, 2000, 3000, 15000},
			[]int64{0, 0, 30000, 60000, 120000, 180000, 600000}, 30000), nil
	default:
		return nil, fmt.Errorf("fault: unknown preset %q (known: %s, %s)", name, PresetRocketMQ5, PresetRocketMQ4)
	}
}

func newPreset(latency, isolation []int64, failure int64) *Table {
	rules := make([]Rule, len(latency))
	for i := range latency {
		rules[i] = Rule{LatencyMillis: latency[i], IsolationMillis: isolation[i]}
	}
	t, err := NewTable(rules, failure)
	if err != nil {
		// The presets are constants; a failure here is a programming error caught by the tests.
		panic(err)
	}
	return t
}

// IsolationFor returns how long a send that took latency isolates its broker. Like RocketMQ's
// computeNotAvailableDuration it walks from the highest threshold down and returns the isolation
// of the first threshold that latency reaches; below every threshold (or negative) it is 0.
func (t *Table) IsolationFor(latency time.Duration) time.Duration {
	for i := len(t.latency) - 1; i >= 0; i-- {
		if latency >= t.latency[i] {
			return t.isolate[i]
		}
	}
	return 0
}

// FailureLatency is the latency a failed send counts as when its isolation is computed.
func (t *Table) FailureLatency() time.Duration { return t.failure }

// ProofLatency is the latency from which a good probe answer no longer shows a healthy broker:
// the first threshold, but at least minProofLatency.
func (t *Table) ProofLatency() time.Duration { return max(t.latency[0], minProofLatency) }

// FailureIsolation is the isolation a failed send earns before any growth.
func (t *Table) FailureIsolation() time.Duration { return t.IsolationFor(t.failure) }

// MaxIsolation is the longest isolation the table can give (its last rule's, as isolations never
// decrease). Isolation that grows on repeated failures never goes beyond it.
func (t *Table) MaxIsolation() time.Duration { return t.isolate[len(t.isolate)-1] }

// Rules returns a copy of the table's rules.
func (t *Table) Rules() []Rule {
	out := make([]Rule, len(t.rules))
	copy(out, t.rules)
	return out
}

// FailureLatencyMillis returns the failure latency in the unit the FaultPolicy resource uses.
func (t *Table) FailureLatencyMillis() int64 { return t.failure.Milliseconds() }
