package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// root is the repository's root, seen from this module's folder.
const root = "../.."

// targetLabels are the labels Prometheus adds to every series it scrapes from the manager's pods
// (a ServiceMonitor's endpoints): a query may select and group by them as well as by the
// collectors' own.
var targetLabels = []string{"namespace", "pod", "instance", "job", "service", "container", "endpoint"}

// registered maps each metric the manager serves to the labels its series carry: the collectors'
// own, read from docs/reference/metrics.md, which hack/docgen writes from their descriptions. A
// histogram's series are its _bucket (with le), _sum and _count.
func registered(t *testing.T) map[string]map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile("^\\| `(detour_[a-z0-9_]+)` \\| ([a-z ]+) \\| ([^|]*) \\|")
	labelRE := regexp.MustCompile("`([a-z_]+)`")
	metrics := map[string]map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]bool{}
		for _, l := range append(targetLabels, "__name__") {
			labels[l] = true
		}
		for _, l := range labelRE.FindAllStringSubmatch(m[3], -1) {
			labels[l[1]] = true
		}
		if m[2] != "histogram" {
			metrics[m[1]] = labels
			continue
		}
		metrics[m[1]+"_sum"], metrics[m[1]+"_count"] = labels, labels
		bucket := map[string]bool{"le": true}
		for l := range labels {
			bucket[l] = true
		}
		metrics[m[1]+"_bucket"] = bucket
	}
	if len(metrics) < 20 {
		t.Fatalf("read only %d metrics from docs/reference/metrics.md: has its table changed?", len(metrics))
	}
	return metrics
}

// grafanaVariables are the placeholders Grafana fills in before a query reaches Prometheus,
// replaced here by what they stand for so Prometheus' parser reads the query as Prometheus will.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// promQL is Prometheus' parser with the options a Prometheus server starts with.
var promQL = parser.NewParser(parser.Options{})

// check parses one query with Prometheus' parser and returns what in it the manager does not
// serve: a metric not registered, or a label a selector matches, or an aggregation or vector
// match groups by, that the metrics beneath it do not all carry.
func check(expr string, metrics map[string]map[string]bool) []string {
	expr = grafanaVariables.Replace(expr)
	parsed, err := promQL.ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			labels, ok := metrics[n.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("metric %s is not registered", n.Name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if !labels[m.Name] {
					problems = append(problems, fmt.Sprintf("%s has no label %s", n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			problems = append(problems, grouped(n.Expr, n.Grouping, metrics)...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				problems = append(problems, grouped(n.LHS, n.VectorMatching.MatchingLabels, metrics)...)
				problems = append(problems, grouped(n.RHS, n.VectorMatching.MatchingLabels, metrics)...)
			}
		}
		return nil
	})
	return problems
}

// grouped returns the labels of a grouping that a metric selected under expr does not carry.
func grouped(expr parser.Expr, labels []string, metrics map[string]map[string]bool) []string {
	var problems []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if v, ok := node.(*parser.VectorSelector); ok && metrics[v.Name] != nil {
			for _, l := range labels {
				if !metrics[v.Name][l] {
					problems = append(problems, fmt.Sprintf("grouped by %s, which %s does not carry", l, v.Name))
				}
			}
		}
		return nil
	})
	return problems
}

// labelValues reads Grafana's label_values(<selector>, <label>) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.*), *([a-zA-Z_]+)\)$`)

// dashboardQueries returns every query of the dashboards in config/grafana, named by file and
// panel: each panel's targets, and each variable's label_values query as a grouping by its label.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "config", "grafana", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in config/grafana (%v)", err)
	}
	queries := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					RefID string `json:"refId"`
					Expr  string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Name  string `json:"name"`
					Type  string `json:"type"`
					Query string `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				queries[fmt.Sprintf("%s: panel %q query %s", filepath.Base(f), p.Title, q.RefID)] = q.Expr
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Query)
			if m == nil {
				t.Fatalf("%s: variable %s is not a label_values query: %s", f, v.Name, v.Query)
			}
			queries[fmt.Sprintf("%s: variable %s", filepath.Base(f), v.Name)] = "count by (" + m[2] + ") (" + m[1] + ")"
		}
	}
	return queries
}

// alertExpressions returns each alerting rule's expression in config/prometheus/alerts.yaml.
func alertExpressions(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	if len(exprs) == 0 {
		t.Fatal("no alerting rules in config/prometheus/alerts.yaml")
	}
	return exprs
}

// TestEveryQueryNamesOnlyWhatTheManagerServes parses every dashboard panel's query and every
// shipped alert's expression with Prometheus' parser, and fails on a metric or label the
// manager's collectors do not describe: a renamed metric would otherwise leave a blank panel, or
// an alert that never fires.
func TestEveryQueryNamesOnlyWhatTheManagerServes(t *testing.T) {
	metrics := registered(t)
	queries := dashboardQueries(t)
	for name, expr := range alertExpressions(t) {
		queries[name] = expr
	}
	names := make([]string, 0, len(queries))
	for name := range queries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, problem := range check(queries[name], metrics) {
			t.Errorf("%s: %s\n\t%s", name, problem, queries[name])
		}
	}
	t.Logf("checked %d queries against %d registered series names", len(queries), len(metrics))
}

// TestCheckReportsWhatTheManagerDoesNotServe proves the check above can fail: each query names
// something the manager does not serve, or does not parse, and is reported.
func TestCheckReportsWhatTheManagerDoesNotServe(t *testing.T) {
	metrics := registered(t)
	for _, tc := range []struct{ name, expr, want string }{
		{"unregistered metric", `sum(rate(detour_sends_totl[5m]))`, "metric detour_sends_totl is not registered"},
		{"unregistered label in a selector", `detour_isolated_brokers{broker="a"}`, "detour_isolated_brokers has no label broker"},
		{"grouping by a label the metric lacks", `sum by (door) (rate(detour_sends_total[$__rate_interval]))`, "grouped by door, which detour_sends_total does not carry"},
		{"vector matching on a label one side lacks", `detour_isolated_brokers / on (broker) detour_policy_brokers`, "grouped by broker, which detour_isolated_brokers does not carry"},
		{"le on a histogram's count", `sum by (le) (rate(detour_gateway_request_duration_seconds_count[5m]))`, "grouped by le"},
		{"not PromQL", `sum(rate(detour_sends_total[5m])`, "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := check(tc.expr, metrics)
			if !strings.Contains(strings.Join(problems, "\n"), tc.want) {
				t.Errorf("check(%q) = %q, want a problem saying %q", tc.expr, problems, tc.want)
			}
		})
	}
	for _, expr := range []string{
		`histogram_quantile(0.99, sum by (le, method) (rate(detour_grpc_call_duration_seconds_bucket{namespace="x"}[$__rate_interval])))`,
		`max by (namespace, policy) (detour_isolated_brokers) > 0.5 * max by (namespace, policy) (detour_policy_brokers)`,
	} {
		if problems := check(expr, metrics); len(problems) != 0 {
			t.Errorf("check(%q) = %q, want none: the manager serves all it names", expr, problems)
		}
	}
}

// TestEveryPanelIsDescribedInTheMonitoringTask proves docs/tasks/monitoring.md names every
// dashboard's panels, so the page that says what each panel answers keeps up with the dashboards.
func TestEveryPanelIsDescribedInTheMonitoringTask(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "tasks", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range boards() {
		if !strings.Contains(string(data), "### "+b.title+"\n") {
			t.Errorf("docs/tasks/monitoring.md has no section \"### %s\"", b.title)
		}
		for _, r := range b.rows {
			for _, p := range r.panels {
				if !strings.Contains(string(data), "| "+r.title+" | "+p.title+" | ") {
					t.Errorf("docs/tasks/monitoring.md has no row for panel %q of %s (row %s)", p.title, b.title, r.title)
				}
			}
		}
	}
}
