package main

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// managerClient is a client built as cmd/manager builds its own: the kubeconfig loaded by
// controller-runtime's config.GetConfig, which leaves the client-side rate limit off (QPS -1)
// unless the kubeconfig sets one, and nothing on top.
func managerClient(cp *managertest.ControlPlane) (client.Client, string, error) {
	if err := os.Setenv("KUBECONFIG", cp.Kubeconfig); err != nil {
		return nil, "", err
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: cp.Client.Scheme()})
	return c, fmt.Sprintf("QPS %v, burst %d", cfg.QPS, cfg.Burst), err
}

// measureAPIServer times the API server alone taking one status write of every Topic, the
// write the manager makes when a Topic turns Ready (a merge patch of the status subresource from
// the empty status, no resourceVersion precondition, the same broker list and conditions), from
// one client with the manager's settings and writers goroutines, and until the readiness cache
// has seen every Topic Ready, as the manager's times are taken. It clears the statuses again
// after, so the manager starts from Topics without status as on a first start. It prints one line
// beginning with label.
func measureAPIServer(ctx context.Context, cp *managertest.ControlPlane, f *fleet, ready *readiness, cfg config, label string) (time.Duration, error) {
	c, settings, err := managerClient(cp)
	if err != nil {
		return 0, err
	}
	var list routingv1alpha1.TopicList
	if err := cp.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	objs := make([]client.Object, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	ready.resetWrites()
	start := time.Now()
	err = parallelN(cfg.apiWriters, objs, func(o client.Object) error {
		t := o.(*routingv1alpha1.Topic)
		orig := t.DeepCopy()
		t.Status = readyStatus(t, f, cfg)
		return c.Status().Patch(ctx, t, client.MergeFrom(orig))
	})
	if err != nil {
		return 0, err
	}
	wrote := time.Since(start)
	if err := ready.waitReady(20 * time.Minute); err != nil {
		return 0, err
	}
	took := time.Since(start)
	fmt.Printf("%s: %d Topic status writes in %v, %.0f writes/s (every Topic seen Ready after %v; one client, %s, %d writers)\n",
		label, len(objs), wrote.Round(10*time.Millisecond), float64(len(objs))/wrote.Seconds(), took.Round(10*time.Millisecond), settings, cfg.apiWriters)
	return took, clearStatuses(ctx, cp, ready)
}

// readyStatus is the status the manager writes for a Ready Topic of this command's fleet: every
// broker of its Cluster publishing the topic with 4 queues and perm 6, none isolated.
func readyStatus(t *routingv1alpha1.Topic, f *fleet, cfg config) routingv1alpha1.TopicStatus {
	var c int
	_, _ = fmt.Sscanf(t.Spec.ClusterRef.Name, "c%d", &c)
	st := routingv1alpha1.TopicStatus{ObservedGeneration: t.Generation, BrokerCount: int32(cfg.brokers)}
	for _, b := range f.brokers[c*cfg.brokers : (c+1)*cfg.brokers] {
		st.Brokers = append(st.Brokers, routingv1alpha1.TopicBroker{Name: b.Name(), Address: b.Addr(), Ready: true,
			WriteQueues: 4, ReadQueues: 4, Perm: 6})
		st.WritableQueues += 4
	}
	st.AvailableQueues = st.WritableQueues
	st.Conditions = []metav1.Condition{{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		ObservedGeneration: t.Generation, LastTransitionTime: metav1.Now(), Reason: routingv1alpha1.ReasonReconciled,
		Message: fmt.Sprintf("Routed by name server %s to %d brokers; %d of %d write queues available",
			f.nameServers[c].Addr(), cfg.brokers, st.AvailableQueues, st.WritableQueues)}}
	return st
}
