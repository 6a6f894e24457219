// Package drivers runs the fault benchmark's Go strategies: a Driver sends one message the way a
// strategy does (detour's runtime with a policy, rocketmq-client-go, or an HTTP client through
// detour's send gateway) and records each send's brokers, while a Recorder collects the attempts
// and isolation changes of the measured part of a run.
package drivers
