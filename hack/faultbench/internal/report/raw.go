package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
)

// WriteRaw writes a run's sends and attempts as CSV files, for looking into a result.
func WriteRaw(dir, mode string, d *scenario.RunData) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("seq,due_ms,start_ms,latency_ms,ok,broker,tried,err\n")
	for _, s := range d.Sends {
		fmt.Fprintf(&b, "%d,%.3f,%.3f,%.3f,%t,%s,%s,%q\n", s.Seq, analysis.Ms(s.Due), analysis.Ms(s.Start), analysis.Ms(s.Latency), s.OK, s.Broker,
			strings.Join(s.Tried, " "), s.Err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%d", mode, d.Scenario.Name, d.Strategy, d.Rep))
	if err := os.WriteFile(base+"-sends.csv", []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("broker,start_ms,end_ms,ok\n")
	for _, a := range d.Attempts {
		fmt.Fprintf(&b, "%s,%.3f,%.3f,%t\n", a.Broker, analysis.Ms(a.Start), analysis.Ms(a.End), a.OK)
	}
	return os.WriteFile(base+"-attempts.csv", []byte(b.String()), 0o644)
}
