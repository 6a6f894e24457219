package rmqtest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which Linux fixes at 100
// for what it reports to user space.
const clockTicks = 100

// ProcessCPU is the CPU time (user and system, all threads) process pid has used so far, from
// /proc/<pid>/stat. Its resolution is 10 ms.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces, so fields count from its end.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("rmqtest: /proc stat line without a command name: %q", truncate(stat, 100))
	}
	// After ") " come field 3 (state) onwards: utime is the 12th of them, stime the 13th.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("rmqtest: /proc stat line has %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rmqtest: /proc stat CPU field %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// The groups ThreadsCPU sums a JVM's threads into, by thread name.
const (
	// ThreadsJIT are HotSpot's compiler threads ("C1 CompilerThread0", "C2 CompilerThread1").
	ThreadsJIT = "jit"
	// ThreadsGC are the collector's threads ("GC Thread#0", "G1 Conc#0", "G1 Refine#0", ...)
	// and the VM thread, which runs the serial collector's pauses and every other safepoint.
	ThreadsGC = "gc"
	// ThreadsOther is every other thread: the application's own.
	ThreadsOther = "other"
)

// ThreadsCPU is the CPU time each group of process pid's live threads has used so far
// (ThreadsJIT, ThreadsGC, ThreadsOther), from /proc/<pid>/task/*/stat. A thread that ended took
// its time with it (HotSpot ends idle compiler threads), so a difference of two samples is at
// least what the group used between them, give or take the ended threads.
func ThreadsCPU(pid int) (map[string]time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread ended since the listing
		}
		cpu, err := parseStatCPU(b)
		if err != nil {
			return nil, err
		}
		out[threadGroup(b)] += cpu
	}
	return out, nil
}

// threadGroup is the group of the thread whose /proc stat line is stat, by its name (the command
// name field, which the kernel cuts to 15 bytes).
func threadGroup(stat []byte) string {
	start, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if start < 0 || end < start {
		return ThreadsOther
	}
	name := string(stat[start+1 : end])
	switch {
	case strings.HasPrefix(name, "C1 CompilerThre"), strings.HasPrefix(name, "C2 CompilerThre"):
		return ThreadsJIT
	case strings.HasPrefix(name, "GC Thread"), strings.HasPrefix(name, "G1 "), name == "VM Thread":
		return ThreadsGC
	}
	return ThreadsOther
}
