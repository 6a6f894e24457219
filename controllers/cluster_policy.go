package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// clusterWatchTopic is the RocketMQ topic a Cluster's watch route names. Nothing is sent on it:
// the route only puts every broker the Cluster lists under the Cluster's policy, so the policy's
// probes watch them (GET_MAX_OFFSET of a topic a broker does not hold answers offset 0, as for
// any queue without messages).
const clusterWatchTopic = "DETOUR_CLUSTER_WATCH"

// syncClusterWatch puts every master the Cluster's name servers list under the Cluster's
// faultPolicyRef in the runtime, through a route nobody sends on, or takes that route away when
// the Cluster names no policy. The policy's table then learns the brokers' pod health and, with
// probe.routedBrokers, its probes watch them: a broker is isolated without a Topic or any traffic.
func syncClusterWatch(ctx context.Context, rt *producer.Runtime, cl *routingv1alpha1.Cluster, view producer.ClusterView) {
	key := scope.Cluster(cl.Namespace, cl.Name).WatchRoute()
	ref := cl.Spec.FaultPolicyRef
	if ref == nil {
		rt.RemoveRoute(key)
		return
	}
	route := producer.Route{Key: key, Topic: clusterWatchTopic, Policy: scope.PolicyKey(cl.Namespace, ref.Name)}
	brokers := scope.Cluster(cl.Namespace, cl.Name)
	for _, b := range view.Brokers {
		if b.MasterAddr != "" {
			route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: brokers.Broker(b.Name).String(), Addr: b.MasterAddr, WriteQueues: 1})
		}
	}
	if err := rt.SetRoute(route); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "The Cluster's brokers were not put under its policy", "cluster", client.ObjectKeyFromObject(cl))
	}
}

// markHidden sets, with a faultPolicyRef, which brokers the facade publishes read-only in the
// routes the Cluster's policy governs, and how many; without one it clears them.
func markHidden(ctx context.Context, r client.Reader, rt *producer.Runtime, cl *routingv1alpha1.Cluster) {
	st := &cl.Status
	st.HiddenBrokers = 0
	for i := range st.Brokers {
		st.Brokers[i].Hidden = ""
	}
	ref := cl.Spec.FaultPolicyRef
	if ref == nil {
		return
	}
	names := make([]string, 0, len(st.Brokers))
	for _, b := range st.Brokers {
		names = append(names, b.Name)
	}
	hidden := hiddenBrokers(ctx, r, rt, cl, scope.PolicyKey(cl.Namespace, ref.Name), names)
	for i := range st.Brokers {
		st.Brokers[i].Hidden = routingv1alpha1.IsolationReason(hidden[st.Brokers[i].Name])
	}
	st.HiddenBrokers = int32(len(hidden))
}

// clustersOfPolicy maps a FaultPolicy (whose status changes with its isolations) to the Clusters
// in its namespace that name it, so their hidden brokers follow.
func (r *ClusterReconciler) clustersOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.clustersWhere(ctx, obj.GetNamespace(), nil, client.MatchingFields{faultPolicyRefField: obj.GetName()})
}
