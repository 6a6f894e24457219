//go:build tools

// Package tools pins the versions of the code generators the Makefile runs, so `go run` uses
// exactly the version recorded in go.mod.
package tools

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
