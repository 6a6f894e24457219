package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// Shape of the flapping fleet: flapClusters Clusters of flapBrokers brokers each, every Cluster
// under a FaultPolicy of its own and declaring one Topic, all brokers flapping for flapWindow.
const (
	flapClusters = 10
	flapBrokers  = 10
	flapWindow   = 20 * time.Second
)

// TestStatusWritesStayWithinOnePerSecondWhileHundredBrokersFlap runs one manager over 100
// brokersim brokers in 10 Clusters, each Cluster under a policy of its own that probes its
// brokers every 200 ms, and makes every broker flap (up and black-holed in turns, phases spread):
// the policies' probes isolate and readmit them many times a second. Watching the API server, no
// FaultPolicy, Cluster, Topic or ReplicaView is written more than once a second over the window
// (at most one write per object per whole second, plus one for the window's edges), while every
// policy is written again and again, so the flapping did reach status.
func TestStatusWritesStayWithinOnePerSecondWhileHundredBrokersFlap(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	startManagerWith(t, producer.Options{}, Options{Fleet: &FleetOptions{Namespace: ns, Replica: "flapper"}})
	var brokers []*brokersim.Broker
	for c := range flapClusters {
		policy, cluster := fmt.Sprintf("policy-%d", c), fmt.Sprintf("cluster-%d", c)
		createPolicy(t, ns, policy, wholeClusterPolicy())
		names := make([]string, flapBrokers)
		for i := range names {
			names[i] = fmt.Sprintf("broker-%d", i)
		}
		started := startNamedCluster(t, ns, cluster, policy, names...)
		for _, b := range started {
			b.CreateTopic("T_"+cluster, 4)
		}
		brokers = append(brokers, started...)
		topic := clusterTopicOn(ns, "topic-"+cluster, "T_"+cluster, cluster)
		if err := k8sClient.Create(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
	}
	eventuallyWithin(t, managerTimeout, "every policy in force for its Cluster's brokers", everyPolicyCounts(ns, flapBrokers))

	writes := watchWrites(t, ns)
	for i, b := range brokers {
		// Phases spread over the period, so isolations and readmissions arrive all the time.
		up := 600*time.Millisecond + time.Duration(i%7)*50*time.Millisecond
		b.SetFault(brokersim.Fault{FlapUp: up, FlapDown: 500 * time.Millisecond})
	}
	counts := writes.over(flapWindow)
	for _, b := range brokers {
		b.SetFault(brokersim.Fault{})
	}

	bound := int(flapWindow/time.Second) + 1
	var report []string
	for key, n := range counts {
		report = append(report, fmt.Sprintf("%s=%d", key, n))
		if n > bound {
			t.Errorf("%s written %d times in %v, over the bound of %d (one a second)", key, n, flapWindow, bound)
		}
	}
	sort.Strings(report)
	t.Logf("status writes in %v: %s", flapWindow, strings.Join(report, " "))
	for c := range flapClusters {
		key := fmt.Sprintf("FaultPolicy/policy-%d", c)
		if counts[key] < 5 {
			t.Errorf("%s written %d times in %v: the flapping did not reach its status", key, counts[key], flapWindow)
		}
	}
}

// clusterTopicOn is a Topic declaring topicName on the Cluster cluster, which it does not create.
func clusterTopicOn(ns, name, topicName, cluster string) *routingv1alpha1.Topic {
	topic := &routingv1alpha1.Topic{}
	topic.Namespace, topic.Name = ns, name
	create := false
	topic.Spec = routingv1alpha1.TopicSpec{TopicName: topicName, ClusterRef: &routingv1alpha1.ClusterReference{Name: cluster},
		Create: &create, WriteQueueNums: 4, ReadQueueNums: 4, Perm: 6}
	return topic
}

// everyPolicyCounts holds once every FaultPolicy of ns counts brokers brokers in status.
func everyPolicyCounts(ns string, brokers int) func() error {
	return func() error {
		var list routingv1alpha1.FaultPolicyList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != flapClusters {
			return fmt.Errorf("%d policies", len(list.Items))
		}
		for _, fp := range list.Items {
			if fp.Status.Brokers != int32(brokers) {
				return fmt.Errorf("%s counts %d brokers", fp.Name, fp.Status.Brokers)
			}
		}
		return nil
	}
}

// writeCounter counts, per object, the updates the API server's watches deliver.
type writeCounter struct {
	mu       sync.Mutex
	counting bool
	counts   map[string]int
}

// watchWrites watches ns's FaultPolicies, Clusters, Topics and ReplicaViews until the test ends.
func watchWrites(t *testing.T, ns string) *writeCounter {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &writeCounter{counts: map[string]int{}}
	lists := map[string]client.ObjectList{
		"FaultPolicy": &routingv1alpha1.FaultPolicyList{},
		"Cluster":     &routingv1alpha1.ClusterList{},
		"Topic":       &routingv1alpha1.TopicList{},
		"ReplicaView": &routingv1alpha1.ReplicaViewList{},
	}
	for kind, list := range lists {
		watcher, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(watcher.Stop)
		go w.count(kind, watcher)
	}
	return w
}

// count tallies kind's Modified events while counting is on.
func (w *writeCounter) count(kind string, watcher watch.Interface) {
	for ev := range watcher.ResultChan() {
		if ev.Type != watch.Modified {
			continue
		}
		obj, ok := ev.Object.(client.Object)
		if !ok {
			continue
		}
		w.mu.Lock()
		if w.counting {
			w.counts[kind+"/"+obj.GetName()]++
		}
		w.mu.Unlock()
	}
}

// over counts the writes delivered during the next window and returns them.
func (w *writeCounter) over(window time.Duration) map[string]int {
	w.mu.Lock()
	w.counting = true
	w.mu.Unlock()
	<-time.After(window)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counting = false
	out := make(map[string]int, len(w.counts))
	for k, n := range w.counts {
		out[k] = n
	}
	return out
}
