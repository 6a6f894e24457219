// Command dashboards writes detour's Grafana dashboards (config/grafana/*.json) from the panels
// declared in panels.go, built with Grafana's foundation SDK rather than written as JSON by hand:
// the JSON is generated, so `make verify` sees a dashboard that no longer matches its source.
// `make manifests` runs it; the Helm chart carries copies of the files it writes.
//
// Its tests (promql_test.go) parse every panel's query and every shipped alert's expression with
// Prometheus' own parser and check each metric and label against the collectors' descriptions.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

func main() {
	out := flag.String("out", "config/grafana", "folder the dashboards' JSON files are written to")
	flag.Parse()
	for _, b := range boards() {
		data, err := render(b)
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, b.file), data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashboards: %s: %v\n", b.file, err)
			os.Exit(1)
		}
	}
}

// render builds one board's dashboard and returns its JSON, ending in a newline.
func render(b board) ([]byte, error) {
	d := dashboard.NewDashboardBuilder(b.title).
		Uid(b.uid).
		Description(b.description).
		Tags([]string{"detour"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Editable().
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	for _, v := range b.variables {
		d = d.WithVariable(dashboard.NewQueryVariableBuilder(v.name).
			Label(v.label).
			Query(dashboard.StringOrMap{String: cog.ToPtr(v.query)}).
			Datasource(datasource).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).
			IncludeAll(true).
			AllValue(".*"))
	}
	// Grafana links to a panel by its id, so each is numbered in order and stays put.
	id := uint32(0)
	for _, r := range b.rows {
		id++
		d = d.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		for _, p := range r.panels {
			id++
			d = d.WithPanel(p.builder(id))
		}
	}
	built, err := d.Build()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// datasource is the dashboard's data source variable: each panel queries the Prometheus chosen
// at the top of the dashboard.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// builder makes the Grafana panel of one declared panel: a time series unless it says stat or
// table. Time series show their legend, so a line names its broker or door.
func (p panel) builder(id uint32) cog.Builder[dashboard.Panel] {
	targets := make([]cog.Builder[variants.Dataquery], 0, len(p.queries))
	for i, q := range p.queries {
		t := prometheus.NewDataqueryBuilder().Expr(q.expr).LegendFormat(q.legend).RefId(string(rune('A' + i)))
		if p.kind == kindTable {
			t = t.Instant().Format(prometheus.PromQueryFormatTable)
		}
		targets = append(targets, t)
	}
	width := p.width
	if width == 0 {
		width = 12
	}
	switch p.kind {
	case kindStat:
		return stat.NewPanelBuilder().Title(p.title).Description(p.description).Unit(p.unit).
			Datasource(datasource).Targets(targets).Height(8).Span(width).Id(id)
	case kindTable:
		return table.NewPanelBuilder().Title(p.title).Description(p.description).Unit(p.unit).
			Datasource(datasource).Targets(targets).Height(8).Span(width).Id(id)
	default:
		return timeseries.NewPanelBuilder().Title(p.title).Description(p.description).Unit(p.unit).
			Datasource(datasource).Targets(targets).Height(8).Span(width).Id(id).Min(0).
			Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
				DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom))
	}
}
