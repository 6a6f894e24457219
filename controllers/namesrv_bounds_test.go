package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/nstest"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// createCluster creates a Cluster on the given name servers, refreshed every second.
func createCluster(t *testing.T, ns, name string, nameServers ...string) *routingv1alpha1.Cluster {
	t.Helper()
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.ClusterSpec{NameServers: nameServers, RouteRefreshSeconds: 1}}
	if err := k8sClient.Create(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

// createClusterTopic creates a Topic on a Cluster.
func createClusterTopic(t *testing.T, ns, name, cluster string, create bool) *routingv1alpha1.Topic {
	t.Helper()
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{TopicName: "T_" + name, ClusterRef: &routingv1alpha1.ClusterReference{Name: cluster},
			Create: ptr.To(create), WriteQueueNums: 4, ReadQueueNums: 4, Perm: 6}}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	return topic
}

// readyOf returns an object's Ready condition (nil when it has none) from the API server.
func readyOf(t *testing.T, obj client.Object) *metav1.Condition {
	t.Helper()
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case *routingv1alpha1.Cluster:
		return apimeta.FindStatusCondition(o.Status.Conditions, routingv1alpha1.ConditionReady)
	case *routingv1alpha1.Topic:
		return apimeta.FindStatusCondition(o.Status.Conditions, routingv1alpha1.ConditionReady)
	}
	t.Fatalf("no Ready condition on %T", obj)
	return nil
}

// readyIs succeeds when obj's Ready condition has status and reason and its message contains
// every part.
func readyIs(t *testing.T, obj client.Object, status metav1.ConditionStatus, reason string, parts ...string) error {
	c := readyOf(t, obj)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("Ready = %+v, want %s %s", c, status, reason)
	}
	for _, p := range parts {
		if !strings.Contains(c.Message, p) {
			return fmt.Errorf("Ready message %q lacks %q", c.Message, p)
		}
	}
	return nil
}

func TestASilentClusterDelaysNeitherAGoodClusterNorAnotherNamespacesTopic(t *testing.T) {
	needsEnvtest(t)
	// Requests to name servers and looks at them may wait far longer than the test: the silent
	// name server holds them until it is released, so what follows is ordering, not timing.
	startManagerWith(t, producer.Options{NameServerTimeout: 10 * time.Minute}, Options{DescribeTimeout: 10 * time.Minute})
	silent := nstest.StartSilent(t)

	tenant := newNamespace(t)
	var silentClusters []*routingv1alpha1.Cluster
	var silentTopics []*routingv1alpha1.Topic
	for i := range 3 {
		name := fmt.Sprint("silent-", i)
		silentClusters = append(silentClusters, createCluster(t, tenant, name, silent.Addr()))
		silentTopics = append(silentTopics, createClusterTopic(t, tenant, name, name, true))
	}
	for _, topic := range silentTopics {
		eventually(t, "the silent Cluster's Topic waits for its route", func() error {
			return readyIs(t, topic, metav1.ConditionUnknown, routingv1alpha1.ReasonRouteResolving)
		})
	}
	eventually(t, "the silent name server holds a request", func() error {
		if silent.Accepted() == 0 {
			return fmt.Errorf("no connection yet")
		}
		return nil
	})

	// Another namespace: a Cluster whose name server answers, and a static Topic.
	other := newNamespace(t)
	good := nstest.StartScripted(t, nil)
	good.AnswerClusterInfo(nstest.ClusterInfoBody(2, "127.0.0.1:10911"))
	start := time.Now()
	goodCluster := createCluster(t, other, "good", good.Addr())
	static := startCluster(t, other, 2).createTopic(t, "static", "")
	eventually(t, "the good Cluster is Ready", func() error {
		return readyIs(t, goodCluster, metav1.ConditionTrue, routingv1alpha1.ReasonReconciled, "publishes 2 brokers")
	})
	t.Logf("good Cluster Ready after %v", time.Since(start)) // measured, not asserted
	topicReady(t, static, 2)
	t.Logf("static Topic Ready after %v", time.Since(start))

	// Only now do the silent name server's requests end.
	for _, cl := range silentClusters {
		if c := readyOf(t, cl); c != nil {
			t.Fatalf("silent Cluster %s has Ready %+v while its look is still held", cl.Name, c)
		}
	}
	silent.Release()
	for _, cl := range silentClusters {
		eventually(t, "the silent Cluster says its name servers did not answer", func() error {
			return readyIs(t, cl, metav1.ConditionFalse, routingv1alpha1.ReasonNameServersUnreachable)
		})
	}
	for _, topic := range silentTopics {
		// It asked to be created on the Cluster's masters, which no name server named.
		eventually(t, "the silent Cluster's Topic says its name servers did not answer", func() error {
			return readyIs(t, topic, metav1.ConditionFalse, routingv1alpha1.ReasonTopicCreateFailed, "no name server answered")
		})
	}
}

func TestClusterStatusListsAreCutToTheSchemasBound(t *testing.T) {
	needsEnvtest(t)
	startManager(t)
	ns := newNamespace(t)
	srv := nstest.StartScripted(t, nil)
	srv.AnswerClusterInfo(nstest.ClusterInfoBody(2000, "127.0.0.1:10911"))
	cl := createCluster(t, ns, "big", srv.Addr())
	eventually(t, "the Cluster lists the first 1024 of its 2000 brokers", func() error {
		if err := readyIs(t, cl, metav1.ConditionTrue, routingv1alpha1.ReasonReconciled,
			"publishes 2000 brokers", "status lists the first 1024 of the 2000 brokers"); err != nil {
			return err
		}
		if n := len(cl.Status.Brokers); n != maxStatusBrokers || cl.Status.BrokerCount != 2000 || cl.Status.WritableBrokers != 2000 {
			return fmt.Errorf("%d brokers listed, brokerCount %d, writable %d", n, cl.Status.BrokerCount, cl.Status.WritableBrokers)
		}
		return nil
	})
}

func TestTopicStatusOfMoreBrokersThanTheBoundIsCutAndAccepted(t *testing.T) {
	needsEnvtest(t)
	rt := producer.New(producer.Options{HeartbeatInterval: -1})
	t.Cleanup(func() { rt.Close() })
	r := &TopicReconciler{Runtime: rt}
	ns := newNamespace(t)
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide"},
		Spec: routingv1alpha1.TopicSpec{TopicName: "T_wide", WriteQueueNums: 1, Perm: 6,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "wide"}}}}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	var brokers []selectedBroker
	for i := range 1100 {
		b := selectedBroker{pod: fmt.Sprintf("broker-%04d-0", i)}
		b.Name, b.Addr, b.Ready = fmt.Sprintf("broker-%04d", i), "127.0.0.1:10911", true
		brokers = append(brokers, b)
	}
	r.computeStatus(topic, brokers, "", true, nil)
	if n := len(topic.Status.Brokers); n != maxStatusBrokers || topic.Status.BrokerCount != 1100 {
		t.Fatalf("%d brokers listed, brokerCount %d; want %d listed of 1100", n, topic.Status.BrokerCount, maxStatusBrokers)
	}
	if err := k8sClient.Status().Update(context.Background(), topic); err != nil {
		t.Fatalf("the API server refused the cut status: %v", err)
	}
	if err := readyIs(t, topic, metav1.ConditionTrue, routingv1alpha1.ReasonReconciled, "status lists the first 1024 of the 1100 brokers"); err != nil {
		t.Fatal(err)
	}
}

func TestNameServerAnswersBeyondABoundBecomeConditions(t *testing.T) {
	needsEnvtest(t)
	rt := startManager(t)
	ns := newNamespace(t)

	t.Run("cluster info of 10,000 brokers", func(t *testing.T) {
		srv := nstest.StartScripted(t, nil)
		srv.AnswerClusterInfo(nstest.ClusterInfoBody(10000, "127.0.0.1:10911"))
		cl := createCluster(t, ns, "ten-thousand", srv.Addr())
		eventually(t, "the Cluster says its cluster info was refused", func() error {
			return readyIs(t, cl, metav1.ConditionFalse, routingv1alpha1.ReasonClusterInfoRefused, "beyond the bound of 4096")
		})
	})

	t.Run("a route of 2^31-1 write queues after a good one", func(t *testing.T) {
		// Brokers published by DNS name, longer than an IP address and port.
		addr := strings.Repeat("b", 80) + ".rocketmq-broker.rocketmq.svc.cluster.local:10911"
		srv := nstest.StartScripted(t, nstest.RouteBody(2, 4, addr, 0))
		createCluster(t, ns, "absurd", srv.Addr())
		topic := createClusterTopic(t, ns, "absurd", "absurd", false)
		eventually(t, "the Topic is routed by the good route", func() error {
			return readyIs(t, topic, metav1.ConditionTrue, routingv1alpha1.ReasonReconciled, "to 2 brokers; 8 of 8 write queues")
		})
		srv.AnswerRoute(nstest.RouteBody(1, 1<<31-1, addr, 0))
		eventually(t, "the Topic says the route was refused and the last good one stays", func() error {
			return readyIs(t, topic, metav1.ConditionFalse, routingv1alpha1.ReasonRouteRefused,
				"2147483647, outside the bound 0..1024", "the last good route", "stays in use")
		})
		if info, _ := rt.RouteInfo(routeOf(topic)); len(info.Queues) != 8 {
			t.Fatalf("route in force has %d queues, want the last good route's 8", len(info.Queues))
		}
	})

	t.Run("an error remark of 100 KiB", func(t *testing.T) {
		srv := nstest.StartScripted(t, nil)
		srv.AnswerRouteError(remoting.SystemError, strings.Repeat("x", 100<<10))
		createCluster(t, ns, "chatty", srv.Addr())
		topic := createClusterTopic(t, ns, "chatty", "chatty", false)
		eventually(t, "the Topic says the name servers failed, in a message cut to the bound", func() error {
			if err := readyIs(t, topic, metav1.ConditionFalse, routingv1alpha1.ReasonNameServersUnreachable, "…(cut)"); err != nil {
				return err
			}
			if c := readyOf(t, topic); len(c.Message) > maxConditionMessage {
				return fmt.Errorf("message of %d bytes", len(c.Message))
			}
			return nil
		})
	})
}

func TestDescribeBackoffGrowsPerFailureUpToItsBound(t *testing.T) {
	tests := []struct {
		failures int
		refresh  time.Duration
		want     time.Duration
	}{
		{1, 30 * time.Second, 30 * time.Second},
		{2, 30 * time.Second, time.Minute},
		{4, 30 * time.Second, 4 * time.Minute},
		{5, 30 * time.Second, maxDescribeBackoff},
		{50, 30 * time.Second, maxDescribeBackoff},
		{3, time.Second, 4 * time.Second},
		{3, time.Hour, time.Hour}, // a refresh longer than the bound is the bound
	}
	for _, tt := range tests {
		if got := describeBackoff(tt.failures, tt.refresh); got != tt.want {
			t.Errorf("describeBackoff(%d, %v) = %v, want %v", tt.failures, tt.refresh, got, tt.want)
		}
	}
}

func TestFaultPolicyStatusOfMoreIsolationsThanTheBoundIsCutAndAccepted(t *testing.T) {
	needsEnvtest(t)
	rt := producer.New(producer.Options{HeartbeatInterval: -1})
	t.Cleanup(func() { rt.Close() })
	ns := newNamespace(t)
	fp := createPolicy(t, ns, "wide", routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.PresetRocketMQ5})
	deleteAfter(t, fp)
	key := scope.PolicyKey(ns, fp.Name)
	if err := pushPolicy(rt, fp, false); err != nil {
		t.Fatal(err)
	}
	var items []fault.Item
	for i := range 1100 {
		items = append(items, fault.Item{Broker: scope.Cluster(ns, "prod").Broker(fmt.Sprintf("broker-%04d", i)).String(),
			Reason: fault.ReasonSendFailed, Since: time.Now(), Until: time.Now().Add(time.Hour)})
	}
	rt.Restore(key, items)
	r := &FaultPolicyReconciler{Runtime: rt, shared: &shared{brokers: newBrokerDirectory(), metrics: metrics.NewRuntime()}}
	r.computeStatus(fp, key, nil, policyUsers{})
	if n := len(fp.Status.IsolatedBrokers); n != maxStatusBrokers || fp.Status.Isolated != 1100 {
		t.Fatalf("%d isolations listed, isolated %d; want %d listed of 1100", n, fp.Status.Isolated, maxStatusBrokers)
	}
	if err := k8sClient.Status().Update(context.Background(), fp); err != nil {
		t.Fatalf("the API server refused the cut status: %v", err)
	}
	c := apimeta.FindStatusCondition(fp.Status.Conditions, routingv1alpha1.ConditionReady)
	if c == nil || !strings.Contains(c.Message, "status lists the first 1024 isolated brokers") {
		t.Fatalf("Ready = %+v, want it to say the list was cut", c)
	}
}
