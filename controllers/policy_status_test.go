package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// TestFaultPolicyStatusOfBrokersSharingANameIsAccepted proves the API server accepts a policy's
// status that isolates brokers of one name in several places (RocketMQ clusters commonly all
// name their brokers broker-a): two Clusters' broker-a, and a broker-a found by its pod beside a
// Cluster's. Each keeps an entry of its own, and a restart restores each to its own identity.
func TestFaultPolicyStatusOfBrokersSharingANameIsAccepted(t *testing.T) {
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
			key := PolicyKey(ns, fp.Name)
			if err := pushPolicy(rt, fp); err != nil {
				t.Fatal(err)
			}
			var items []fault.Item
			for _, cl := range tc.clusters {
				id := brokerID(ns, "broker-a")
				if cl != "" {
					id = ClusterBrokerPrefix(ns, cl) + "broker-a"
				}
				items = append(items, fault.Item{Broker: id, Reason: fault.ReasonSendFailed, Reachable: true,
					Since: time.Now(), Until: time.Now().Add(time.Hour)})
			}
			rt.Restore(key, items)
			r := &FaultPolicyReconciler{Runtime: rt, shared: &shared{brokers: newBrokerDirectory(), metrics: RuntimeMetrics()}}
			r.computeStatus(fp, key, nil, nil)
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
