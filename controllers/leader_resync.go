package controllers

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// leaderResync asks every reconciler to write status each time this replica wins the lease:
// while it was not leading, reconciles pushed state into its runtime but wrote nothing.
type leaderResync struct {
	client.Client
	*shared
}

var _ manager.LeaderElectionRunnable = (*leaderResync)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: it follows the Leadership, which
// comes and goes while the process runs.
func (l *leaderResync) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (l *leaderResync) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.lead.won:
		}
		if err := l.resync(ctx); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "Resync after winning the lease failed; the next changes write status")
		}
	}
}

func (l *leaderResync) resync(ctx context.Context) error {
	var policies routingv1alpha1.FaultPolicyList
	if err := l.List(ctx, &policies); err != nil {
		return err
	}
	var topics routingv1alpha1.TopicList
	if err := l.List(ctx, &topics); err != nil {
		return err
	}
	send := func(ch chan event.GenericEvent, obj client.Object) bool {
		select {
		case ch <- event.GenericEvent{Object: obj}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i := range policies.Items {
		if !send(l.policyIsolations, &policies.Items[i]) {
			return nil
		}
	}
	for i := range topics.Items {
		if !send(l.topicResync, &topics.Items[i]) {
			return nil
		}
	}
	return nil
}

// enqueueResync asks for a reconcile of each resynced object at controller-runtime's low
// priority, where its queue puts the objects of the initial list: a resync looks at every object
// again, and must not hold back the changes reported meanwhile. A manager that leads from its
// start resyncs every Topic while the initial list is still being worked through; at normal
// priority the resync lifted those 10,000 reconciles ahead of the routes' answers, so no Topic
// was written until every one had been looked at once.
var enqueueResync = handler.Funcs{
	GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueLow(q, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
	},
}

// enqueueLow adds req to q at controller-runtime's low priority, or plainly to a queue without
// priorities.
func enqueueLow(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
		return
	}
	q.Add(req)
}
