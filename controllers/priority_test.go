package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// queueOp is one way a Topic is asked for, applied to the Topic controller's queue.
type queueOp func(q priorityqueue.PriorityQueue[reconcile.Request], r *TopicReconciler)

// Ways a Topic is asked for: controller-runtime's initial list, a leader's resync, a watched
// change, its route's first answer, and a later change of its route.
func listed(name string) queueOp {
	return func(q priorityqueue.PriorityQueue[reconcile.Request], _ *TopicReconciler) {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: new(handler.LowPriority)}, topicRequest(name))
	}
}

func resynced(name string) queueOp {
	return func(q priorityqueue.PriorityQueue[reconcile.Request], _ *TopicReconciler) {
		topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		enqueueResync.Generic(context.Background(), event.GenericEvent{Object: topic}, q)
	}
}

func changed(name string) queueOp {
	return func(q priorityqueue.PriorityQueue[reconcile.Request], _ *TopicReconciler) { q.Add(topicRequest(name)) }
}

func firstAnswer(name string) queueOp {
	return func(_ priorityqueue.PriorityQueue[reconcile.Request], r *TopicReconciler) {
		r.asked[topicRequest(name).NamespacedName] = time.Now()
		r.routeAnswered(topicRequest(name).NamespacedName)
	}
}

func laterAnswer(name string) queueOp {
	return func(_ priorityqueue.PriorityQueue[reconcile.Request], r *TopicReconciler) {
		r.routeAnswered(topicRequest(name).NamespacedName)
	}
}

func topicRequest(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

// TestTopicsAreReconciledFirstAnswersFirstAndBulkInTurn proves the order the Topic controller's
// queue works in after a start: a route's first answer and a watched change go ahead; a leader's
// resync, a later change of a route and the periodic look wait their turn with the initial list,
// so neither holds back the Topics not yet looked at, nor is a queued change pushed back.
func TestTopicsAreReconciledFirstAnswersFirstAndBulkInTurn(t *testing.T) {
	cases := []struct {
		name string
		ops  []queueOp
		want []string
	}{
		{"a change after a resync goes first", []queueOp{resynced("a"), resynced("b"), changed("c")}, []string{"c", "a", "b"}},
		{"a resync keeps a queued change's place", []queueOp{changed("a"), resynced("b"), resynced("a"), changed("c")},
			[]string{"a", "c", "b"}},
		{"a change lifts a resynced Topic", []queueOp{resynced("a"), resynced("b"), changed("b")}, []string{"b", "a"}},
		{"a first answer goes ahead of the initial list", []queueOp{listed("a"), listed("b"), firstAnswer("c")},
			[]string{"c", "a", "b"}},
		{"later answers take turns with the initial list", []queueOp{listed("a"), laterAnswer("b"), listed("c"), laterAnswer("d")},
			[]string{"a", "b", "c", "d"}},
		{"a first answer goes ahead of later ones", []queueOp{laterAnswer("a"), laterAnswer("b"), firstAnswer("c")},
			[]string{"c", "a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("order-" + t.Name())
			defer q.ShutDown()
			r := &TopicReconciler{asked: map[types.NamespacedName]time.Time{}}
			var wq workqueue.TypedRateLimitingInterface[reconcile.Request] = q
			r.routeChanged.q.Store(&wq)
			for _, op := range tc.ops {
				op(q, r)
			}
			if n := q.Len(); n != len(tc.want) { // Len takes in every add first
				t.Fatalf("%d queued, want %d", n, len(tc.want))
			}
			var got []string
			for range tc.want {
				req, _, _ := q.GetWithPriority()
				got = append(got, req.Name)
				q.Done(req)
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
