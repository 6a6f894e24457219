package main

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// readiness watches the Topics through an informer cache of the command's own and counts those
// whose Ready condition is True.
type readiness struct {
	cache cache.Cache
	want  int
}

// watchReady starts the cache over the namespace's Topics; it runs until the process ends.
func watchReady(ctx context.Context, cp *managertest.ControlPlane, want int) (*readiness, error) {
	c, err := cache.New(cp.Config, cache.Options{Scheme: cp.Client.Scheme(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &routingv1alpha1.Topic{}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Topic cache never synced")
	}
	return &readiness{cache: c, want: want}, nil
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
// the manager exits or timeout passes first.
func (r *readiness) waitAll(m *managertest.Manager, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for {
		topics, ready, err := r.count()
		if err != nil {
			return 0, err
		}
		if topics == r.want && ready == r.want {
			return time.Since(m.Started), nil
		}
		if err := m.Exited(); err != nil {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d Topics Ready after %v (manager log: %s)", ready, r.want, timeout, m.LogPath)
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
