package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestArchitecturePageMapsEveryPackage holds docs/design/architecture.md to `go list ./...`:
// every package named once, none that does not exist, no import up a floor.
func TestArchitecturePageMapsEveryPackage(t *testing.T) {
	problems, err := architectureProblems(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("%s:\n%s", architecturePage, strings.Join(problems, "\n"))
	}
}

// mapPage is a package map of three floors, in the page's markdown, with a table and a code
// block outside the map that must not count.
const mapPage = "# Architecture\n\n| `not/in/the/map` | a table before the map |\n\n" +
	"## Every package\n\n### 1. Libraries\n\n| package | what |\n|---|---|\n| `pkg/a` | a |\n| `pkg/b/` | b |\n\n" +
	"### 2. Controllers\n\n| `controllers` | c |\n\n### 3. Commands\n\n| `cmd/x` | x |\n\n## After the map\n\n| `pkg/after` | no |\n"

// TestMapProblemsFindsWhatTheMapGetsWrong proves the check can fail: each way a map and the
// packages can disagree is named, and a map that agrees has no problem.
func TestMapProblemsFindsWhatTheMapGetsWrong(t *testing.T) {
	agreeing := map[string][]string{"pkg/a": nil, "pkg/b": {"pkg/a"}, "controllers": {"pkg/a", "pkg/b"}, "cmd/x": {"controllers"}}
	for _, tc := range []struct {
		name string
		page string
		pkgs map[string][]string
		want []string
	}{
		{name: "agreeing", page: mapPage, pkgs: agreeing},
		{name: "a package the map leaves out", page: mapPage, pkgs: with(agreeing, "pkg/new", nil),
			want: []string{"pkg/new: a package the map does not name"}},
		{name: "a name whose package is gone", page: mapPage, pkgs: without(agreeing, "pkg/b"),
			want: []string{"pkg/b: named by the map, but there is no such package"}},
		{name: "a package named twice", page: strings.Replace(mapPage, "| `cmd/x` | x |", "| `cmd/x` | x |\n| `pkg/a` | again |", 1), pkgs: agreeing,
			want: []string{"pkg/a: named more than once"}},
		{name: "an import up a floor", page: mapPage, pkgs: with(agreeing, "pkg/a", []string{"controllers"}),
			want: []string{"pkg/a (1. Libraries) imports controllers (2. Controllers), a floor above it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := readPackageMap(tc.page)
			if err != nil {
				t.Fatal(err)
			}
			if got := mapProblems(m, tc.pkgs); !slices.Equal(got, tc.want) {
				t.Errorf("problems = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadPackageMapRefusesAPageWithoutAMap proves a page whose map was renamed or emptied is an
// error, not a map that names nothing and so a check of nothing.
func TestReadPackageMapRefusesAPageWithoutAMap(t *testing.T) {
	for _, page := range []string{
		strings.Replace(mapPage, packageMapHeading, "## Packages", 1),
		"## Every package\n\n| `pkg/a` | a row before any floor |\n",
	} {
		if _, err := readPackageMap(page); err == nil {
			t.Errorf("readPackageMap(%q) = nil error", page)
		}
	}
}

// with is pkgs with pkg importing imports.
func with(pkgs map[string][]string, pkg string, imports []string) map[string][]string {
	out := map[string][]string{pkg: imports}
	for k, v := range pkgs {
		if k != pkg {
			out[k] = v
		}
	}
	return out
}

// without is pkgs without pkg.
func without(pkgs map[string][]string, pkg string) map[string][]string {
	out := map[string][]string{}
	for k, v := range pkgs {
		if k != pkg {
			out[k] = v
		}
	}
	return out
}
