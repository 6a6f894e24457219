package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// alertRule is one rule of the PrometheusRule's groups, as much as the tests read.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Annotations map[string]string `json:"annotations"`
}

// prometheusRuleSpec reads config/prometheus/alerts.yaml and returns its spec (Prometheus' own
// rule-file format) and the rules in it.
func prometheusRuleSpec(t *testing.T) (map[string]any, []alertRule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil || obj.Kind != "PrometheusRule" {
		t.Fatalf("config/prometheus/alerts.yaml is not a PrometheusRule (kind %q): %v", obj.Kind, err)
	}
	var groups struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	raw, _ := yaml.Marshal(obj.Spec)
	if err := yaml.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return obj.Spec, rules
}

// promtoolPath is the promtool `make test` finds or installs with hack/setup-promtool.sh and
// passes in DETOUR_PROMTOOL; without it the rules' tests fail rather than skip, and under -short
// (make test-unit) they skip.
func promtoolPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs promtool; skipped under -short")
	}
	path := os.Getenv("DETOUR_PROMTOOL")
	if path == "" {
		t.Fatal("DETOUR_PROMTOOL is not set: run `make test`, or DETOUR_PROMTOOL=$(hack/setup-promtool.sh) go test ./test/deploy/")
	}
	return path
}

// TestAlertingRulesPassTheirUnitTests hands promtool the PrometheusRule's rules as a rule file,
// checks them, and runs their unit tests (config/prometheus/alerts_test.yaml), which fire each
// alert on the series it is written for and keep it quiet on the near misses.
func TestAlertingRulesPassTheirUnitTests(t *testing.T) {
	promtool := promtoolPath(t)
	spec, _ := prometheusRuleSpec(t)
	dir := t.TempDir()
	rules, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"alerts.rules.yaml": rules, "alerts_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "alerts.rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertHasAFiringTestAndARunbook proves each alert is fired by at least one case of the
// rules' unit tests and links a runbook section that docs/tasks/alerts.md has.
func TestEveryAlertHasAFiringTestAndARunbook(t *testing.T) {
	_, rules := prometheusRuleSpec(t)
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	runbook, err := os.ReadFile(filepath.Join(repoRoot, "docs", "tasks", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`(?m)^## (\S+)$`)
	anchors := map[string]bool{}
	for _, m := range heading.FindAllSubmatch(runbook, -1) {
		anchors[strings.ToLower(string(m[1]))] = true
	}
	if len(rules) == 0 {
		t.Fatal("no alerting rules")
	}
	for _, r := range rules {
		if !fired[r.Alert] {
			t.Errorf("alert %s: no unit test expects it to fire", r.Alert)
		}
		want := "docs/tasks/alerts.md#" + strings.ToLower(r.Alert)
		if r.Annotations["runbook"] != want {
			t.Errorf("alert %s: runbook annotation %q, want %q", r.Alert, r.Annotations["runbook"], want)
		}
		if !anchors[strings.ToLower(r.Alert)] {
			t.Errorf("alert %s: docs/tasks/alerts.md has no section \"## %s\"", r.Alert, r.Alert)
		}
	}
}

// TestHelmChartRendersTheAlertingRules proves the chart's PrometheusRule, when enabled, carries
// exactly config/prometheus's rules, with the labels a Prometheus' rule selector asks for, and
// that the chart renders none by default (most clusters have no Prometheus Operator CRDs).
func TestHelmChartRendersTheAlertingRules(t *testing.T) {
	spec, _ := prometheusRuleSpec(t)
	if _, objs := renderChart(t, "detour", "detour-system"); findObject(objs, "PrometheusRule", "detour-manager-alerts") != nil {
		t.Error("the chart renders a PrometheusRule by default")
	}
	values := []string{"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=prometheus"}
	lintChart(t, values...)
	_, objs := renderChart(t, "detour", "detour-system", values...)
	rule := findObject(objs, "PrometheusRule", "detour-manager-alerts")
	if rule == nil {
		t.Fatal("no PrometheusRule detour-manager-alerts rendered with prometheusRule.enabled=true")
	}
	if rule.GetNamespace() != "detour-system" || rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule in %q with labels %v, want detour-system and release=prometheus", rule.GetNamespace(), rule.GetLabels())
	}
	got, _ := yaml.Marshal(rule.Object["spec"])
	want, _ := yaml.Marshal(spec)
	if !bytes.Equal(got, want) {
		var g, w any
		_ = yaml.Unmarshal(got, &g)
		_ = yaml.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("the chart's rules differ from config/prometheus/alerts.yaml:\n%s\nwant\n%s", got, want)
		}
	}
}
