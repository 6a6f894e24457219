package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// grafanaDashboards reads the dashboards of config/grafana (written by make manifests), by file
// name.
func grafanaDashboards(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "grafana", "*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("want the overview and broker dashboards in config/grafana, found %v (%v)", files, err)
	}
	dashboards := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dashboards[filepath.Base(f)] = string(data)
	}
	return dashboards
}

// checkDashboardConfigMaps fails unless objs hold, for each dashboard of config/grafana, exactly
// one ConfigMap in namespace carrying it whole under its file name, with the sidecar's label.
func checkDashboardConfigMaps(t *testing.T, objs []*unstructured.Unstructured, namespace, label, value string) {
	t.Helper()
	want := grafanaDashboards(t)
	found := map[string]int{}
	for _, u := range objs {
		if u.GetKind() != "ConfigMap" {
			continue
		}
		cm := converted[corev1.ConfigMap](t, u)
		for file, text := range want {
			got, ok := cm.Data[file]
			if !ok {
				continue
			}
			found[file]++
			if strings.TrimSpace(got) != strings.TrimSpace(text) {
				t.Errorf("ConfigMap %s does not carry config/grafana/%s as it is", cm.Name, file)
			}
			if cm.Namespace != namespace || cm.Labels[label] != value {
				t.Errorf("ConfigMap %s in %q with labels %v, want namespace %q and %s=%q", cm.Name, cm.Namespace, cm.Labels, namespace, label, value)
			}
		}
	}
	for file := range want {
		if found[file] != 1 {
			t.Errorf("%d ConfigMaps carry %s, want 1", found[file], file)
		}
	}
}

// TestHelmChartRendersTheDashboards proves the chart renders no dashboard by default, and with
// dashboards.enabled one ConfigMap per dashboard of config/grafana, in the namespace and with the
// labels the values give (the Grafana sidecar's label by default).
func TestHelmChartRendersTheDashboards(t *testing.T) {
	if _, objs := renderChart(t, "detour", "detour-system"); len(objectsOfKind(objs, "ConfigMap")) != 0 {
		t.Errorf("the chart renders ConfigMaps by default: %v", objectsOfKind(objs, "ConfigMap"))
	}
	for _, tc := range []struct {
		name                    string
		values                  []string
		namespace, label, value string
	}{
		{"the sidecar's label in the release namespace", []string{"--set", "dashboards.enabled=true"}, "detour-system", "grafana_dashboard", "1"},
		{"a namespace and label of one's own", []string{"--set", "dashboards.enabled=true,dashboards.namespace=monitoring",
			"--set", "dashboards.labels.grafana_dashboard=null,dashboards.labels.team=mq"}, "monitoring", "team", "mq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lintChart(t, tc.values...)
			_, objs := renderChart(t, "detour", "detour-system", tc.values...)
			checkDashboardConfigMaps(t, objs, tc.namespace, tc.label, tc.value)
			for _, cm := range objectsOfKind(objs, "ConfigMap") {
				if _, ok := cm.GetLabels()["grafana_dashboard"]; ok && tc.label != "grafana_dashboard" {
					t.Errorf("ConfigMap %s keeps the label grafana_dashboard the values removed", cm.GetName())
				}
			}
		})
	}
}

// TestGrafanaComponentMakesTheDashboards proves config/grafana, added as a kustomize component,
// makes one ConfigMap per dashboard with the sidecar's label and a name without a hash (so a new
// version replaces the old one).
func TestGrafanaComponentMakesTheDashboards(t *testing.T) {
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(repoRoot, "config", "grafana"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "namespace: monitoring\ncomponents:\n- " + filepath.ToSlash(rel) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	_, objs := renderKustomization(t, dir)
	checkDashboardConfigMaps(t, objs, "monitoring", "grafana_dashboard", "1")
	for _, name := range []string{"overview-dashboard", "broker-dashboard"} {
		if findObjectIn(objs, "ConfigMap", "monitoring", name) == nil {
			t.Errorf("no ConfigMap %s: a hashed name would leave the old dashboard behind", name)
		}
	}
}

// objectsOfKind returns the objects of one kind.
func objectsOfKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}
