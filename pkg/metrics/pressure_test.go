package metrics

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"

	"github.com/prometheus/client_golang/prometheus"

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
	poll.Until(t, 30*time.Second, 20*time.Millisecond, "both brokers' figures", func() error {
		if n := len(rt.Pressure(pol.Name)); n != 2 {
			return fmt.Errorf("%d brokers' figures", n)
		}
		return nil
	})
	reg := prometheus.NewPedanticRegistry()
	c := newPressureCollector()
	c.observe(rt)
	reg.MustRegister(c)
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
