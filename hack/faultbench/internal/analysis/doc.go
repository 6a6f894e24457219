// Package analysis turns a run's records into its result (latency percentiles, the share of
// sends that reached the bad broker, when detour detected and isolated it, fairness checks),
// summarizes the repetitions into medians and judges detour's medians against the targets and
// the Java producers. It reads records only: it needs no driver and no broker.
package analysis
