package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// TestSetRegistersEveryDetourSeriesOnceUnderOneName proves one Register puts every collector in
// a registry, each series named detour_* and none twice, and that a second set in the same
// registry is refused instead of serving a series twice.
func TestSetRegistersEveryDetourSeriesOnceUnderOneName(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	set := NewSet()
	if err := set.Register(reg); err != nil {
		t.Fatal(err)
	}
	set.Runtime.SendDone("T", producer.ModeSync, 1, 0, nil)
	set.Runtime.AttemptDone("ns/p", "ns/broker-a", 0, fault.Success)
	set.Facade.RouteServed("T", true)
	set.Gateway.Series(200).Requests.Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "detour_") {
			t.Errorf("series %s is not named detour_*", mf.GetName())
		}
		if seen[mf.GetName()] {
			t.Errorf("series %s gathered twice", mf.GetName())
		}
		seen[mf.GetName()] = true
	}
	for _, name := range []string{"detour_sends_total", "detour_send_attempts_total", "detour_namesrv_facade_routes_total", "detour_gateway_requests_total"} {
		if !seen[name] {
			t.Errorf("no %s among %v", name, seen)
		}
	}
	if err := NewSet().Register(reg); err == nil {
		t.Error("a second set registered in the same registry, so its series would be served twice")
	}
}
