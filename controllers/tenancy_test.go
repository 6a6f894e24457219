package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/scope"
)

// TestNamespacesCannotSteerEachOthersTraffic proves tenants apart, with the two collisions a
// shared cluster invites: a Topic in another namespace with the same topicName keeps routes of
// its own (and deleting it leaves the victim's route), and a Pod in another namespace claiming
// the victim's broker name, at another address, changes nothing for the victim (and deleting it
// removes nothing).
func TestNamespacesCannotSteerEachOthersTraffic(t *testing.T) {
	needsEnvtest(t)
	rt := startManager(t)
	ctx := context.Background()
	victimNS, otherNS := newNamespace(t), newNamespace(t)
	victim := startCluster(t, victimNS, 2)
	const topicName = "SharedTopicName"
	topicIn := func(ns, app string) *routingv1alpha1.Topic {
		t.Helper()
		topic := &routingv1alpha1.Topic{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
			Spec: routingv1alpha1.TopicSpec{TopicName: topicName, WriteQueueNums: 2,
				BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		}
		if err := k8sClient.Create(ctx, topic); err != nil {
			t.Fatal(err)
		}
		return topic
	}
	mine := topicIn(victimNS, victim.app)
	topicReady(t, mine, 2)
	routedTo(t, rt, mine, 2)

	// The other namespace: one broker of its own, claiming the name of the victim's first broker.
	impostor, err := brokersim.StartBroker("impostor", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = impostor.Close() })
	const otherApp = "rocketmq-other"
	pod := createBrokerPod(t, otherNS, otherApp, victim.brokers[0].Name(), impostor.Addr())
	theirs := topicIn(otherNS, otherApp)
	topicReady(t, theirs, 1)
	routedTo(t, rt, theirs, 1)

	expectOnlyOn := func(topic *routingv1alpha1.Topic, want map[string]string) {
		t.Helper()
		info, ok := rt.RouteInfo(routeOf(topic))
		if !ok || len(info.Brokers) != len(want) {
			t.Fatalf("route of %s/%s: %+v, want brokers %v", topic.Namespace, topic.Name, info.Brokers, want)
		}
		for _, b := range info.Brokers {
			if want[b.Name] != b.Addr {
				t.Fatalf("route of %s/%s has %s at %s, want %v", topic.Namespace, topic.Name, b.Name, b.Addr, want)
			}
		}
		for i := range 10 {
			res, err := send(rt, topic)
			if err != nil {
				t.Fatalf("send %d by %s/%s: %v", i, topic.Namespace, topic.Name, err)
			}
			if _, ok := want[res.Broker]; !ok {
				t.Fatalf("send %d by %s/%s stored on %s, outside %v", i, topic.Namespace, topic.Name, res.Broker, want)
			}
		}
	}
	victimBrokers := map[string]string{
		scope.Pods(victimNS).Broker(victim.brokers[0].Name()).String(): victim.brokers[0].Addr(),
		scope.Pods(victimNS).Broker(victim.brokers[1].Name()).String(): victim.brokers[1].Addr(),
	}
	expectOnlyOn(mine, victimBrokers)
	expectOnlyOn(theirs, map[string]string{scope.Pods(otherNS).Broker(victim.brokers[0].Name()).String(): impostor.Addr()})
	before := impostor.Stats().MessagesStored
	expectOnlyOn(mine, victimBrokers)
	if n := impostor.Stats().MessagesStored; n != before {
		t.Fatalf("the impostor stored %d of the victim's messages", n-before)
	}

	// Deleting the other namespace's Topic and broker Pod leaves the victim's route whole.
	if err := k8sClient.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if err := k8sClient.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other namespace's route is gone", func() error {
		if _, ok := rt.RouteInfo(routeOf(theirs)); ok {
			return errors.New("still routed")
		}
		return nil
	})
	eventually(t, "the impostor's pod is gone", func() error { return gone(pod) })
	expectOnlyOn(mine, victimBrokers)
	got := getTopic(t, mine)
	if len(got.Status.Brokers) != 2 || got.Status.Brokers[0].Address != victim.brokers[0].Addr() {
		t.Fatalf("the victim's status after the other namespace left: %+v", got.Status.Brokers)
	}
}

// getTopic reads a Topic.
func getTopic(t *testing.T, topic *routingv1alpha1.Topic) *routingv1alpha1.Topic {
	t.Helper()
	var got routingv1alpha1.Topic
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
		t.Fatalf("getting topic: %v", err)
	}
	return &got
}

// TestBrokersOfTwoClustersInOneNamespaceStayApart proves a broker's identity is scoped by the
// Cluster that publishes it: two Clusters of one namespace whose brokers share a name (as
// RocketMQ clusters commonly do) keep separate brokers in the runtime, a pod one Cluster selects
// lends its health to that Cluster's broker only, and a Cluster that stops selecting it drops its
// identity.
func TestBrokersOfTwoClustersInOneNamespaceStayApart(t *testing.T) {
	needsEnvtest(t)
	rt := startManager(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const broker = "broker-a"
	pod := createBrokerPod(t, ns, "rocketmq-one", broker, "127.0.0.1:10911")
	for _, name := range []string{"one", "two"} {
		cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{"127.0.0.1:9"},
				BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rocketmq-" + name}}}}
		if err := k8sClient.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	one, two := scope.Cluster(ns, "one").Broker(broker).String(), scope.Cluster(ns, "two").Broker(broker).String()
	known := func(id string) bool { return slices.Contains(rt.Brokers(""), id) }
	eventually(t, "cluster one's broker-a known by its pod", func() error {
		if !known(one) || known(two) || known(scope.Pods(ns).Broker(broker).String()) {
			return fmt.Errorf("runtime brokers %v", rt.Brokers(""))
		}
		return nil
	})
	setPodReady(t, pod, false)
	eventually(t, "the NotReady pod marks cluster one's broker only", func() error {
		marked := map[string]bool{}
		for _, it := range rt.Isolated("") {
			marked[it.Broker] = true
		}
		if !marked[one] || marked[two] {
			return fmt.Errorf("marked %v", marked)
		}
		return nil
	})

	// Cluster one stops selecting the pod: its identity leaves the runtime.
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one"}}
	updateObject(t, cl, func() {
		cl.Spec.BrokerSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nothing"}}
	})
	eventually(t, "cluster one's broker-a forgotten", func() error {
		if known(one) {
			return fmt.Errorf("runtime brokers %v", rt.Brokers(""))
		}
		return nil
	})
}
