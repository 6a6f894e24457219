package operator

import (
	"sync"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/detourmq/detour/pkg/metrics"
)

// processMetrics returns the process's collectors, registered in controller-runtime's registry
// (which the manager's metrics endpoint serves) the first time. That registry is one per
// process, so every operator of the process counts into one set: a process runs one operator,
// and tests that start several in turn see each newest runtime in the figures computed at scrape
// (controllers.Setup points them at it).
var processMetrics = sync.OnceValue(func() *metrics.Set {
	set := metrics.NewSet()
	if err := set.Register(ctrlmetrics.Registry); err != nil {
		panic("registering detour's metrics: " + err.Error()) // a name clash is a bug of this binary
	}
	return set
})
