// Command testreport reads `go test -json` on stdin and prints a short report: every top-level
// test with its result and time (so the output names what ran, the real-RocketMQ suites
// included), the whole output of every test that failed, and each package's result. It exits
// non-zero when any test or package failed, or when the input held no result at all.
//
//	go test -json ./... | go run ./hack/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

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
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testreport:", err)
		return 1
	}
	if failed || results == 0 {
		return 1
	}
	return 0
}
