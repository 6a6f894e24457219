package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// readiness watches the Topics through an informer cache of the command's own, counts those
// whose Ready condition is True, and counts the writes it sees (new resourceVersions): nothing
// but status writes change the Topics while a measurement runs.
type readiness struct {
	cache cache.Cache
	want  int
	// writes counts updates seen since resetWrites; notReady those that left Ready not True.
	writes, notReady atomic.Int64
}

// watchReady starts the cache over the namespace's Topics; it runs until the process ends.
func watchReady(ctx context.Context, cp *managertest.ControlPlane, want int) (*readiness, error) {
	c, err := cache.New(cp.Config, cache.Options{Scheme: cp.Client.Scheme(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &routingv1alpha1.Topic{})
	if err != nil {
		return nil, err
	}
	r := &readiness{cache: c, want: want}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: r.updated}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Topic cache never synced")
	}
	return r, nil
}

// updated counts one write of a Topic.
func (r *readiness) updated(oldObj, newObj any) {
	o, okOld := oldObj.(*routingv1alpha1.Topic)
	n, okNew := newObj.(*routingv1alpha1.Topic)
	if !okOld || !okNew || o.ResourceVersion == n.ResourceVersion {
		return
	}
	r.writes.Add(1)
	if !apimeta.IsStatusConditionTrue(n.Status.Conditions, routingv1alpha1.ConditionReady) {
		r.notReady.Add(1)
	}
}

// resetWrites starts counting writes afresh.
func (r *readiness) resetWrites() { r.writes.Store(0); r.notReady.Store(0) }

// writesSeen is the writes counted since resetWrites, for printing.
func (r *readiness) writesSeen() string {
	w, nr := r.writes.Load(), r.notReady.Load()
	return fmt.Sprintf("%d Topic writes seen (%.2f per Topic), %d of them leaving Ready not True", w, float64(w)/float64(r.want), nr)
}

// count is how many Topics the cache holds and how many of them are Ready.
func (r *readiness) count() (topics, ready int, err error) {
	var list routingv1alpha1.TopicList
	if err := r.cache.List(context.Background(), &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		if apimeta.IsStatusConditionTrue(list.Items[i].Status.Conditions, routingv1alpha1.ConditionReady) {
			ready++
		}
	}
	return len(list.Items), ready, nil
}

// pollInterval paces the cache reads; it bounds the measurement's resolution.
const pollInterval = 100 * time.Millisecond

// waitAll returns how long after the manager's start every Topic was seen Ready, failing when
// the manager exits or timeout passes first, printing its progress under the name what.
func (r *readiness) waitAll(what string, m *managertest.Manager, timeout time.Duration) (time.Duration, error) {
	p := &progress{what: what, m: m, r: r, next: time.Now().Add(progressEvery)}
	if err := r.waitUntilReady(timeout, m.Exited, p.tick, " (manager log: "+m.LogPath+")"); err != nil {
		return 0, err
	}
	return time.Since(m.Started), nil
}

// waitReady waits until every Topic is seen Ready, failing when timeout passes first.
func (r *readiness) waitReady(timeout time.Duration) error {
	return r.waitUntilReady(timeout, func() error { return nil }, func(int) {}, "")
}

// waitUntilReady polls until every Topic is Ready, failing when stopped says so or timeout
// passes first (the error ends with note); each poll tells tick how many are Ready.
func (r *readiness) waitUntilReady(timeout time.Duration, stopped func() error, tick func(ready int), note string) error {
	deadline := time.Now().Add(timeout)
	for {
		topics, ready, err := r.count()
		if err != nil {
			return err
		}
		if topics == r.want && ready == r.want {
			return nil
		}
		if err := stopped(); err != nil {
			return err
		}
		tick(ready)
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Topics Ready after %v%s", ready, r.want, timeout, note)
		}
		<-time.After(pollInterval)
	}
}

// waitNone waits until the cache holds every Topic and none is Ready.
func (r *readiness) waitNone() error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		topics, ready, err := r.count()
		if err != nil {
			return err
		}
		if topics == r.want && ready == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Topics still Ready after clearing their status", ready)
		}
		<-time.After(pollInterval)
	}
}
