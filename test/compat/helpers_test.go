package compat_test

import (
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// newRuntime returns a producer runtime that routes topic over every broker of c with queues write
// queues each, under policy, after creating the topic on each broker with UPDATE_AND_CREATE_TOPIC.
func newRuntime(t testing.TB, c *rmqtest.Cluster, topic string, queues int, policy producer.Policy) *producer.Runtime {
	t.Helper()
	r := producer.New(producer.Options{ProducerGroup: "detour_compat"})
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var route producer.Route
	route.Topic, route.Policy = topic, policy.Name
	for _, b := range c.Brokers() {
		if err := r.CreateTopic(ctx, b.Addr, topic, queues, queues, 6); err != nil {
			t.Fatalf("create %s on %s: %v", topic, b.Name, err)
		}
		r.SetBroker(producer.Broker{Name: b.Name, Addr: b.Addr, Ready: true})
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: b.Name, WriteQueues: queues})
	}
	if err := r.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	if err := r.SetRoute(route); err != nil {
		t.Fatal(err)
	}
	return r
}

// detourPolicy is the Detour behaviour the README recommends: RocketMQ 5's table, probing, an
// attempt deadline of 1 s within 3 attempts in 3 s, pod health respected.
func detourPolicy(name string) producer.Policy {
	p := producer.DefaultPolicy(name)
	p.Retry.PerAttemptTimeout = time.Second
	p.Probe.Enabled = true
	p.Probe.Interval = 500 * time.Millisecond
	p.Probe.Timeout = 200 * time.Millisecond
	p.GrowOnRepeat = true
	return p
}

// contentPolicy is Detour's defaults with room for slow writes: the suites that use it prove what
// is stored, not how fast, and a broker's first multi-MiB writes into fresh store files can take
// longer than RocketMQ's 3 s budget while other suites load a 2-core machine. One attempt may use
// the whole budget, so a slow write is waited for rather than sent again (and stored twice).
func contentPolicy(name string) producer.Policy {
	p := producer.DefaultPolicy(name)
	p.Retry.SendTimeout = 30 * time.Second
	p.Retry.PerAttemptTimeout = 0
	return p
}

// storedTotal sums what every broker holds for topic.
func storedTotal(t *testing.T, c *rmqtest.Cluster, topic string) (int64, map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	per, err := c.Stored(ctx, topic)
	if err != nil {
		t.Fatalf("stored messages of %s: %v", topic, err)
	}
	var n int64
	for _, v := range per {
		n += v
	}
	return n, per
}
