package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestEveryRelativeLinkInTheDocsResolves holds README.md, CHANGELOG.md, docs/ and bench/ to links
// that point at files that exist.
func TestEveryRelativeLinkInTheDocsResolves(t *testing.T) {
	broken, err := brokenLinks(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) > 0 {
		t.Fatalf("broken links:\n%s", strings.Join(broken, "\n"))
	}
}

// TestBrokenLinksAreFoundOutsideCode proves the check can fail: a link to a missing file is
// reported, with and without an anchor, while links in code, URLs and anchors are not.
func TestBrokenLinksAreFoundOutsideCode(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	readme := "[ok](docs/a.md) [gone](docs/missing.md) [anchor](docs/gone.md#x) [web](https://example.com/x)\n" +
		"[here](#top) `[code](nowhere.md)` `` [pattern`](x.md) ``\n```\n[fenced](nowhere.md)\n```\n"
	for name, text := range map[string]string{"README.md": readme, "docs/a.md": "[up](../README.md)\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	broken, err := brokenLinks(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md: docs/gone.md#x", "README.md: docs/missing.md"}
	if !reflect.DeepEqual(broken, want) {
		t.Fatalf("broken = %q, want %q", broken, want)
	}
}

// TestMetricsPageListsEveryCollectorsSeries checks the metrics page against series the operator
// is known to serve from each of its collectors, so a collector left out of the lists shows.
func TestMetricsPageListsEveryCollectorsSeries(t *testing.T) {
	page, err := metricsReference("")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"detour_sends_total", "detour_namesrv_facade_routes_total", "detour_policy_brokers",
		"detour_broker_pressed", "detour_gateway_requests_total", "detour_gateway_requests_in_flight",
	} {
		if !strings.Contains(string(page), "| `"+name+"` |") {
			t.Errorf("metrics page lacks %s", name)
		}
	}
}
