// Command golangci-lint is golangci-lint v2 with kube-api-linter's module plugin compiled in: what
// `golangci-lint custom` would produce from a .custom-gcl.yml naming sigs.k8s.io/kube-api-linter,
// built from the two published Go modules instead, since `custom` clones golangci-lint's sources
// with git rather than reading its module. `make verify` runs it with .golangci-kal.yml over api/.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// Registers the kubeapilinter module plugin, as the plugins.go that `custom` writes does.
	_ "sigs.k8s.io/kube-api-linter"
)

func main() {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", Date: "(unknown)", GoVersion: "unknown"}
	// Both versions come from this module's go.mod, so `version` names what really ran.
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		gcl, kal := "unknown", "unknown"
		for _, dep := range bi.Deps {
			switch dep.Path {
			case "github.com/golangci/golangci-lint/v2":
				gcl = strings.TrimPrefix(dep.Version, "v")
			case "sigs.k8s.io/kube-api-linter":
				kal = dep.Version
			}
		}
		info.Version = gcl + ", kube-api-linter " + kal
	}
	if err := commands.Execute(info); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}
