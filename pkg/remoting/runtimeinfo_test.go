package remoting

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// javaRuntimeInfo is a Java 5.x broker's answer body, cut to the entries detour reads and a few
// others, in the KVTable form a broker sends.
const javaRuntimeInfo = `{"table":{"brokerVersionDesc":"V5_5_0","sendThreadPoolQueueSize":"3",` +
	`"sendThreadPoolQueueCapacity":"10000","sendThreadPoolQueueHeadWaitTimeMills":"12",` +
	`"pageCacheLockTimeMills":"0","putLatency99":"0.00","putTps":"12.5 13.0 12.9"}}`

func runtimeInfoResponse(code int16, body string) *Command {
	return &Command{Code: code, Body: []byte(body), Flag: FlagResponse}
}

func TestParseBrokerRuntimeInfoReadsTheSendPathsFigures(t *testing.T) {
	table, err := ParseBrokerRuntimeInfo(runtimeInfoResponse(Success, javaRuntimeInfo))
	if err != nil {
		t.Fatal(err)
	}
	got := PressureOf(table)
	want := BrokerPressure{SendQueueSize: 3, SendQueueCapacity: 10000, SendQueueHeadWaitMillis: 12, PageCacheLockMillis: 0, PutLatency99Millis: 0}
	if got != want {
		t.Fatalf("pressure %+v, want %+v", got, want)
	}
	if f := got.SendQueueFillPercent(); f != 0.03 {
		t.Errorf("fill %v%%, want 0.03%%", f)
	}
}

// TestPressureOfMarksWhatItCannotReadUnknown proves a missing, negative or unparsable figure is
// -1, never a number that could look like pressure or its absence.
func TestPressureOfMarksWhatItCannotReadUnknown(t *testing.T) {
	p := PressureOf(map[string]string{RuntimeSendQueueSize: "-5", RuntimeSendQueueCapacity: "0",
		RuntimePageCacheLock: "lots", RuntimePutLatency99: "NaN"})
	want := BrokerPressure{SendQueueSize: -1, SendQueueCapacity: 0, SendQueueHeadWaitMillis: -1, PageCacheLockMillis: -1, PutLatency99Millis: -1}
	if p != want {
		t.Fatalf("pressure %+v, want %+v", p, want)
	}
	if f := p.SendQueueFillPercent(); f != -1 {
		t.Errorf("fill %v with an unknown size and no capacity, want -1", f)
	}
}

func TestParseBrokerRuntimeInfoRefusesHostileAnswers(t *testing.T) {
	many := make([]string, MaxRuntimeInfoEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":""`, i)
	}
	cases := []struct {
		name    string
		resp    *Command
		wantErr string
		limit   bool
	}{
		{"a refusal", runtimeInfoResponse(SystemError, ""), "SYSTEM_ERROR", false},
		{"a body over 64 KiB", runtimeInfoResponse(Success, `{"table":{"k":"`+strings.Repeat("x", MaxRuntimeInfoBody)+`"}}`), "over the limit of 65536", true},
		{"too many entries", runtimeInfoResponse(Success, `{"table":{`+strings.Join(many, ",")+`}}`), "1025 entries is over the limit of 1024", true},
		{"not JSON", runtimeInfoResponse(Success, `table`), "runtime info", false},
		{"a value that is not a string", runtimeInfoResponse(Success, `{"table":{"k":{"deep":[1,2]}}}`), `entry "k" is not a string`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table, err := ParseBrokerRuntimeInfo(tc.resp)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || table != nil {
				t.Fatalf("got %v, %v; want an error containing %q", len(table), err, tc.wantErr)
			}
			if errors.Is(err, ErrOverLimit) != tc.limit {
				t.Errorf("errors.Is(err, ErrOverLimit) = %v, want %v", !tc.limit, tc.limit)
			}
		})
	}
}

// FuzzBrokerRuntimeInfo feeds arbitrary bodies through the parser: it never panics, never
// returns more than MaxRuntimeInfoEntries entries, and PressureOf reads any table it returns.
func FuzzBrokerRuntimeInfo(f *testing.F) {
	f.Add([]byte(javaRuntimeInfo))
	f.Add([]byte(`{"table":null}`))
	f.Add([]byte(`{"table":{"sendThreadPoolQueueSize":"9223372036854775808"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		table, err := ParseBrokerRuntimeInfo(&Command{Code: Success, Body: body, Flag: FlagResponse})
		if err != nil {
			return
		}
		if len(table) > MaxRuntimeInfoEntries {
			t.Fatalf("%d entries returned", len(table))
		}
		p := PressureOf(table)
		if p.SendQueueFillPercent() < -1 {
			t.Fatalf("fill %v", p.SendQueueFillPercent())
		}
	})
}
