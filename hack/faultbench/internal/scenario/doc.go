// Package scenario is the fault benchmark's vocabulary: the scenarios (the three brokers, the
// one that goes bad and the schedule of fault actions that makes it bad, in brokersim and on real
// brokers), the parameters of a run's workload, and what a run records (every send, attempt,
// isolation change and applied fault step). Every other room of the benchmark speaks in these
// types; this package needs none of them.
package scenario
