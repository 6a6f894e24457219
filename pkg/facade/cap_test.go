package facade

import (
	"maps"
	"testing"

	"github.com/detourmq/detour/pkg/fault"
)

func TestCapHiddenKeepsAWritableBrokerAndTheCap(t *testing.T) {
	term, unready, failed := string(fault.ReasonPodTerminating), string(fault.ReasonPodNotReady), string(fault.ReasonSendFailed)
	abc := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name       string
		candidates map[string]string
		brokers    []string
		percent    int
		want       map[string]string
	}{
		{"nothing to hide", nil, abc, 0, map[string]string{}},
		{"one isolated broker is hidden", map[string]string{"b": failed}, abc, 0, map[string]string{"b": failed}},
		{"never every broker of the route", map[string]string{"a": failed, "b": failed, "c": failed}, abc, 0,
			map[string]string{"a": failed, "b": failed}},
		{"a single-broker route stays writable", map[string]string{"a": failed}, []string{"a"}, 0, map[string]string{}},
		{"candidates outside the route are ignored", map[string]string{"x": failed, "b": failed}, abc, 0,
			map[string]string{"b": failed}},
		{"the cap counts brokers of the route", map[string]string{"a": failed, "b": failed}, abc, 50,
			map[string]string{"a": failed}},
		{"a cap of 100 is no cap", map[string]string{"a": failed, "b": failed}, abc, 100,
			map[string]string{"a": failed, "b": failed}},
		{"terminating pods go first, then unready ones", map[string]string{"a": failed, "b": unready, "c": term}, abc, 50,
			map[string]string{"c": term}},
		{"unready before measured isolations", map[string]string{"a": failed, "c": unready}, []string{"a", "b", "c", "d"}, 25,
			map[string]string{"c": unready}},
		{"a cap below one broker still hides one, as the fault table's cap", map[string]string{"a": failed, "b": failed}, abc, 10,
			map[string]string{"a": failed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CapHidden(tc.candidates, tc.brokers, tc.percent); !maps.Equal(got, tc.want) {
				t.Errorf("CapHidden(%v, %v, %d) = %v, want %v", tc.candidates, tc.brokers, tc.percent, got, tc.want)
			}
		})
	}
}
