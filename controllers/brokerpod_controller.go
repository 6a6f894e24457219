package controllers

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// BrokerPodReconciler pushes the state of every master broker pod that a Topic or a Cluster selects
// into the runtime: its address, whether it is Ready, whether it is terminating, and when it is gone. It
// writes nothing to the API server, so it runs on every replica, leader or not.
type BrokerPodReconciler struct {
	client.Client
	Runtime *producer.Runtime
	brokers *brokerDirectory
}

var _ reconcile.Reconciler = (*BrokerPodReconciler)(nil)

// Reconcile gets the pod, decides whether it is a broker master some Topic or Cluster selects, and pushes
// that into the runtime at once.
func (r *BrokerPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var pod corev1.Pod
	if err := r.Get(ctx, req.NamespacedName, &pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.forgetPod(ctx, req.NamespacedName)
		return ctrl.Result{}, nil
	}
	b, ok := describeBrokerPod(&pod)
	if !ok || !b.Master || b.Addr == "" {
		r.forgetPod(ctx, req.NamespacedName)
		return ctrl.Result{}, nil
	}
	scopes, err := brokerScopesOf(ctx, r.Client, &pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(scopes) == 0 {
		r.forgetPod(ctx, req.NamespacedName)
		return ctrl.Result{}, nil
	}
	ids := make([]string, 0, len(scopes))
	for _, s := range scopes {
		id := s.Broker(b.Name).String()
		r.Runtime.SetBroker(producer.Broker{Name: id, Addr: b.Addr, Ready: b.Ready, Terminating: b.Terminating})
		ids = append(ids, id)
	}
	for _, id := range r.brokers.set(req.NamespacedName, ids...) {
		r.Runtime.RemoveBroker(id)
		log.Info("Broker removed from the runtime", "broker", id)
	}
	log.V(1).Info("Broker pushed to the runtime", "brokers", ids, "addr", b.Addr, "ready", b.Ready, "terminating", b.Terminating)
	return ctrl.Result{}, nil
}

// forgetPod removes the brokers a vanished or deselected pod backed, unless another pod has
// become a broker's master in the meantime.
func (r *BrokerPodReconciler) forgetPod(ctx context.Context, pod types.NamespacedName) {
	for _, broker := range r.brokers.forget(pod) {
		r.Runtime.RemoveBroker(broker)
		ctrl.LoggerFrom(ctx).Info("Broker removed from the runtime", "broker", broker)
	}
}

// brokerScopesOf returns the scopes in which a broker pod counts: its
// namespace when a Topic's broker selector there picks it, and each Cluster of its namespace whose
// selector picks it (a Cluster's pods add pod health to the brokers its name servers publish).
// None means no selector picks it.
func brokerScopesOf(ctx context.Context, c client.Reader, pod *corev1.Pod) ([]scope.Scope, error) {
	var scopes []scope.Scope
	var topics routingv1alpha1.TopicList
	if err := c.List(ctx, &topics, client.InNamespace(pod.Namespace)); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(topics.Items, func(t routingv1alpha1.Topic) bool { return selects(t.Spec.BrokerSelector, pod.Labels) }) {
		scopes = append(scopes, scope.Pods(pod.Namespace))
	}
	var clusters routingv1alpha1.ClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(pod.Namespace)); err != nil {
		return nil, err
	}
	for i := range clusters.Items {
		if selects(clusters.Items[i].Spec.BrokerSelector, pod.Labels) {
			scopes = append(scopes, scope.Cluster(pod.Namespace, clusters.Items[i].Name))
		}
	}
	return scopes, nil
}

// selects reports whether a broker selector picks an object with these labels; an unset or empty
// selector picks nothing (it would otherwise pick every pod of the namespace).
func selects(selector *metav1.LabelSelector, lbls map[string]string) bool {
	if selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(lbls))
}

// podsOfNamespace maps a Topic or Cluster to every broker pod in its namespace, so a changed
// selector re-evaluates both the pods it now selects and the ones it no longer does.
func (r *BrokerPodReconciler) podsOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing pods for a Topic failed", "topic", klog.KObj(obj))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pods.Items))
	for i := range pods.Items {
		if _, ok := describeBrokerPod(&pods.Items[i]); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
		}
	}
	return reqs
}

// SetupWithManager registers the reconciler. It does not need leadership: every replica's
// runtime must know the brokers to send.
func (r *BrokerPodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("brokerpod").
		For(&corev1.Pod{}).
		// Only a spec change (a new selector) changes which pods are brokers; status writes do not.
		Watches(&routingv1alpha1.Topic{}, handler.EnqueueRequestsFromMapFunc(r.podsOfNamespace),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&routingv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.podsOfNamespace),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 2}).
		Complete(r)
}
