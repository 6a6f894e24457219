package main

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// managerPackage is this command's import path, the root of `go list -deps`.
const managerPackage = "github.com/detourmq/detour/cmd/manager"

// testOnly are the packages (and their subpackages) the production image must not link: the
// envtest control plane (its port cache makes a folder at start, which a read-only root does not
// have), the simulated brokers, the demo that drives them and the test-support packages.
var testOnly = []string{
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"sigs.k8s.io/controller-runtime/pkg/internal/testing",
	"github.com/detourmq/detour/pkg/brokersim",
	"github.com/detourmq/detour/internal/demo",
	"github.com/detourmq/detour/internal/testsupport/rmqtest",
	"github.com/detourmq/detour/internal/testsupport/nstest",
}

// TestManagerLinksNoTestSupport proves the manager's dependencies, as `go list -deps` reports
// them, hold none of the test-only packages, and names the import chain that brings one in.
func TestManagerLinksNoTestSupport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		imports[fields[0]] = fields[1:]
	}
	if _, ok := imports[managerPackage]; !ok {
		t.Fatalf("go list -deps did not list %s:\n%s", managerPackage, out)
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		for _, bad := range testOnly {
			if pkg == bad || strings.HasPrefix(pkg, bad+"/") {
				t.Errorf("the manager links %s: %s", pkg, strings.Join(importChain(imports, managerPackage, pkg), " -> "))
			}
		}
	}
}

// importChain is the shortest chain of imports from root to pkg.
func importChain(imports map[string][]string, root, pkg string) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var chain []string
			for ; p != ""; p = parent[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, next := range imports[p] {
			if _, seen := parent[next]; !seen {
				parent[next] = p
				queue = append(queue, next)
			}
		}
	}
	return []string{root, "...", pkg}
}

// TestManagerStartsWithoutATempDir proves the manager writes nothing at start-up where a
// read-only root with no /tmp (the Deployment's) has no place for it: with no home and a
// temporary folder that cannot be created, it still gets as far as its flags.
func TestManagerStartsWithoutATempDir(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--help")
	cmd.Env = []string{"TMPDIR=" + filepath.Join(notADir, "tmp"), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("manager --help without a usable temporary folder: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-gateway-bind-address") {
		t.Errorf("manager --help printed no flags:\n%s", out)
	}
}
