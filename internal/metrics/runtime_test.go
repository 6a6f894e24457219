package metrics

import (
	"testing"

	"github.com/detourmq/detour/pkg/fault"
)

// TestOutcomeLabelsNameEveryOutcome proves every attempt outcome has its own metric label, the
// caller giving up (Interrupted) included.
func TestOutcomeLabelsNameEveryOutcome(t *testing.T) {
	seen := map[string]bool{}
	for o := fault.Success; o <= fault.Interrupted; o++ {
		l := outcomeLabel(o)
		if l == "unknown" || seen[l] {
			t.Errorf("outcome %v labelled %q", o, l)
		}
		seen[l] = true
	}
}
