package main

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// namespace holds every object the command creates.
const namespace = "scale"

// createObjects creates the namespace, a Cluster per name server and the Topics, each Topic
// declaring a topic its Cluster's brokers already hold (spec.create false).
func createObjects(ctx context.Context, cp *managertest.ControlPlane, f *fleet, cfg config) error {
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}}
	for c, ns := range f.nameServers {
		cluster := fmt.Sprintf("c%d", c)
		objs = append(objs, &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{ns.Addr()}}})
		for i := range topicsOf(c, cfg) {
			objs = append(objs, &routingv1alpha1.Topic{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("c%d-t%05d", c, i)},
				Spec: routingv1alpha1.TopicSpec{TopicName: topicName(c, i), ClusterRef: &routingv1alpha1.ClusterReference{Name: cluster},
					Create: ptr.To(false), WriteQueueNums: 4, ReadQueueNums: 4, Perm: 6}})
		}
	}
	// The namespace first, then the rest from a few writers at once.
	if err := cp.Client.Create(ctx, objs[0]); err != nil {
		return err
	}
	return parallel(objs[1:], func(o client.Object) error {
		if err := cp.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", client.ObjectKeyFromObject(o), err)
		}
		return nil
	})
}

// clearStatuses empties every Topic's status while the manager is down, so that its next start
// must write Ready again, and waits until the cache has seen none Ready.
func clearStatuses(ctx context.Context, cp *managertest.ControlPlane, ready *readiness) error {
	var list routingv1alpha1.TopicList
	if err := cp.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err
	}
	objs := make([]client.Object, len(list.Items))
	for i := range list.Items {
		list.Items[i].Status = routingv1alpha1.TopicStatus{}
		objs[i] = &list.Items[i]
	}
	err := parallel(objs, func(o client.Object) error { return cp.Client.Status().Update(ctx, o) })
	if err != nil {
		return err
	}
	return ready.waitNone()
}

// parallel calls do for every object from 16 goroutines, returning the first error.
func parallel(objs []client.Object, do func(client.Object) error) error {
	return parallelN(16, objs, do)
}

// parallelN calls do for every object from n goroutines, returning the first error.
func parallelN(n int, objs []client.Object, do func(client.Object) error) error {
	next := make(chan client.Object)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for o := range next {
				if err := do(o); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var first error
feed:
	for _, o := range objs {
		select {
		case next <- o:
		case first = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if first == nil {
		first = <-errs
	}
	return first
}
