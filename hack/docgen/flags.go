package main

import (
	"flag"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/detourmq/detour/internal/operator"
)

// flagsReference lists the manager's flags as cmd/manager binds them: the operator's options
// (their zap logging flags among them) and the kubeconfig.
func flagsReference(string) ([]byte, error) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	(&operator.Options{}).BindFlags(fs)
	config.RegisterFlags(fs)
	var b strings.Builder
	b.WriteString(header("Manager flags", "the manager's flag set (internal/operator.Options.BindFlags and the kubeconfig flag)"))
	b.WriteString("The flags of `manager` (the operator's image runs `/manager`); `manager --help` prints the same. " +
		"The demo, `detour-demo`, takes these too and flags of its own.\n\n")
	b.WriteString("| flag | type | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		if kind == "" {
			kind = "bool"
		}
		def := "`" + f.DefValue + "`"
		if f.DefValue == "" {
			def = "empty"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, kind, def, escapeCell(usage))
	})
	return []byte(b.String()), nil
}

// escapeCell makes text safe inside a markdown table cell.
func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
