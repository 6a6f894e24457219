package controllers

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/detourmq/detour/pkg/metrics"
)

// brokerDirectory remembers which pod backs each broker identity the runtime knows (a pod backs
// one per scope that selects it: its namespace, and each Cluster whose selector picks it), so
// status can name the pod and a deleted pod's brokers can be forgotten (the Pod is gone by then).
type brokerDirectory struct {
	mu       sync.RWMutex
	byPod    map[types.NamespacedName][]string
	byBroker map[string]types.NamespacedName
}

func newBrokerDirectory() *brokerDirectory {
	return &brokerDirectory{byPod: map[types.NamespacedName][]string{}, byBroker: map[string]types.NamespacedName{}}
}

// set records that pod is the master of brokers, and returns the identities it backed before
// and no longer does (and no other pod has taken over): they must leave the runtime.
func (d *brokerDirectory) set(pod types.NamespacedName, brokers ...string) (dropped []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, old := range d.byPod[pod] {
		if !slices.Contains(brokers, old) && d.byBroker[old] == pod {
			delete(d.byBroker, old)
			dropped = append(dropped, old)
		}
	}
	d.byPod[pod] = slices.Clone(brokers)
	for _, b := range brokers {
		d.byBroker[b] = pod
	}
	return dropped
}

// forget drops pod and returns the brokers it backed that no other pod has taken over since (a
// replacement master keeps its broker in the runtime).
func (d *brokerDirectory) forget(pod types.NamespacedName) (owned []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.byPod[pod] {
		if d.byBroker[b] == pod {
			delete(d.byBroker, b)
			owned = append(owned, b)
		}
	}
	delete(d.byPod, pod)
	return owned
}

// podOf names the pod backing broker, or "" when unknown.
func (d *brokerDirectory) podOf(broker string) string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.byBroker[broker].Name
}

// writeLimiter spaces status writes of one object at least interval apart, so a storm of
// isolation events costs at most one write per object per interval.
type writeLimiter struct {
	interval time.Duration
	now      func() time.Time
	mu       sync.Mutex
	last     map[types.NamespacedName]time.Time
}

func newWriteLimiter(interval time.Duration) *writeLimiter {
	return &writeLimiter{interval: interval, now: time.Now, last: map[types.NamespacedName]time.Time{}}
}

// wait returns how long to wait before obj may be written again; 0 means now.
func (l *writeLimiter) wait(obj types.NamespacedName) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.last[obj]
	if !ok {
		return 0
	}
	if d := l.interval - l.now().Sub(last); d > 0 {
		return d
	}
	return 0
}

// wrote records a write of obj now.
func (l *writeLimiter) wrote(obj types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[obj] = l.now()
}

// forget drops a deleted object.
func (l *writeLimiter) forget(obj types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, obj)
}

// patchStatus merge-patches obj's status from orig when it changed, at most once per interval
// per object; a change inside the interval is written when the interval is up (the caller's
// reconcile is requeued for then).
func (l *writeLimiter) patchStatus(ctx context.Context, c client.Client, obj, orig client.Object, changed bool,
	m *metrics.Runtime, kind string) (ctrl.Result, error) {
	if !changed {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(obj)
	if d := l.wait(key); d > 0 {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return ctrl.Result{}, err
	}
	l.wrote(key)
	m.StatusWritten(kind)
	return ctrl.Result{}, nil
}
