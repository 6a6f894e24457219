// Command testreport reads `go test -json` on stdin and prints a short report: every top-level
// test with its result and time (so the output names what ran, the real-RocketMQ suites
// included), the whole output of every test that failed, and each package's result. Last come
// the failed tests' own assertion lines (t.Errorf, t.Fatalf), because a failure's whole output
// can be thousands of lines of broker and client logs that bury why it failed. It exits non-zero
// when any test or package failed, or when the input held no result at all.
//
//	go test -json ./... | go run ./hack/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// assertion matches the first line of a testing.T message: indented, "file_test.go:123: ".
var assertion = regexp.MustCompile(`^\s+[\w.-]+_test\.go:\d+: `)

// Bounds of the closing summary, so a test that logs a flood still ends in a readable report.
const (
	maxSummaryLines = 12  // assertion lines kept per failed test
	maxSummaryWidth = 400 // characters kept of each
)

// failure is what the closing summary says of one failed test.
type failure struct {
	name  string
	lines []string
}

// assertionLines picks the testing.T message lines out of a test's output, the bounded summary.
func assertionLines(output []string) []string {
	var picked []string
	for _, l := range output {
		if !assertion.MatchString(l) {
			continue
		}
		l = strings.TrimRight(l, "\n")
		if len(l) > maxSummaryWidth {
			l = l[:maxSummaryWidth] + " …"
		}
		if len(picked) == maxSummaryLines {
			picked = append(picked, "    … more assertion lines above")
			break
		}
		picked = append(picked, l)
	}
	return picked
}

// printSummary names every failed test with its assertion lines.
func printSummary(out *bufio.Writer, failures []failure) {
	if len(failures) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%d failed test(s), with what each asserted:\n", len(failures))
	for _, f := range failures {
		fmt.Fprintf(out, "--- FAIL: %s\n", f.name)
		for _, l := range f.lines {
			fmt.Fprintln(out, l)
		}
	}
}

// event is one line of `go test -json` (test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	os.Exit(run())
}

func run() int {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	logs := map[string][]string{} // package/test -> output, kept until the test ends
	failed, results := false, 0
	var failures []failure
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// Not test2json (a build error, say): pass it through.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := ev.Package + "/" + ev.Test
		switch ev.Action {
		case "output":
			logs[key] = append(logs[key], ev.Output)
		case "pass", "fail", "skip":
			results++
			lines := logs[key]
			delete(logs, key)
			if ev.Action == "fail" {
				failed = true
				for _, l := range lines {
					fmt.Fprint(out, l)
				}
				if ev.Test != "" {
					failures = append(failures, failure{name: ev.Package + " " + ev.Test, lines: assertionLines(lines)})
				}
			}
			switch {
			case ev.Test == "":
				if ev.Action != "fail" {
					fmt.Fprintf(out, "%-4s %s\t%.1fs\n", strings.ToUpper(ev.Action), ev.Package, ev.Elapsed)
				}
			case !strings.Contains(ev.Test, "/") && ev.Action != "fail":
				fmt.Fprintf(out, "  --- %s: %s (%.2fs)\n", strings.ToUpper(ev.Action), ev.Test, ev.Elapsed)
			}
			out.Flush()
		}
	}
	printSummary(out, failures)
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testreport:", err)
		return 1
	}
	if failed || results == 0 {
		return 1
	}
	return 0
}
