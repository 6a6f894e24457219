package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/detourmq/detour/pkg/scope"
)

// addHealthChecks makes liveness follow the runtime, and readiness the runtime, the cache and
// the gateway: a replica is ready when it can actually send what it is asked to.
func (op *Operator) addHealthChecks() error {
	runtimeOpen := func(*http.Request) error {
		if op.rtClosed.Load() {
			return errors.New("the producer runtime is closed")
		}
		return nil
	}
	if err := op.mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := op.mgr.AddHealthzCheck("runtime", runtimeOpen); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("runtime", runtimeOpen); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("shutdown", func(*http.Request) error {
		if op.stopping.Load() {
			return errors.New("the manager is stopping")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("isolations-restored", func(*http.Request) error {
		if !op.ctrls.IsolationsRestored() {
			return errors.New("the isolations recorded in FaultPolicy status are not restored yet")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("cache-sync", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !op.mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the informer caches have not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	if op.gw != nil {
		if err := op.mgr.AddReadyzCheck("gateway", func(*http.Request) error { return op.gw.Serving() }); err != nil {
			return err
		}
	}
	return op.mgr.AddReadyzCheck("topics-routed", op.topicsRouted())
}

// topicsRouted is a readiness check that passes once every Topic present when the caches synced
// has been routed once: its route is in force, or (on a Cluster) its name servers were asked,
// whatever they answered. A rollout then never answers 503 NoRoute to traffic it accepted because
// the new replica had not routed yet. Once passed it stays passed: Topics created later are not
// a reason to take a serving replica out of its Service.
//
// The Topics are listed in the background: a list can block for minutes while the API server is
// unreachable (the client's discovery waits on it), and a probe must answer at once, not ready.
func (op *Operator) topicsRouted() healthz.Checker {
	var (
		passed  atomic.Bool
		mu      sync.Mutex
		initial []routingv1alpha1.Topic
		listed  bool
		listing bool
		listErr error
	)
	list := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var topics routingv1alpha1.TopicList
		err := errors.New("the informer caches have not synced")
		if op.mgr.GetCache().WaitForCacheSync(ctx) {
			err = op.mgr.GetClient().List(ctx, &topics)
		}
		mu.Lock()
		defer mu.Unlock()
		listing, listErr = false, err
		if err == nil {
			initial, listed = topics.Items, true
		}
	}
	return func(*http.Request) error {
		if passed.Load() {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if !listed {
			if !listing {
				listing = true
				go list()
			}
			if listErr != nil {
				return fmt.Errorf("listing the Topics present at start: %w", listErr)
			}
			return errors.New("listing the Topics present at start")
		}
		var waiting []string
		for i := range initial {
			t := &initial[i]
			key := scope.TopicRoute(t.Namespace, t.Name)
			_, routed := op.rt.RouteInfo(key)
			_, asked := op.rt.RouteStatus(key)
			if !routed && !asked {
				waiting = append(waiting, client.ObjectKeyFromObject(t).String())
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("%d of %d Topics not routed yet, for example %s", len(waiting), len(initial), waiting[0])
		}
		passed.Store(true)
		return nil
	}
}
