package rmqtest

import (
	"os"
	"testing"
	"time"
)

// TestParseStatCPU reads utime and stime from /proc stat lines, also when the command name holds
// spaces and parentheses, and refuses lines it cannot read.
func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    time.Duration
		wantErr bool
	}{
		{name: "plain", line: "42 (java) S 1 42 42 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 30 0 100 1000 10",
			want: 3800 * time.Millisecond},
		{name: "name with spaces and parentheses", line: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0",
			want: 30 * time.Millisecond},
		{name: "no command name", line: "7 java R 1 7 7", wantErr: true},
		{name: "too short", line: "7 (java) R 1 7 7 0", wantErr: true},
		{name: "not a number", line: "7 (java) R 1 7 7 0 -1 0 0 0 0 0 x 2 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.line))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStatCPU(%q) error %v, want error %v", tt.line, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStatCPU(%q) = %v, want %v", tt.line, got, tt.want)
			}
		})
	}
}

// TestProcessCPUOfThisProcess reads this process's own accounting, which a process that ran
// this far has.
func TestProcessCPUOfThisProcess(t *testing.T) {
	if _, err := ProcessCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

// TestThreadGroupTellsCompilerAndCollectorThreadsFromTheRest names HotSpot's threads as the kernel
// shows them (cut to 15 bytes) by what ThreadsCPU sums them into.
func TestThreadGroupTellsCompilerAndCollectorThreadsFromTheRest(t *testing.T) {
	for name, want := range map[string]string{
		"C2 CompilerThre": ThreadsJIT,
		"C1 CompilerThre": ThreadsJIT,
		"GC Thread#0":     ThreadsGC,
		"G1 Conc#0":       ThreadsGC,
		"G1 Refine#0":     ThreadsGC,
		"G1 Main Marker":  ThreadsGC,
		"VM Thread":       ThreadsGC,
		"NettyServerNIOS": ThreadsOther,
		"java":            ThreadsOther,
		"VM Periodic Tas": ThreadsOther,
	} {
		if got := threadGroup([]byte("7 (" + name + ") S 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0")); got != want {
			t.Errorf("thread %q in group %q, want %q", name, got, want)
		}
	}
}

// TestThreadsCPUOfThisProcessAddsUpToItsOwn reads this process's threads, whose groups hold no
// more than the process's own accounting.
func TestThreadsCPUOfThisProcessAddsUpToItsOwn(t *testing.T) {
	groups, err := ThreadsCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	total, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for g, d := range groups {
		if g != ThreadsOther && d > 0 {
			t.Errorf("a Go process has %v in JVM group %q", d, g)
		}
		sum += d
	}
	if sum > total {
		t.Errorf("threads used %v, more than the process's %v", sum, total)
	}
}
