package facade

import (
	"slices"

	"github.com/detourmq/detour/pkg/fault"
)

// CapHidden chooses, from candidates (broker name to reason), the brokers a route answer hides:
// only brokers of the route, never more than maxPercent of them (0 or 100: no limit), and never all
// of them, so a client always has a writable broker. The limit is the fault table's isolation limit
// (fault.IsolationLimit), so the facade hides what the runtime may isolate. Brokers going away are
// hidden first, then unready ones, then the rest by name: a broker being stopped is certain to
// fail, a measured isolation is a judgement.
func CapHidden(candidates map[string]string, brokers []string, maxPercent int) map[string]string {
	var in []string
	for _, b := range brokers {
		if _, ok := candidates[b]; ok && !slices.Contains(in, b) {
			in = append(in, b)
		}
	}
	limit, capped := fault.IsolationLimit(len(brokers), maxPercent)
	if !capped {
		limit = max(len(brokers)-1, 0)
	}
	rank := func(reason string) int {
		switch reason {
		case string(fault.ReasonPodTerminating):
			return 0
		case string(fault.ReasonPodNotReady):
			return 1
		default:
			return 2
		}
	}
	slices.SortFunc(in, func(a, b string) int {
		if ra, rb := rank(candidates[a]), rank(candidates[b]); ra != rb {
			return ra - rb
		}
		if a < b {
			return -1
		}
		return 1
	})
	out := map[string]string{}
	for _, b := range in[:max(0, min(limit, len(in)))] {
		out[b] = candidates[b]
	}
	return out
}
