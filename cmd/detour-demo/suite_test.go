package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var (
	repoRoot string
	// suiteDir holds the suite's files; it is removed when the tests end.
	suiteDir string
)

// TestMain finds the repository and a folder for the built demo. The demo tests need the envtest
// control plane: without KUBEBUILDER_ASSETS they fail rather than skip, so a green run always
// means they ran. Under -short (make test-unit) the demo tests skip (needsEnvtest).
func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// needsEnvtest skips a test under -short: the fast tier (make test-unit) runs no control plane.
func needsEnvtest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the envtest control plane; skipped under -short")
	}
}

func runSuite(m *testing.M) int {
	flag.Parse()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" && !testing.Short() {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or "+
			"KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./cmd/detour-demo/")
		return 1
	}
	var err error
	if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "detour-demo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	suiteDir = dir
	return m.Run()
}
