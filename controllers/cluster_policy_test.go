package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/scope"
)

// TestClusterPolicyHidesAFrozenBrokerWithoutTopics runs a real 5.x cluster with a Cluster that
// names a FaultPolicy and no Topic at all: the policy's probes watch every broker the Cluster
// lists, a paused broker is published read-only by the facade in the route of a topic nobody
// declared, RocketMQ's own Java producer (default settings, route poll 2 s) stops sending to it
// after its next poll, and the Cluster's status counts it hidden. Without the Cluster's policy
// (the canary) the facade governs the topic no more.
func TestClusterPolicyHidesAFrozenBrokerWithoutTopics(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	c := rmqtest.Start(t, rmqtest.V5,
		rmqtest.BrokerConfig{Name: ns + "-broker-a", NoAutoCreate: true},
		rmqtest.BrokerConfig{Name: ns + "-broker-b", NoAutoCreate: true},
		rmqtest.BrokerConfig{Name: ns + "-broker-c", NoAutoCreate: true})
	b := c.Brokers()[1]
	names := []string{c.Brokers()[0].Name, b.Name, c.Brokers()[2].Name}
	rt := startManager(t)
	ctx := context.Background()
	// Only failures isolate: what is measured is the watch against a paused broker, not a healthy
	// broker's occasional slow answer on a loaded machine.
	createPolicy(t, ns, "whole", routingv1alpha1.FaultPolicySpec{
		Rules: []routingv1alpha1.FaultRule{{LatencyMillis: 0, IsolationMillis: 0}, {LatencyMillis: 10000, IsolationMillis: 10000}},
		Probe: routingv1alpha1.ProbePolicy{RoutedBrokers: ptr.To(true)}})
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{c.NameServer()}, RouteRefreshSeconds: 1,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "whole"}}}
	if err := k8sClient.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	// A topic made on the brokers directly: no Topic resource declares it.
	topic := "T_" + ns + "_undeclared"
	for _, br := range c.Brokers() {
		if err := rt.CreateTopic(ctx, br.Addr, topic, 4, 4, 6); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyWithin(t, realTimeout, "the name server to publish the topic on every broker", func() error {
		route, err := c.Route(ctx, topic)
		if err != nil {
			return err
		}
		if len(route.QueueDatas) != 3 {
			return fmt.Errorf("queues %+v", route.QueueDatas)
		}
		return nil
	})
	eventuallyWithin(t, realTimeout, "every broker the Cluster lists under its policy", func() error {
		if info, ok := rt.RouteInfo(scope.Cluster(ns, "prod").WatchRoute()); !ok || len(info.Brokers) != 3 || info.Policy != scope.PolicyKey(ns, "whole") {
			return fmt.Errorf("watch route %+v", info)
		}
		return nil
	})

	view := &FacadeView{Reader: startIndexedCache(t), Runtime: rt, Cluster: types.NamespacedName{Namespace: ns, Name: "prod"}}
	hides := &hideLog{}
	fc, err := facade.Start(facade.Options{Addr: "127.0.0.1:0", View: view, OnChange: hides.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	// Healthy brokers answer the watch's probes: nothing is hidden, though the topic is governed.
	eventuallyWithin(t, realTimeout, "the undeclared topic governed with nothing hidden", func() error {
		if h, known := view.Hide(topic, names); !known || len(h) != 0 {
			return fmt.Errorf("hidden %v, governed %v", h, known)
		}
		return nil
	})

	p := c.StartProducer(rmqtest.ProducerOptions{NameServers: []string{fc.Addr()}, Topic: topic,
		Senders: 4, Rate: 100, Duration: 20 * time.Second, PollNameServerInterval: javaPoll, Shared: true, Warmup: 8})
	b.Pause()
	pausedAt := time.Now()
	eventuallyWithin(t, realTimeout, b.Name+" hidden without a Topic or any traffic through detour", func() error {
		if h, _ := view.Hide(topic, names); h[b.Name] == "" {
			return fmt.Errorf("hidden %v", h)
		}
		return nil
	})
	eventuallyWithin(t, realTimeout, "the Cluster's status to count the hidden broker", func() error {
		var got routingv1alpha1.Cluster
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cl), &got); err != nil {
			return err
		}
		for _, cb := range got.Status.Brokers {
			if cb.Name == b.Name && cb.Hidden != "" && got.Status.HiddenBrokers == 1 {
				return nil
			}
		}
		return fmt.Errorf("hidden %d, brokers %+v", got.Status.HiddenBrokers, got.Status.Brokers)
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	sends, err := p.Wait(wctx)
	cancel()
	b.Resume()
	if err != nil {
		t.Fatal(err)
	}
	hidAt, ok := hides.firstHidden(b.Name, pausedAt)
	if !ok {
		t.Fatalf("the facade never hid the paused %s in an answer", b.Name)
	}
	before, after := summarise(sends, pausedAt, hidAt), summarise(sends, hidAt.Add(javaPoll+time.Second), time.Now())
	t.Logf("Java producer through the facade, undeclared topic: paused until hidden (%v later): %v; after its poll: %v",
		hidAt.Sub(pausedAt).Round(time.Millisecond), before, after)
	if after.sends == 0 || after.failed != 0 || after.onBroker[b.Name] != 0 {
		t.Errorf("after the client's poll: %v; want sends, no failure and no attempt on %s", after, b.Name)
	}

	// The canary: without the Cluster's policy nothing governs the topic, and the watch ends.
	updateObject(t, cl, func() { cl.Spec.FaultPolicyRef = nil })
	eventuallyWithin(t, realTimeout, "the topic ungoverned once the Cluster names no policy", func() error {
		if h, known := view.Hide(topic, names); known {
			return fmt.Errorf("still governed, hidden %v", h)
		}
		if _, ok := rt.RouteInfo(scope.Cluster(ns, "prod").WatchRoute()); ok {
			return fmt.Errorf("the watch route stays")
		}
		return nil
	})
}

// TestFacadeServiceNamesAreValidServiceNames proves every Cluster gets a Service name the API
// server accepts (a DNS-1035 label), distinct for distinct Clusters even when cut.
func TestFacadeServiceNamesAreValidServiceNames(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		cluster types.NamespacedName
		want    string // "" means cut with a hash
	}{
		{types.NamespacedName{Namespace: "shop", Name: "prod"}, "namesrv-shop-prod"},
		{types.NamespacedName{Namespace: "shop", Name: "prod.eu"}, ""},
		{types.NamespacedName{Namespace: long, Name: long}, ""},
		{types.NamespacedName{Namespace: long, Name: long + "b"}, ""},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		got := FacadeServiceName(tc.cluster)
		if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
			t.Errorf("%v: %q is no Service name: %v", tc.cluster, got, errs)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%v: %q, want %q", tc.cluster, got, tc.want)
		}
		if seen[got] {
			t.Errorf("%v: %q names another Cluster's Service too", tc.cluster, got)
		}
		seen[got] = true
	}
}
