package controllers

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// maxSeenBy is the most replicas an isolated broker's seenBy names: the schema's bound.
const maxSeenBy = 32

// FaultPolicyReconciler pushes a FaultPolicy into the runtime (changes take effect with the next
// send, learnt state is kept) and writes the runtime's isolations into status. Isolation changes
// reach it through the runtime's event channel, not by polling; status writes are skipped when
// nothing changed and spaced at least a second apart. Every replica pushes the policy; only the
// leader writes status.
type FaultPolicyReconciler struct {
	client.Client
	Runtime *producer.Runtime
	*shared
}

var _ reconcile.Reconciler = (*FaultPolicyReconciler)(nil)

// Reconcile gets the FaultPolicy, translates and pushes it, then writes status once.
func (r *FaultPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := scope.PolicyKey(req.Namespace, req.Name)
	var fp routingv1alpha1.FaultPolicy
	if err := r.Get(ctx, req.NamespacedName, &fp); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.Runtime.RemovePolicy(key)
		r.metrics.ForgetPolicy(key)
		r.policyWrites.forget(req.NamespacedName)
		ctrl.LoggerFrom(ctx).Info("Policy removed from the runtime", "policy", key)
		return ctrl.Result{}, nil
	}
	users, err := usersOf(ctx, r.Client, &fp)
	if err != nil {
		return ctrl.Result{}, err
	}
	pushErr := pushPolicy(r.Runtime, &fp, len(users.clusters) > 0)
	if !r.leading() {
		return ctrl.Result{}, nil
	}
	if released, err := r.applyProtection(ctx, &fp, users); err != nil || released {
		return ctrl.Result{}, err
	}
	orig := fp.DeepCopy()
	heldTimer := r.computeStatus(&fp, key, pushErr, users)
	result, err := r.policyWrites.patchStatus(ctx, r.Client, &fp, orig,
		!equality.Semantic.DeepEqual(fp.Status, orig.Status), r.metrics, "FaultPolicy")
	if err != nil || heldTimer.IsZero() {
		return result, err
	}
	// A held broker's timer ends without an event (it stays isolated): write status again then,
	// so its until does not stand in the past.
	again := max(time.Until(heldTimer), time.Second)
	if result.RequeueAfter == 0 || again < result.RequeueAfter {
		result.RequeueAfter = again
	}
	return result, nil
}

// policyUsers are the Topics and Clusters in a policy's namespace that reference it.
type policyUsers struct {
	topics   []routingv1alpha1.Topic
	clusters []routingv1alpha1.Cluster
}

// empty reports whether nothing references the policy.
func (u policyUsers) empty() bool { return len(u.topics) == 0 && len(u.clusters) == 0 }

// String names the users for messages: Clusters first, then Topics, each in a stable order.
func (u policyUsers) String() string {
	var parts []string
	if len(u.clusters) > 0 {
		names := make([]string, 0, len(u.clusters))
		for _, c := range u.clusters {
			names = append(names, c.Name)
		}
		slices.Sort(names)
		parts = append(parts, "Clusters: "+strings.Join(names, ", "))
	}
	if len(u.topics) > 0 {
		parts = append(parts, "Topics: "+topicNames(u.topics))
	}
	return strings.Join(parts, "; ")
}

// usersOf lists the Topics and Clusters in the policy's namespace that reference it. c must be the
// manager's cached client: the lists select by faultPolicyRefField, which only the cache indexes.
func usersOf(ctx context.Context, c client.Reader, fp *routingv1alpha1.FaultPolicy) (policyUsers, error) {
	naming := []client.ListOption{client.InNamespace(fp.Namespace), client.MatchingFields{faultPolicyRefField: fp.Name}}
	var topics routingv1alpha1.TopicList
	if err := c.List(ctx, &topics, naming...); err != nil {
		return policyUsers{}, fmt.Errorf("listing Topics: %w", err)
	}
	var clusters routingv1alpha1.ClusterList
	if err := c.List(ctx, &clusters, naming...); err != nil {
		return policyUsers{}, fmt.Errorf("listing Clusters: %w", err)
	}
	return policyUsers{topics: topics.Items, clusters: clusters.Items}, nil
}

// applyProtection keeps the protection finalizer on a live policy and, once the policy is being
// deleted, releases it when no Topic or Cluster uses the policy any more (released reports
// that). While any still uses it, the deletion waits and an Event names them; the runtime keeps
// the policy and everything it learnt until then.
func (r *FaultPolicyReconciler) applyProtection(ctx context.Context, fp *routingv1alpha1.FaultPolicy, users policyUsers) (released bool, err error) {
	if fp.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(fp, routingv1alpha1.FaultPolicyProtection) {
			return false, nil
		}
		patch := client.MergeFromWithOptions(fp.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(fp, routingv1alpha1.FaultPolicyProtection)
		return false, r.Patch(ctx, fp, patch)
	}
	if !controllerutil.ContainsFinalizer(fp, routingv1alpha1.FaultPolicyProtection) {
		return false, nil
	}
	if !users.empty() {
		if r.protectionEvents.wait(client.ObjectKeyFromObject(fp)) == 0 {
			r.protectionEvents.wrote(client.ObjectKeyFromObject(fp))
			r.recorder.Eventf(fp, nil, corev1.EventTypeWarning, EventDeletionWaits, "Delete",
				"Deletion waits for what uses this policy (%s)", users)
		}
		return false, nil
	}
	patch := client.MergeFromWithOptions(fp.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(fp, routingv1alpha1.FaultPolicyProtection)
	if err := r.Patch(ctx, fp, patch); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("No Topic or Cluster uses the policy any more: deletion proceeds", "policy", client.ObjectKeyFromObject(fp))
	return true, nil
}

// topicNames lists Topics by name, in a stable order, for messages.
func topicNames(topics []routingv1alpha1.Topic) string {
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// pushPolicy translates a FaultPolicy and hands it to the runtime; clusterWide says a Cluster's
// faultPolicyRef names it, which makes watching the routed brokers its default.
func pushPolicy(rt *producer.Runtime, fp *routingv1alpha1.FaultPolicy, clusterWide bool) error {
	p, err := runtimePolicy(scope.PolicyKey(fp.Namespace, fp.Name), &fp.Spec, clusterWide)
	if err != nil {
		return err
	}
	return rt.SetPolicy(p)
}

// computeStatus fills status from the runtime: brokers governed, the isolated ones and why (the
// first maxStatusBrokers by identity; isolated counts them all), and which Topics and Clusters
// use the policy. heldTimer is the earliest timer still running of a broker held until proven,
// zero if none: when it ends the status must be written again, though no isolation changes.
func (r *FaultPolicyReconciler) computeStatus(fp *routingv1alpha1.FaultPolicy, key string, pushErr error, users policyUsers) (heldTimer time.Time) {
	now := time.Now()
	st := &fp.Status
	st.ObservedGeneration = fp.Generation
	governed := r.governedBrokers(users, key)
	st.Brokers = int32(len(governed))
	st.IsolatedBrokers = nil
	isolated := 0
	figures := map[string]producer.BrokerPressure{}
	for _, f := range r.Runtime.Pressure(key) {
		figures[f.Broker] = f
	}
	for _, it := range r.Runtime.Isolated(key) {
		// Pod marks reach every policy's table; a policy reports them only for brokers it governs.
		// Isolations learnt from sends (or restored) are always its own.
		podMark := it.Reason == fault.ReasonPodNotReady || it.Reason == fault.ReasonPodTerminating
		b, ok := scope.ParseBrokerID(it.Broker)
		if !ok || b.Scope.Namespace != fp.Namespace || (podMark && !governed[it.Broker]) {
			continue
		}
		isolated++
		if len(st.IsolatedBrokers) < maxStatusBrokers {
			ib := r.isolatedBroker(b.Name, it, now)
			ib.Cluster = b.Scope.Cluster
			if ib.HeldUntilProven && ib.Until != nil && (heldTimer.IsZero() || ib.Until.Time.Before(heldTimer)) {
				heldTimer = ib.Until.Time
			}
			if f, ok := figures[it.Broker]; ok && it.Reason == fault.ReasonBrokerPressure {
				ib.Pressure = pressureFigures(f)
			}
			if !podMark {
				ib.SeenBy = r.fleet.seenBy(key, it.Broker, !it.Peer)
				ib.SeenBy = ib.SeenBy[:min(len(ib.SeenBy), maxSeenBy)]
			}
			st.IsolatedBrokers = append(st.IsolatedBrokers, ib)
		}
	}
	st.Isolated = int32(isolated)
	st.Replicas = r.fleet.replicas()
	r.metrics.SetIsolated(key, isolated)

	// What runs: the policy as last pushed, or, when no valid spec ever reached the runtime, the
	// default policy its Topics fall back to.
	st.Behavior, st.Effective = "", nil
	if p, ok := r.Runtime.Policy(key); ok {
		st.Behavior, st.Effective = p.Behavior(), effectivePolicy(p)
	} else if p, ok := r.Runtime.Policy(""); ok {
		st.Behavior, st.Effective = p.Behavior(), effectivePolicy(p)
	}

	cond := metav1.Condition{Type: routingv1alpha1.ConditionReady, ObservedGeneration: fp.Generation}
	if pushErr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, routingv1alpha1.ReasonInvalidSpec, pushErr.Error()
	} else {
		cond.Status, cond.Reason = metav1.ConditionTrue, routingv1alpha1.ReasonReconciled
		cond.Message = fmt.Sprintf("In force for %d brokers, %d isolated", st.Brokers, st.Isolated)
		if isolated > maxStatusBrokers {
			// Isolations beyond the list are also not restored after a restart: they are learnt
			// again.
			cond.Message += fmt.Sprintf("; status lists the first %d isolated brokers by name (the schema's bound)", maxStatusBrokers)
		}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	meta.SetStatusCondition(&st.Conditions, inUseCondition(fp, users))
	return heldTimer
}

// inUseCondition says which Topics and Clusters use the policy and, when it is being deleted,
// that the deletion waits for them.
func inUseCondition(fp *routingv1alpha1.FaultPolicy, users policyUsers) metav1.Condition {
	cond := metav1.Condition{Type: routingv1alpha1.ConditionInUse, ObservedGeneration: fp.Generation}
	if users.empty() {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, routingv1alpha1.ReasonNotReferenced, "No Topic or Cluster uses this policy"
		return cond
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, routingv1alpha1.ReasonReferencedByTopics
	if len(users.clusters) > 0 {
		cond.Reason = routingv1alpha1.ReasonReferencedByClusters
	}
	cond.Message = "Used by " + users.String()
	if !fp.DeletionTimestamp.IsZero() {
		cond.Message = "Deletion waits for what uses this policy (" + users.String() + ")"
	}
	return cond
}

// governedBrokers is the set of brokers (runtime identities) the policy governs: those in the
// routes of the Topics that use it and in the watch routes of the Clusters that name it.
func (r *FaultPolicyReconciler) governedBrokers(users policyUsers, key string) map[string]bool {
	routes := make([]string, 0, len(users.topics)+len(users.clusters))
	for _, t := range users.topics {
		routes = append(routes, scope.TopicRoute(t.Namespace, t.Name))
	}
	for _, c := range users.clusters {
		routes = append(routes, scope.Cluster(c.Namespace, c.Name).WatchRoute())
	}
	brokers := map[string]bool{}
	for _, route := range routes {
		info, ok := r.Runtime.RouteInfo(route)
		if !ok || info.Policy != key {
			continue
		}
		for _, q := range info.Queues {
			brokers[q.Broker] = true
		}
	}
	return brokers
}

// pressureFigures renders a broker's send-path figures and busy limits for status, leaving out
// the unknown ones. Fractions are rounded up, so a figure over a threshold never shows at the threshold.
func pressureFigures(f producer.BrokerPressure) *routingv1alpha1.BrokerPressureFigures {
	p := f.BrokerPressure
	out := &routingv1alpha1.BrokerPressureFigures{}
	known := func(v int64) *int64 {
		if v < 0 {
			return nil
		}
		return ptr.To(v)
	}
	if fill := p.SendQueueFillPercent(); fill >= 0 {
		out.SendQueueFillPercent = ptr.To(int32(math.Ceil(fill)))
	}
	out.SendQueueHeadWaitMillis = known(p.SendQueueHeadWaitMillis)
	out.PageCacheLockMillis = known(p.PageCacheLockMillis)
	if p.PutLatency99Millis >= 0 {
		out.PutLatency99Millis = ptr.To(int64(math.Ceil(p.PutLatency99Millis)))
	}
	out.SendQueueWaitLimitMillis = known(f.Limits.SendQueueWaitMillis)
	out.PageCacheBusyLimitMillis = known(f.Limits.PageCacheBusyMillis)
	return out
}

// isolatedBroker renders a fault item of the broker named name for status. Times are cut to
// whole seconds, as the API stores them, so an unchanged isolation compares equal and costs no
// write.
func (r *FaultPolicyReconciler) isolatedBroker(name string, it fault.Item, now time.Time) routingv1alpha1.IsolatedBroker {
	ib := routingv1alpha1.IsolatedBroker{
		BrokerName:    name,
		Pod:           r.brokers.podOf(it.Broker),
		Reason:        routingv1alpha1.IsolationReason(it.Reason),
		LatencyMillis: it.Latency.Milliseconds(),
		Since:         metav1.NewTime(it.Since.Truncate(time.Second)),
		Reachable:     it.Reachable,
		// Held until proven: the timer, running or over, does not say when the broker returns.
		HeldUntilProven: it.HeldUntilProven,
	}
	if it.Until.After(now) {
		ib.Until = ptr.To(metav1.NewTime(it.Until.Truncate(time.Second)))
	}
	return ib
}

// SetupWithManager registers the reconciler with its watches: FaultPolicies, Topics and Clusters
// (which use policies and change the brokers a policy governs), the runtime's isolation events
// and the leader's resync.
func (r *FaultPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("faultpolicy").
		For(&routingv1alpha1.FaultPolicy{}).
		Watches(&routingv1alpha1.Topic{}, handler.EnqueueRequestsFromMapFunc(policyOfTopic)).
		Watches(&routingv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(policyOfCluster)).
		WatchesRawSource(source.Channel(r.policyIsolations, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// policyOfTopic maps a Topic to the FaultPolicy it references.
func policyOfTopic(_ context.Context, obj client.Object) []reconcile.Request {
	t, ok := obj.(*routingv1alpha1.Topic)
	if !ok || t.Spec.FaultPolicyRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: t.Namespace, Name: t.Spec.FaultPolicyRef.Name}}}
}

// policyOfCluster maps a Cluster to the FaultPolicy its faultPolicyRef names (on an update, the
// old object's policy too: a Cluster that drops its reference releases that policy).
func policyOfCluster(_ context.Context, obj client.Object) []reconcile.Request {
	c, ok := obj.(*routingv1alpha1.Cluster)
	if !ok || c.Spec.FaultPolicyRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.FaultPolicyRef.Name}}}
}
