// Package report writes the fault benchmark's outputs: results.json (every number, the
// definitions and each run's applied fault timeline), results.md (what was compared and how,
// the verdicts, the doors and the facade against the targets, the medians and every run), the
// PNG charts and, on request, every send and attempt as CSV. It reads results and records only.
package report
