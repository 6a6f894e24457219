// Package realenv is the fault benchmark's real-broker mode: one real Apache RocketMQ cluster
// (env.go) whose bad broker the fault actions stop, kill, restart, stall, flood or hang behind a
// gate and restore after every run (faults.go, busy.go, hang.go); RocketMQ's own Java producers
// and gRPC SDK run in a JVM on the same paced schedule as the Go strategies (java.go), with
// detour's side of a Java strategy beside them: its runtime, canary, name-server facade or gRPC
// endpoint (side.go, grpc.go).
package realenv
