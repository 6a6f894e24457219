package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// TestResyncedTopicsWaitBehindChanges proves a leader's resync queues its Topics behind the
// changes reported meanwhile (a route's answer, an isolation), as controller-runtime queues the
// initial list, without lowering a change already queued, and that the periodic look at a
// cluster Topic is queued the same way.
func TestResyncedTopicsWaitBehindChanges(t *testing.T) {
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	resync := func(name string) func(priorityqueue.PriorityQueue[reconcile.Request]) {
		return func(q priorityqueue.PriorityQueue[reconcile.Request]) {
			topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
			enqueueResync.Generic(context.Background(), event.GenericEvent{Object: topic}, q)
		}
	}
	change := func(name string) func(priorityqueue.PriorityQueue[reconcile.Request]) {
		return func(q priorityqueue.PriorityQueue[reconcile.Request]) { q.Add(req(name)) }
	}
	cases := []struct {
		name string
		adds []func(priorityqueue.PriorityQueue[reconcile.Request])
		want []string
	}{
		{"a change after a resync goes first", []func(priorityqueue.PriorityQueue[reconcile.Request]){resync("a"), resync("b"), change("c")},
			[]string{"c", "a", "b"}},
		{"a resync keeps a queued change's place", []func(priorityqueue.PriorityQueue[reconcile.Request]){change("a"), resync("b"), resync("a"), change("c")},
			[]string{"a", "c", "b"}},
		{"a change lifts a resynced Topic", []func(priorityqueue.PriorityQueue[reconcile.Request]){resync("a"), resync("b"), change("b")},
			[]string{"b", "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("resync-" + t.Name())
			defer q.ShutDown()
			for _, add := range tc.adds {
				add(q)
			}
			if n := q.Len(); n != len(tc.want) { // Len takes in every add first
				t.Fatalf("%d queued, want %d", n, len(tc.want))
			}
			var got []string
			for range tc.want {
				r, _, _ := q.GetWithPriority()
				got = append(got, r.Name)
				q.Done(r)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("reconciled in the order %v, want %v", got, tc.want)
			}
		})
	}
	if got := refreshLater(time.Minute); got.Priority == nil || *got.Priority != handler.LowPriority || got.RequeueAfter != time.Minute {
		t.Errorf("refreshLater = %+v, want a requeue after a minute at low priority", got)
	}
}
