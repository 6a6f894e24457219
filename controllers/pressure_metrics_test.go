package controllers

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestPressureMetricsShowWhatBrokersSaid proves the pressure gauges carry, per policy and broker,
// the figures the brokers last reported (a pressed broker's 150 ms head wait, 40 of 10000 queued),
// their busy limits as last read (RocketMQ's defaults, and a send-queue wait lowered to 50 ms) and
// whether the figures crossed the policy's thresholds.
func TestPressureMetricsShowWhatBrokersSaid(t *testing.T) {
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	pol := producer.DefaultPolicy("ns/p")
	pol.Probe.Interval = 100 * time.Millisecond
	pol.Probe.Timeout = 50 * time.Millisecond
	if err := rt.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	route := producer.Route{Topic: "T", Policy: pol.Name}
	for _, name := range []string{"broker-a", "broker-b"} {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if name == "broker-b" {
			b.SetFault(brokersim.Fault{Pressure: &remoting.BrokerPressure{SendQueueSize: 40, SendQueueCapacity: 10000, SendQueueHeadWaitMillis: 150}})
			b.SetLimits(remoting.BrokerLimits{SendQueueWaitMillis: 50, PageCacheBusyMillis: 1000})
		}
		rt.SetBroker(producer.Broker{Name: name, Addr: b.Addr(), Ready: true})
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: name, WriteQueues: 2})
	}
	if err := rt.SetRoute(route); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both brokers' figures", func() error {
		if n := len(rt.Pressure(pol.Name)); n != 2 {
			return fmt.Errorf("%d brokers' figures", n)
		}
		return nil
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newPressureCollector(rt))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{} // metric/broker -> value
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["policy"] != "ns/p" {
				t.Errorf("%s with policy %q", mf.GetName(), labels["policy"])
			}
			got[mf.GetName()+"/"+labels["broker"]] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"detour_broker_pressed/broker-a": 0, "detour_broker_pressed/broker-b": 1,
		"detour_broker_send_queue_head_wait_seconds/broker-a": 0, "detour_broker_send_queue_head_wait_seconds/broker-b": 0.15,
		"detour_broker_send_queue_fill_percent/broker-a": 0, "detour_broker_send_queue_fill_percent/broker-b": 0.4,
		"detour_broker_page_cache_lock_seconds/broker-a": 0, "detour_broker_page_cache_lock_seconds/broker-b": 0,
		"detour_broker_put_latency_p99_seconds/broker-a": 0, "detour_broker_put_latency_p99_seconds/broker-b": 0,
		"detour_broker_send_queue_wait_limit_seconds/broker-a": 0.2, "detour_broker_send_queue_wait_limit_seconds/broker-b": 0.05,
		"detour_broker_page_cache_busy_limit_seconds/broker-a": 1, "detour_broker_page_cache_busy_limit_seconds/broker-b": 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("gauges\n %v\nwant\n %v", got, want)
	}
}

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
