package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/metrics"
)

// descFields reads a Desc's String(), the only way client_golang shows a Desc's name, help and
// labels: Desc{fqName: "...", help: "...", constLabels: {...}, variableLabels: {a,b}}.
var descFields = regexp.MustCompile(`^Desc\{fqName: "(.*?)", help: "(.*?)"(?:, unit: "[^"]*")?, constLabels: \{.*?\}, variableLabels: \{(.*)\}\}$`)

// metricsReference describes every collector the operator registers.
func metricsReference(string) ([]byte, error) {
	type row struct{ name, kind, labels, help string }
	var rows []row
	collectors := metrics.NewSet().Collectors()
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := descFields.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("cannot read %s", d.String())
			}
			labels := "none"
			if m[3] != "" {
				labels = "`" + strings.ReplaceAll(m[3], ",", "`, `") + "`"
			}
			help := strings.ReplaceAll(m[2], `\"`, `"`)
			rows = append(rows, row{m[1], kindOf(c), labels, escapeCell(help)})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	var b strings.Builder
	b.WriteString(header("Metrics", "the collectors' descriptions (pkg/metrics)"))
	b.WriteString("Every `detour_*` series the manager serves on its metrics endpoint (`--metrics-bind-address`). " +
		"Policies are labelled `<namespace>/<name>`; brokers by their scoped names (`<namespace>/<brokerName>`, " +
		"or `<namespace>/<cluster>/<brokerName>`). The runtime's and controllers' series carry no subsystem; each front door " +
		"has its own (`detour_namesrv_facade_*`, `detour_gateway_*`, `detour_grpc_*`), the gRPC endpoint and the gateway share `detour_door_*`, " +
		"by door and by the brokers' Cluster (`<namespace>/<cluster>`, or `<namespace>` for a Topic that selects broker pods), and brokers' own figures are `detour_broker_*`. " +
		"controller-runtime's own metrics are served alongside.\n\n")
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.name, r.kind, r.labels, r.help)
	}
	return []byte(b.String()), nil
}

// kindOf names a collector's metric type; collectors that compute their figures at scrape time
// say so.
func kindOf(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.GaugeVec, prometheus.Gauge: // before Counter: a Gauge has a Counter's methods too
		return "gauge"
	case *prometheus.CounterVec, prometheus.Counter:
		return "counter"
	case *prometheus.HistogramVec, prometheus.Histogram:
		return "histogram"
	default:
		return "computed at scrape"
	}
}
