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

// module is this repository's module path.
const module = "github.com/detourmq/detour"

// managerPackage is this command's import path, the root of `go list -deps`.
const managerPackage = module + "/cmd/manager"

// testFloors are the folders whose packages exist only for tests: the test-support packages and
// the test tiers. Nothing the manager links may come from them; a new helper put there is covered
// without touching this file.
var testFloors = []string{
	module + "/internal/testsupport/",
	module + "/test/",
}

// otherBinaries are packages that are not test support but belong to other commands and must not
// reach the production image either: the envtest control plane (its port cache makes a folder at
// start, which a read-only root does not have), the simulated brokers and the demo that drives
// them.
var otherBinaries = []string{
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"sigs.k8s.io/controller-runtime/pkg/internal/testing",
	module + "/pkg/brokersim",
	module + "/internal/demo",
}

// TestManagerLinksNoTestSupport proves the manager's dependencies, as `go list -deps` reports
// them, hold no package under the test floors nor of the other binaries.
func TestManagerLinksNoTestSupport(t *testing.T) {
	root, found := forbiddenLinks(t, ".")
	if root != managerPackage {
		t.Fatalf("go list -deps named %s last, want %s", root, managerPackage)
	}
	for _, v := range found {
		t.Errorf("the manager links %s", v)
	}
}

// TestForbiddenLinksFindsTestSupport proves the rule above can fail: run on packages known to
// link a test-support package or to be one, it names the package and the import chain to it.
func TestForbiddenLinksFindsTestSupport(t *testing.T) {
	for _, tc := range []struct {
		root, want string
	}{
		// The fault benchmark starts real RocketMQ through rmqtest, in its real-cluster room.
		{"../../hack/faultbench", module + "/hack/faultbench -> " + module + "/hack/faultbench/internal/realenv -> " +
			module + "/internal/testsupport/rmqtest"},
		// A test tier's own package is under test/.
		{"../../test/compat", module + "/test/compat"},
		// The demo command links the demo and the simulated brokers.
		{"../detour-demo", module + "/cmd/detour-demo -> " + module + "/internal/demo"},
	} {
		t.Run(tc.root, func(t *testing.T) {
			_, found := forbiddenLinks(t, tc.root)
			if !slices.ContainsFunc(found, func(v string) bool { return strings.HasSuffix(v, ": "+tc.want) }) {
				t.Errorf("forbiddenLinks(%s) = %q, want a chain %q", tc.root, found, tc.want)
			}
		})
	}
}

// forbiddenLinks lists, for the package in folder dir (root, its import path) and everything it
// links, each package under a test floor or of another binary, as "package: import chain".
func forbiddenLinks(t *testing.T, dir string) (root string, found []string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in %s: %v", dir, err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		imports[fields[0]] = fields[1:]
		root = fields[0] // go list -deps lists the named package last
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		if forbidden(pkg) {
			found = append(found, pkg+": "+strings.Join(importChain(imports, root, pkg), " -> "))
		}
	}
	return root, found
}

// forbidden says whether pkg is under a test floor or one of the other binaries' packages.
func forbidden(pkg string) bool {
	for _, floor := range testFloors {
		if strings.HasPrefix(pkg, floor) {
			return true
		}
	}
	for _, bad := range otherBinaries {
		if pkg == bad || strings.HasPrefix(pkg, bad+"/") {
			return true
		}
	}
	return false
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
