package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// Latency axis bounds of every chart, in ms: loopback sends take a fraction of a millisecond,
// the worst a send can take is the 3 s budget (plus scheduling noise).
const (
	chartMinMs = 0.05
	chartMaxMs = 5000
)

var (
	okColor   = color.RGBA{R: 40, G: 90, B: 200, A: 255}
	failColor = color.RGBA{R: 220, G: 30, B: 30, A: 255}
	badColor  = color.RGBA{R: 240, G: 150, B: 0, A: 255}
	markColor = color.RGBA{R: 120, G: 120, B: 120, A: 255}
)

func clampMs(d time.Duration) float64 {
	return math.Min(chartMaxMs, math.Max(chartMinMs, float64(d)/float64(time.Millisecond)))
}

func logY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = chartMinMs, chartMaxMs
	p.Y.Label.Text = "latency (ms)"
}

// addMarks draws the scenario's schedule steps as vertical lines.
func addMarks(p *plot.Plot, sc scenario.Scenario) error {
	for _, a := range sc.Actions {
		x := a.At.Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: chartMinMs}, {X: x, Y: chartMaxMs}})
		if err != nil {
			return err
		}
		l.Color = markColor
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
	}
	return nil
}

// scatterChart draws one panel per strategy: every send's latency over its start time; sends that
// touched the bad broker in orange, failed sends in red.
func scatterChart(path string, sc scenario.Scenario, runs []*scenario.RunData) error {
	cols := 2
	rows := (len(runs) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, d := range runs {
		p, err := scatterPanel(sc, d)
		if err != nil {
			return err
		}
		plots[i/cols][i%cols] = p
	}
	for r := range plots {
		for c := range plots[r] {
			if plots[r][c] == nil {
				plots[r][c] = plot.New()
				plots[r][c].HideAxes()
			}
		}
	}
	img := vgimg.New(vg.Points(float64(cols)*420), vg.Points(float64(rows)*260))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(8), PadY: vg.Points(8),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for c := range plots[r] {
			plots[r][c].Draw(canvases[r][c])
		}
	}
	return writePNG(path, img)
}

// scatterPanel is one strategy's panel of the scatter chart.
func scatterPanel(sc scenario.Scenario, d *scenario.RunData) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s", sc.Name, d.Strategy)
	p.X.Label.Text = "send start (s)"
	p.X.Min, p.X.Max = 0, d.Params.Duration.Seconds()+1
	logY(p)
	var ok, bad, failed plotter.XYs
	for j := range d.Sends {
		s := &d.Sends[j]
		pt := plotter.XY{X: s.Start.Seconds(), Y: clampMs(s.Latency)}
		switch {
		case !s.OK:
			failed = append(failed, pt)
		case analysis.TouchesBad(s):
			bad = append(bad, pt)
		default:
			ok = append(ok, pt)
		}
	}
	if err := addMarks(p, sc); err != nil {
		return nil, err
	}
	for _, set := range []struct {
		xy    plotter.XYs
		c     color.Color
		label string
	}{{ok, okColor, "other brokers"}, {bad, badColor, "reached " + scenario.BadBroker}, {failed, failColor, "failed"}} {
		if len(set.xy) == 0 {
			continue
		}
		s, err := plotter.NewScatter(set.xy)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Color = set.c
		s.GlyphStyle.Radius = vg.Points(1.2)
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(s)
		p.Legend.Add(set.label, s)
	}
	p.Legend.Top = true
	return p, nil
}

// p99Chart draws, per strategy, the p99 latency of the sends started in each second of the run.
func p99Chart(path string, sc scenario.Scenario, runs []*scenario.RunData) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: p99 send latency per second", sc.Name)
	p.X.Label.Text = "second of the run"
	if len(runs) > 0 {
		p.X.Min, p.X.Max = 0, runs[0].Params.Duration.Seconds()
	}
	logY(p)
	if err := addMarks(p, sc); err != nil {
		return err
	}
	for i, d := range runs {
		buckets := make([][]time.Duration, int(d.Params.Duration/time.Second)+1)
		for j := range d.Sends {
			s := &d.Sends[j]
			k := int(s.Start / time.Second)
			if k >= 0 && k < len(buckets) {
				buckets[k] = append(buckets[k], s.Latency)
			}
		}
		var xy plotter.XYs
		for k, b := range buckets {
			if len(b) == 0 {
				continue
			}
			slices.Sort(b)
			xy = append(xy, plotter.XY{X: float64(k) + 0.5, Y: clampMs(analysis.Percentile(b, 99))})
		}
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		l.Color = c
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		pts.Color = c
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(d.Strategy, l, pts)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	img := vgimg.New(vg.Points(760), vg.Points(420))
	p.Draw(draw.New(img))
	return writePNG(path, img)
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeCharts draws a scenario's charts into dir and returns their paths.
func writeCharts(dir string, sc scenario.Scenario, runs []*scenario.RunData) ([]string, error) {
	scatter := filepath.Join(dir, sc.Name+"-latency.png")
	if err := scatterChart(scatter, sc, runs); err != nil {
		return nil, err
	}
	p99 := filepath.Join(dir, sc.Name+"-p99.png")
	if err := p99Chart(p99, sc, runs); err != nil {
		return nil, err
	}
	return []string{scatter, p99}, nil
}

// medianRuns picks, for every strategy, the run whose p99 is the median of its repetitions (the
// lower middle one for an even count), so a chart shows a typical run rather than the first.
func medianRuns(rs []analysis.Result, runs []*scenario.RunData, strategies []string) []*scenario.RunData {
	var out []*scenario.RunData
	for _, st := range strategies {
		var idx []int
		for i, d := range runs {
			if d.Strategy == st {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		slices.SortFunc(idx, func(a, b int) int {
			switch {
			case rs[a].P99Ms < rs[b].P99Ms:
				return -1
			case rs[a].P99Ms > rs[b].P99Ms:
				return 1
			}
			return 0
		})
		out = append(out, runs[idx[(len(idx)-1)/2]])
	}
	return out
}

// realChartStrategies are the strategies of a real scenario's p99-over-time chart.
var realChartStrategies = []string{"detour", "java-5", "java-default", strategy.Facade}

// WriteModeCharts draws a scenario's charts from its median runs (rs[i] is runs[i]'s result):
// brokersim charts keep their names (<scenario>-latency.png, <scenario>-p99.png); real-broker ones
// are real-<scenario>-latency.png (every strategy) and real-<scenario>-p99.png (detour against
// java-5, java-default and java-default behind the facade over time).
func WriteModeCharts(dir, mode string, sc scenario.Scenario, rs []analysis.Result, runs []*scenario.RunData, strategies []string) ([]string, error) {
	med := medianRuns(rs, runs, strategies)
	if mode == "sim" {
		return writeCharts(dir, sc, med)
	}
	scatter := filepath.Join(dir, "real-"+sc.Name+"-latency.png")
	if err := scatterChart(scatter, sc, med); err != nil {
		return nil, err
	}
	var sel []*scenario.RunData
	for _, st := range realChartStrategies {
		for _, d := range med {
			if d.Strategy == st {
				sel = append(sel, d)
			}
		}
	}
	p99 := filepath.Join(dir, "real-"+sc.Name+"-p99.png")
	if err := p99Chart(p99, sc, sel); err != nil {
		return nil, err
	}
	return []string{p99, scatter}, nil
}
