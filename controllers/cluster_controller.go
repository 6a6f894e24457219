package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// maxStatusBrokers is the most brokers a Cluster's or Topic's status lists: the schema's
// MaxItems. A status with more would be refused whole by the API server.
const maxStatusBrokers = 1024

// maxConditionMessage bounds a condition message built from what name servers said (remarks,
// errors): the schema allows 32768 bytes, and a longer message would have the whole status
// refused.
const maxConditionMessage = 4096

// ClusterReconciler writes what a Cluster's name servers publish into its status: the broker
// groups, their masters, whether each takes writes, and the pod health of brokers its selector
// matches. Name servers cannot be watched, so they are looked at again every route refresh
// interval, by the describer on goroutines of its own: a Cluster whose name servers never answer
// delays no other Cluster's status. Only the leader writes status; routing itself is the Topic
// reconciler's.
type ClusterReconciler struct {
	client.Client
	Runtime *producer.Runtime
	*shared
	// looked carries Clusters whose look at the name servers finished.
	looked requestQueue
	// generations are the spec generations of the Clusters seen, by Cluster: a new one drops the
	// routes of undeclared topics asked for under the old (see forgetUndeclared).
	generations sync.Map
}

var _ reconcile.Reconciler = (*ClusterReconciler)(nil)

// Reconcile gets the Cluster, asks its name servers, matches pods, and writes status once.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cl routingv1alpha1.Cluster
	if err := r.Get(ctx, req.NamespacedName, &cl); err != nil {
		if apierrors.IsNotFound(err) {
			r.clusterWrites.forget(req.NamespacedName)
			r.describer.forget(req.NamespacedName)
			r.Runtime.RemoveRoute(scope.Cluster(req.Namespace, req.Name).WatchRoute())
			r.forgetUndeclared(req.NamespacedName, 0)
			return ctrl.Result{}, r.Runtime.SetCredentials(scope.Cluster(req.Namespace, req.Name).Prefix(), nil)
		}
		return ctrl.Result{}, err
	}
	// Every replica sends, so every replica signs; and every replica keeps routes of undeclared
	// topics, asked for with the spec they were first asked with.
	r.forgetUndeclared(req.NamespacedName, cl.Generation)
	credScope := scope.Cluster(cl.Namespace, cl.Name).Prefix()
	secretErr := r.syncCredentials(ctx, r.Runtime, credScope, cl.Namespace, cl.Spec.CredentialsSecretRef)
	if secretErr != nil && !errors.Is(secretErr, errSecretUnusable) {
		return ctrl.Result{}, secretErr
	}
	look, next := r.describer.latest(req.NamespacedName, cl.Spec.NameServers, refreshInterval(&cl))
	again := ctrl.Result{RequeueAfter: next}
	if !look.done {
		return again, nil // the look's end asks for this reconcile
	}
	// Every replica puts the Cluster's brokers under its policy: each one's facade hides what its
	// own watch finds, not only what the leader's view says after a write and a watch.
	if look.err == nil {
		syncClusterWatch(ctx, r.Runtime, &cl, look.view)
	}
	if !r.leading() {
		return again, nil
	}
	pods, err := selectedBrokerPods(ctx, r.Client, cl.Namespace, cl.Spec.BrokerSelector)
	if err != nil {
		return ctrl.Result{}, err
	}
	missing, err := policyMissing(ctx, r.Client, &cl)
	if err != nil {
		return ctrl.Result{}, err
	}
	orig := cl.DeepCopy()
	computeClusterStatus(&cl, look.view, pods, look.err, missing)
	markHidden(ctx, r.Client, r.Runtime, &cl)
	computeUndeclaredStatus(&cl, r.Runtime)
	rf := credentialsCondition(&cl.Status.Conditions, cl.Generation, r.Runtime, credScope, "", cl.Spec.CredentialsSecretRef, secretErr)
	r.credentialsEvent(&cl, meta.FindStatusCondition(orig.Status.Conditions, routingv1alpha1.ConditionCredentialsAccepted),
		meta.FindStatusCondition(cl.Status.Conditions, routingv1alpha1.ConditionCredentialsAccepted), rf)
	result, err := r.clusterWrites.patchStatus(ctx, r.Client, &cl, orig,
		!equality.Semantic.DeepEqual(cl.Status, orig.Status), r.metrics, "Cluster")
	if err != nil || result.RequeueAfter > 0 {
		return result, err
	}
	return again, nil
}

// refreshInterval is the Cluster's route refresh interval.
func refreshInterval(cl *routingv1alpha1.Cluster) time.Duration {
	if s := cl.Spec.RouteRefreshSeconds; s > 0 {
		return time.Duration(s) * time.Second
	}
	return producer.DefaultRouteRefresh
}

// policyMissing reports whether the Cluster's faultPolicyRef names a FaultPolicy that does not
// exist (false without a reference).
func policyMissing(ctx context.Context, c client.Reader, cl *routingv1alpha1.Cluster) (bool, error) {
	ref := cl.Spec.FaultPolicyRef
	if ref == nil {
		return false, nil
	}
	var fp routingv1alpha1.FaultPolicy
	err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: ref.Name}, &fp)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// computeClusterStatus fills status from the name servers' view (when askErr is nil; otherwise the
// last published brokers stay, marked by a False Ready condition) and the matched pods. The
// brokers listed stop at maxStatusBrokers; brokerCount and writableBrokers count them all. A
// Cluster whose faultPolicyRef names no FaultPolicy (policyMissing) is not Ready, and says so.
func computeClusterStatus(cl *routingv1alpha1.Cluster, view producer.ClusterView, pods map[string]selectedBroker, askErr error, policyMissing bool) {
	st := &cl.Status
	st.ObservedGeneration = cl.Generation
	cond := metav1.Condition{Type: routingv1alpha1.ConditionReady, ObservedGeneration: cl.Generation}
	if askErr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, routingv1alpha1.ReasonNameServersUnreachable, conditionMessage(askErr.Error())
		if errors.Is(askErr, producer.ErrAnswerRefused) {
			cond.Reason = routingv1alpha1.ReasonClusterInfoRefused
			cond.Message = conditionMessage(askErr.Error() + "; the brokers last published stay in status")
		}
		meta.SetStatusCondition(&st.Conditions, cond)
		return
	}
	st.NameServer = view.NameServer
	st.Brokers, st.WritableBrokers = nil, 0
	for _, b := range view.Brokers {
		cb := routingv1alpha1.ClusterBroker{Name: b.Name, Cluster: b.Cluster, MasterAddress: b.MasterAddr, Writable: b.Writable, Ready: true}
		if p, ok := pods[b.Name]; ok {
			cb.Pod, cb.Ready = p.pod, p.Ready
		}
		if cb.Writable && cb.MasterAddress != "" {
			st.WritableBrokers++
		}
		if len(st.Brokers) < maxStatusBrokers {
			st.Brokers = append(st.Brokers, cb)
		}
	}
	st.BrokerCount = int32(len(view.Brokers))
	cond.Status, cond.Reason = metav1.ConditionTrue, routingv1alpha1.ReasonReconciled
	cond.Message = fmt.Sprintf("Name server %s publishes %d brokers, %d writable", view.NameServer, st.BrokerCount, st.WritableBrokers)
	cond.Message += listCut(len(view.Brokers))
	if policyMissing {
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonFaultPolicyNotFound
		cond.Message = fmt.Sprintf("FaultPolicy %q does not exist in this namespace: no broker is watched or hidden under it until it does. ", cl.Spec.FaultPolicyRef.Name) + cond.Message
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

// listCut is what a Ready message adds when a status lists only the first maxStatusBrokers of n
// brokers; "" when it lists them all.
func listCut(n int) string {
	if n <= maxStatusBrokers {
		return ""
	}
	return fmt.Sprintf("; status lists the first %d of the %d brokers by name (the schema's bound)", maxStatusBrokers, n)
}

// conditionMessage cuts a message built from what peers said to maxConditionMessage bytes, at a
// rune boundary.
func conditionMessage(s string) string { return cutMessage(s, maxConditionMessage) }

// cutMessage cuts s to at most limit bytes, at a rune boundary, marking the cut.
func cutMessage(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const more = " …(cut)"
	cut := limit - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// clustersOfPod maps a pod to the Clusters in its namespace whose selector matches it.
func (r *ClusterReconciler) clustersOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.clustersWhere(ctx, obj.GetNamespace(), func(c *routingv1alpha1.Cluster) bool {
		return selects(c.Spec.BrokerSelector, obj.GetLabels())
	})
}

// clustersWhere asks for a reconcile of each Cluster in namespace that opts list and match
// accepts (nil accepts all); see requestsFor.
func (r *ClusterReconciler) clustersWhere(ctx context.Context, namespace string, match func(*routingv1alpha1.Cluster) bool,
	opts ...client.ListOption) []reconcile.Request {
	return requestsFor(ctx, r, &routingv1alpha1.ClusterList{}, namespace, match, opts...)
}

// SetupWithManager registers the reconciler with its watches: Clusters, broker pods, the
// FaultPolicies Clusters name and finished looks at name servers.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.describer.subscribe(r.looked.add)
	return ctrl.NewControllerManagedBy(mgr).
		Named("cluster").
		For(&routingv1alpha1.Cluster{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.clustersOfPod)).
		Watches(&routingv1alpha1.FaultPolicy{}, handler.EnqueueRequestsFromMapFunc(r.clustersOfPolicy)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersOfSecret), builder.OnlyMetadata).
		WatchesRawSource(r.looked.source()).
		// Reconciles do not wait for name servers (the describer does); two workers keep one
		// Cluster's pod listing or status write from holding another's.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 2}).
		Complete(r)
}

// forgetUndeclared drops the runtime's routes of the Cluster's undeclared topics when its spec
// changed since this replica last saw it (generation 0: it was deleted), so that the next use
// asks with the new name servers, policy and refresh period, or is refused when the Cluster
// no longer serves undeclared topics. A Cluster seen for the first time has none to drop.
func (r *ClusterReconciler) forgetUndeclared(key types.NamespacedName, generation int64) {
	if generation == 0 {
		r.generations.Delete(key)
	} else if prev, seen := r.generations.Swap(key, generation); !seen || prev.(int64) == generation {
		return
	}
	r.Runtime.ForgetUndeclared(scope.Cluster(key.Namespace, key.Name).Prefix())
}

// maxRefusedMessage is the longest message of a refused topic: the schema's MaxLength.
const maxRefusedMessage = 512

// maxRefusedTopics is the most refused undeclared topics a Cluster's status lists: the schema's
// MaxItems.
const maxRefusedTopics = 16

// computeUndeclaredStatus fills status.undeclaredTopics of a Cluster that serves undeclared
// topics from what the runtime holds under its scope, and clears it otherwise.
func computeUndeclaredStatus(cl *routingv1alpha1.Cluster, rt *producer.Runtime) {
	if cl.Spec.UndeclaredTopics != routingv1alpha1.UndeclaredTopicsServe {
		cl.Status.UndeclaredTopics = nil
		return
	}
	brokers := scope.Cluster(cl.Namespace, cl.Name)
	use := rt.UndeclaredInUse(brokers.Prefix(), maxRefusedTopics)
	st := &routingv1alpha1.UndeclaredTopicsStatus{InUse: ptr.To(int32(use.Topics)), RefusedCount: int32(use.RefusedCount)}
	for _, f := range use.Refused {
		reason := routingv1alpha1.ReasonNameServersUnreachable
		if errors.Is(f.Err, producer.ErrTopicNotPublished) {
			reason = routingv1alpha1.ReasonTopicNotPublished
		}
		st.Refused = append(st.Refused, routingv1alpha1.RefusedTopic{Topic: brokers.UndeclaredTopic(f.Key), Reason: reason,
			Message: cutMessage(f.Err.Error(), maxRefusedMessage)})
	}
	cl.Status.UndeclaredTopics = st
}
