package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// TestFaultPolicyStatusOfBrokersSharingANameIsAccepted proves the API server accepts a policy's
// status that isolates brokers of one name in several places (RocketMQ clusters commonly all
// name their brokers broker-a): two Clusters' broker-a, and a broker-a found by its pod beside a
// Cluster's. Each keeps an entry of its own, and a restart restores each to its own identity.
func TestFaultPolicyStatusOfBrokersSharingANameIsAccepted(t *testing.T) {
	needsEnvtest(t)
	cases := []struct {
		name     string
		clusters []string // "" is a broker found by its pod
	}{
		{"two Clusters' broker-a", []string{"one", "two"}},
		{"a pod-found broker-a beside a Cluster's", []string{"", "prod"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := producer.New(producer.Options{HeartbeatInterval: -1})
			t.Cleanup(func() { rt.Close() })
			ns := newNamespace(t)
			fp := createPolicy(t, ns, "whole", routingv1alpha1.FaultPolicySpec{})
			deleteAfter(t, fp)
			key := scope.PolicyKey(ns, fp.Name)
			if err := pushPolicy(rt, fp, true); err != nil {
				t.Fatal(err)
			}
			var items []fault.Item
			for _, cl := range tc.clusters {
				id := scope.Pods(ns).Broker("broker-a").String()
				if cl != "" {
					id = scope.Cluster(ns, cl).Broker("broker-a").String()
				}
				items = append(items, fault.Item{Broker: id, Reason: fault.ReasonSendFailed, Reachable: true,
					Since: time.Now(), Until: time.Now().Add(time.Hour)})
			}
			rt.Restore(key, items)
			r := &FaultPolicyReconciler{Runtime: rt, shared: &shared{brokers: newBrokerDirectory(), metrics: metrics.NewRuntime()}}
			r.computeStatus(fp, key, nil, policyUsers{})
			if err := k8sClient.Status().Update(context.Background(), fp); err != nil {
				t.Fatalf("the API server refused the status: %v", err)
			}
			got := getPolicy(t, ns, fp.Name)
			var clusters []string
			for _, ib := range got.Status.IsolatedBrokers {
				if ib.BrokerName != "broker-a" {
					t.Errorf("entry %+v, want broker-a", ib)
				}
				clusters = append(clusters, ib.Cluster)
			}
			if !slices.Equal(clusters, tc.clusters) || got.Status.Isolated != int32(len(tc.clusters)) {
				t.Fatalf("status lists the clusters %q, isolated %d; want %q", clusters, got.Status.Isolated, tc.clusters)
			}
			restored := faultItems(ns, got.Status.IsolatedBrokers)
			for i := range items {
				if restored[i].Broker != items[i].Broker {
					t.Errorf("entry %d restores as %s, want %s", i, restored[i].Broker, items[i].Broker)
				}
			}
		})
	}
}

// deleteAfter deletes a policy no manager protects when the test ends, so that the managers of
// later tests do not restore and report its isolations.
func deleteAfter(t *testing.T, fp *routingv1alpha1.FaultPolicy) {
	t.Helper()
	t.Cleanup(func() { _ = client.IgnoreNotFound(k8sClient.Delete(context.Background(), fp)) })
}

// managerTimeout bounds waits on a manager's first writes: a new manager first restores and
// reconciles every policy earlier tests left in the API server, which on a loaded machine takes
// longer than the suite's timeout.
const managerTimeout = realTimeout

// wholeClusterPolicy is a policy for Cluster-only tests: probes every 200 ms, a failed probe
// isolates for one second, and no cap, so every silent broker is isolated.
func wholeClusterPolicy() routingv1alpha1.FaultPolicySpec {
	return routingv1alpha1.FaultPolicySpec{
		Rules:                []routingv1alpha1.FaultRule{{LatencyMillis: 0, IsolationMillis: 0}, {LatencyMillis: 1000, IsolationMillis: 1000}},
		FailureLatencyMillis: ptr.To(int64(1000)),
		Probe:                routingv1alpha1.ProbePolicy{IntervalMillis: 200, TimeoutMillis: 100},
		MaxIsolatedPercent:   ptr.To(int32(100)),
	}
}

// startNamedCluster starts brokersim brokers with the given names behind a brokersim name server
// of their own and creates a Cluster for them that names policy.
func startNamedCluster(t *testing.T, ns, name, policy string, brokers ...string) []*brokersim.Broker {
	t.Helper()
	var started []*brokersim.Broker
	for _, b := range brokers {
		br, err := brokersim.StartBroker(b, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = br.Close() })
		started = append(started, br)
	}
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", started...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsrv.Close() })
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, RouteRefreshSeconds: 1}}
	if policy != "" {
		cl.Spec.FaultPolicyRef = &routingv1alpha1.FaultPolicyReference{Name: policy}
	}
	if err := k8sClient.Create(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	return started
}

// TestWholeClusterPolicyStatusListsEveryClustersSilentBrokers runs two Clusters in one namespace,
// each publishing a broker-a, under one policy that leaves probe.routedBrokers unset: the policy
// watches both (a Cluster's policy watches by default), isolates both once they fall silent,
// counts the Clusters' brokers, and its status lists both broker-a, each held until a probe proves
// it, with no until once the timer is over.
func TestWholeClusterPolicyStatusListsEveryClustersSilentBrokers(t *testing.T) {
	needsEnvtest(t)
	rt := startManager(t)
	ns := newNamespace(t)
	createPolicy(t, ns, "whole", wholeClusterPolicy())
	one := startNamedCluster(t, ns, "one", "whole", "broker-a")
	two := startNamedCluster(t, ns, "two", "whole", "broker-a")
	key := scope.PolicyKey(ns, "whole")
	eventuallyWithin(t, managerTimeout, "the policy in force for both Clusters' brokers, watching them", func() error {
		fp := getPolicy(t, ns, "whole")
		p, _ := rt.Policy(key)
		if fp.Status.Brokers != 2 || !p.Probe.Routed || fp.Status.Effective == nil || !fp.Status.Effective.ProbeRoutedBrokers {
			return fmt.Errorf("brokers %d, routed probes %v, effective %+v", fp.Status.Brokers, p.Probe.Routed, fp.Status.Effective)
		}
		return nil
	})
	_ = one[0].Close()
	_ = two[0].Close()
	eventuallyWithin(t, managerTimeout, "both broker-a isolated in status, held until proven, their timers over", func() error {
		fp := getPolicy(t, ns, "whole")
		var clusters []string
		for _, ib := range fp.Status.IsolatedBrokers {
			if ib.BrokerName != "broker-a" || !ib.HeldUntilProven || ib.Until != nil || ib.Reachable {
				return fmt.Errorf("entry %+v", ib)
			}
			clusters = append(clusters, ib.Cluster)
		}
		ready := apimeta.FindStatusCondition(fp.Status.Conditions, routingv1alpha1.ConditionReady)
		if !slices.Equal(clusters, []string{"one", "two"}) || ready == nil || ready.Message != "In force for 2 brokers, 2 isolated" {
			return fmt.Errorf("isolated %+v, Ready %+v (runtime: %+v)", fp.Status.IsolatedBrokers, ready, rt.Isolated(key))
		}
		return nil
	})
}

// TestFaultPolicyNamedOnlyByAClusterIsInUse proves a Cluster's faultPolicyRef counts as a use of
// the policy: a Cluster whose policy does not exist yet is not Ready and says so, the policy a
// Cluster names is InUse with a reason and message naming it, deleting it as kubectl does waits
// (the policy stays, being deleted) while the Cluster names it, and it goes once the Cluster no
// longer does.
func TestFaultPolicyNamedOnlyByAClusterIsInUse(t *testing.T) {
	needsEnvtest(t)
	startManager(t)
	ctx := context.Background()
	ns := newNamespace(t)
	startNamedCluster(t, ns, "prod", "whole", "broker-a")
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}
	clusterReady := func(status metav1.ConditionStatus, reason string, says ...string) func() error {
		return func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
				return err
			}
			c := apimeta.FindStatusCondition(cl.Status.Conditions, routingv1alpha1.ConditionReady)
			if c == nil || c.Status != status || c.Reason != reason {
				return fmt.Errorf("Ready %+v", c)
			}
			for _, s := range says {
				if !strings.Contains(c.Message, s) {
					return fmt.Errorf("Ready %+v does not say %q", c, s)
				}
			}
			return nil
		}
	}
	eventuallyWithin(t, managerTimeout, "the Cluster says its policy is missing", clusterReady(metav1.ConditionFalse,
		routingv1alpha1.ReasonFaultPolicyNotFound, `FaultPolicy "whole" does not exist`, "publishes 1 brokers"))

	fp := createPolicy(t, ns, "whole", routingv1alpha1.FaultPolicySpec{})
	eventuallyWithin(t, managerTimeout, "the Cluster Ready once its policy exists", clusterReady(metav1.ConditionTrue, routingv1alpha1.ReasonReconciled))
	inUse := func(deleting bool, message string) func() error {
		return func() error {
			got := getPolicy(t, ns, "whole")
			c := apimeta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionInUse)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != routingv1alpha1.ReasonReferencedByClusters ||
				c.Message != message || got.DeletionTimestamp.IsZero() == deleting ||
				!slices.Contains(got.Finalizers, routingv1alpha1.FaultPolicyProtection) {
				return fmt.Errorf("deletion %v, finalizers %v, InUse %+v", got.DeletionTimestamp, got.Finalizers, c)
			}
			if got.Status.Brokers != 1 {
				return fmt.Errorf("in force for %d brokers, want the Cluster's one", got.Status.Brokers)
			}
			return nil
		}
	}
	eventuallyWithin(t, managerTimeout, "the policy InUse by the Cluster", inUse(false, "Used by Clusters: prod"))

	if err := k8sClient.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, managerTimeout, "the deletion waits for the Cluster", inUse(true, "Deletion waits for what uses this policy (Clusters: prod)"))
	eventuallyWithin(t, managerTimeout, "an Event says the deletion waits for the Cluster", func() error {
		return findEvent(ns, "whole", EventDeletionWaits, "Clusters: prod")
	})
	eventuallyWithin(t, managerTimeout, "the Cluster still Ready while the deletion waits", clusterReady(metav1.ConditionTrue, routingv1alpha1.ReasonReconciled))

	updateObject(t, cl, func() { cl.Spec.FaultPolicyRef = nil })
	eventuallyWithin(t, managerTimeout, "the policy gone once the Cluster names it no more", func() error { return gone(fp) })
}
