// Package metricstest reads gathered Prometheus series back in tests, by the names and labels an
// operator's queries would use.
package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gathered reads every series g gathers as `name{label=value,...}` → value: a counter's or a
// gauge's value, a histogram's sample count under `name_count{...}`. Labels are in the order
// Prometheus sorts them.
func Gathered(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			pairs := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName()+"="+l.GetValue())
			}
			labels := "{" + strings.Join(pairs, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()+labels] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[mf.GetName()+labels] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[mf.GetName()+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
