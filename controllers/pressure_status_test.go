package controllers

import (
	"fmt"
	"reflect"
	"testing"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestFaultPolicyStatusShowsAPressedBrokersFigures proves a broker held out for pressure is
// listed in the FaultPolicy's status with reason BrokerPressure, the figures that put it out and
// its busy limits as last read, and that status.effective shows the thresholds in force.
func TestFaultPolicyStatusShowsAPressedBrokersFigures(t *testing.T) {
	needsEnvtest(t)
	spec := routingv1alpha1.FaultPolicySpec{
		Probe:    routingv1alpha1.ProbePolicy{IntervalMillis: 200, TimeoutMillis: 100},
		Pressure: routingv1alpha1.PressurePolicy{SendQueueHeadWaitMillis: ptr.To[int32](120)},
	}
	ns, _, c, _ := routedCluster(t, "pressure", spec)
	pressed := c.brokers[1]
	pressed.SetFault(brokersim.Fault{Pressure: &remoting.BrokerPressure{SendQueueSize: 2001, SendQueueCapacity: 10000,
		SendQueueHeadWaitMillis: 150, PageCacheLockMillis: 3, PutLatency99Millis: 1.2}})
	pressed.SetLimits(remoting.BrokerLimits{SendQueueWaitMillis: 250, PageCacheBusyMillis: 1000})
	eventually(t, "status lists the pressed broker with its figures", func() error {
		fp := getPolicy(t, ns, "pressure")
		ib := isolatedIn(fp, pressed.Name())
		if ib == nil || ib.Reason != routingv1alpha1.IsolationBrokerPressure || ib.Pressure == nil {
			return fmt.Errorf("status = %+v", fp.Status)
		}
		want := routingv1alpha1.BrokerPressureFigures{SendQueueFillPercent: ptr.To[int32](21), SendQueueHeadWaitMillis: ptr.To[int64](150),
			PageCacheLockMillis: ptr.To[int64](3), PutLatency99Millis: ptr.To[int64](2),
			SendQueueWaitLimitMillis: ptr.To[int64](250), PageCacheBusyLimitMillis: ptr.To[int64](1000)}
		if !reflect.DeepEqual(*ib.Pressure, want) {
			return fmt.Errorf("figures %+v, want %+v", *ib.Pressure, want)
		}
		if e := fp.Status.Effective; e == nil || e.Pressure == nil || e.Pressure.SendQueueHeadWaitMillis != 120 || e.Pressure.SendQueueFillPercent != 50 {
			return fmt.Errorf("effective %+v", fp.Status.Effective)
		}
		return nil
	})
}
