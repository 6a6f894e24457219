package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// architecturePage is the page whose package map docgen holds to the module's packages.
const architecturePage = "docs/design/architecture.md"

// packageMapHeading opens the page's package map. Under it each "### " heading starts a floor,
// lowest first, and each table row whose first cell is a code span names one package by its
// folder from the repository's root. The map ends at the next "## " heading.
const packageMapHeading = "## Every package"

// packageMap is what the page says of the packages: the floors in order and each package's floor.
type packageMap struct {
	floors []string
	floor  map[string]int
	// twice are the packages named more than once.
	twice []string
}

// readPackageMap reads the package map out of the page's markdown.
func readPackageMap(page string) (packageMap, error) {
	m := packageMap{floor: map[string]int{}}
	in := false
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == packageMapHeading
		case !in:
		case strings.HasPrefix(line, "### "):
			m.floors = append(m.floors, strings.TrimSpace(strings.TrimPrefix(line, "### ")))
		case strings.HasPrefix(line, "| `"):
			if len(m.floors) == 0 {
				return m, fmt.Errorf("%s: package row %q before the first floor heading", architecturePage, line)
			}
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			pkg := strings.TrimSuffix(cell, "/")
			if _, seen := m.floor[pkg]; seen {
				m.twice = append(m.twice, pkg) // the first naming keeps its floor
				continue
			}
			m.floor[pkg] = len(m.floors) - 1
		}
	}
	if len(m.floor) == 0 {
		return m, fmt.Errorf("%s: no package map under %q", architecturePage, packageMapHeading)
	}
	return m, sc.Err()
}

// modulePackages lists the module's packages under root, each as its folder from root, with the
// module's packages it imports (not counting its tests), from `go list ./...`.
func modulePackages(root string) (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %w", err)
	}
	mod := exec.Command("go", "list", "-m")
	mod.Dir = root
	modPath, err := mod.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	prefix := strings.TrimSpace(string(modPath)) + "/"
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		var imports []string
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, prefix); ok {
				imports = append(imports, rel)
			}
		}
		pkgs[strings.TrimPrefix(fields[0], prefix)] = imports
	}
	return pkgs, nil
}

// mapProblems says where the page's map and the packages disagree: a package the map does not
// name, a name with no package, a package named twice, and an import that runs up to a higher
// floor than the importer's.
func mapProblems(m packageMap, pkgs map[string][]string) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		f, ok := m.floor[pkg]
		if !ok {
			problems = append(problems, pkg+": a package the map does not name")
			continue
		}
		for _, imp := range pkgs[pkg] {
			if g, ok := m.floor[imp]; ok && g > f {
				problems = append(problems, fmt.Sprintf("%s (%s) imports %s (%s), a floor above it", pkg, m.floors[f], imp, m.floors[g]))
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(m.floor)) {
		if _, ok := pkgs[pkg]; !ok {
			problems = append(problems, pkg+": named by the map, but there is no such package")
		}
	}
	for _, pkg := range m.twice {
		problems = append(problems, pkg+": named more than once")
	}
	return problems
}

// architectureProblems holds the architecture page under root to the module's packages.
func architectureProblems(root string) ([]string, error) {
	page, err := os.ReadFile(filepath.Join(root, architecturePage))
	if err != nil {
		return nil, err
	}
	m, err := readPackageMap(string(page))
	if err != nil {
		return nil, err
	}
	pkgs, err := modulePackages(root)
	if err != nil {
		return nil, err
	}
	return mapProblems(m, pkgs), nil
}
