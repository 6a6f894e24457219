package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/report"
)

// rewrite renders results.md, the medians and the verdicts again from the results.json in dir,
// with the charts that are there; the runs' own numbers are not touched. The modes of the
// results.json files in merge are added (their charts must be copied into dir by hand).
func rewrite(dir string, merge []string, note, command string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	for _, m := range merge {
		if err := mergeRun(&rep, m, dir); err != nil {
			return err
		}
	}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if command != "" {
		rep.Command = command
	}
	rep.Medians = analysis.Medians(rep.Results)
	rep.Verdicts = analysis.Verdicts(rep.Medians)
	rep.HedgeChecks = analysis.HedgeVerdicts(rep.Medians)
	charts := map[string][]string{}
	for _, sc := range rep.Scenarios {
		names := []string{sc.Name + "-latency.png", sc.Name + "-p99.png"}
		if sc.Mode == "real" {
			names = []string{"real-" + sc.Name + "-p99.png", "real-" + sc.Name + "-latency.png"}
		}
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				charts[sc.Mode+"/"+sc.Name] = append(charts[sc.Mode+"/"+sc.Name], filepath.Join(dir, n))
			}
		}
	}
	if err := report.WriteJSON(filepath.Join(dir, "results.json"), &rep); err != nil {
		return err
	}
	return report.WriteMarkdown(filepath.Join(dir, "results.md"), &rep, charts)
}

// mergeRun adds the modes of the run whose results.json is at path to rep (read from dir),
// refusing a mode rep already has.
func mergeRun(rep *report.Report, path, dir string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var o report.Report
	if err := json.Unmarshal(raw, &o); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, sc := range rep.Scenarios {
		have[sc.Mode] = true
	}
	for _, sc := range o.Scenarios {
		if have[sc.Mode] {
			return fmt.Errorf("%s: mode %s is already in %s", path, sc.Mode, dir)
		}
	}
	rep.Scenarios = append(rep.Scenarios, o.Scenarios...)
	rep.Results = append(rep.Results, o.Results...)
	rep.Command += "; " + o.Command
	for _, s := range o.Strategies {
		if !slices.ContainsFunc(rep.Strategies, func(x report.StrategyJSON) bool { return x.Name == s.Name }) {
			rep.Strategies = append(rep.Strategies, s)
		}
	}
	for k, v := range o.Machine.NoiseP99Ms {
		rep.Machine.NoiseP99Ms[k] = v
	}
	rep.Machine.LoadAvgNow = o.Machine.LoadAvgNow
	rep.Machine.ElapsedS = max(rep.Machine.ElapsedS, o.Machine.ElapsedS)
	return nil
}
