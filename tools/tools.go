//go:build tools

// Package tools pins the versions of the code generators the Makefile runs, so `go run` uses
// exactly the version recorded in go.mod.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
