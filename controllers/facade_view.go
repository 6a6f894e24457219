package controllers

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// viewTimeout bounds the cache reads behind one route answer.
const viewTimeout = 2 * time.Second

// FacadeView tells the name-server facade what detour knows about one Cluster: its name servers,
// and for each topic a Topic on that Cluster declares, the brokers its FaultPolicy isolates and
// those whose pods are not ready or are terminating, never more than the policy's isolation limit.
// It reads the manager's cache and the runtime, so every replica can serve it.
type FacadeView struct {
	// Reader is the manager's cache (its client): Topics are found through its spec.topicName
	// index, which the API server cannot select on.
	Reader  client.Reader
	Runtime *producer.Runtime
	// Cluster is the Cluster whose name servers the facade fronts; the zero value means the only
	// Cluster there is (none, or several, leave the facade without name servers).
	Cluster types.NamespacedName
}

// cluster returns the fronted Cluster.
func (v *FacadeView) cluster(ctx context.Context) (*routingv1alpha1.Cluster, bool) {
	if v.Cluster.Name != "" {
		var cl routingv1alpha1.Cluster
		if err := v.Reader.Get(ctx, v.Cluster, &cl); err != nil {
			return nil, false
		}
		return &cl, true
	}
	var list routingv1alpha1.ClusterList
	if err := v.Reader.List(ctx, &list); err != nil || len(list.Items) != 1 {
		return nil, false
	}
	return &list.Items[0], true
}

var _ facade.View = (*FacadeView)(nil)

// NameServers returns the Cluster's name servers; none while it does not exist.
func (v *FacadeView) NameServers() []string {
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	cl, ok := v.cluster(ctx)
	if !ok {
		return nil
	}
	return cl.Spec.NameServers
}

// topicOnCluster finds the fronted Cluster and the Topic on it that declares the RocketMQ topic.
func (v *FacadeView) topicOnCluster(ctx context.Context, topic string) (*routingv1alpha1.Cluster, *routingv1alpha1.Topic, bool) {
	cl, ok := v.cluster(ctx)
	if !ok {
		return nil, nil, false
	}
	t, ok := declaringTopic(ctx, v.Reader, cl, topic)
	return cl, t, ok
}

// declaringTopic finds the Topic on cl that declares the RocketMQ topic, through the front
// layer's spec.topicName index: a route answer reads the Topics declaring its topic, never the
// whole namespace. The Topic is the cache's own; it is only read.
func declaringTopic(ctx context.Context, r client.Reader, cl *routingv1alpha1.Cluster, topic string) (*routingv1alpha1.Topic, bool) {
	topics, err := front.TopicsNamed(ctx, r, cl.Namespace, topic)
	if err != nil {
		return nil, false
	}
	i := slices.IndexFunc(topics, func(t routingv1alpha1.Topic) bool {
		return t.Spec.ClusterRef != nil && t.Spec.ClusterRef.Name == cl.Name
	})
	if i < 0 {
		return nil, false
	}
	return &topics[i], true
}

// governingPolicy is the policy that governs topic on cl: the FaultPolicy of the Topic that
// declares it, else the Cluster's faultPolicyRef; ok is false when neither governs it.
func governingPolicy(ctx context.Context, r client.Reader, cl *routingv1alpha1.Cluster, topic string) (string, bool) {
	if t, ok := declaringTopic(ctx, r, cl, topic); ok {
		return topicPolicyKey(t), true
	}
	if ref := cl.Spec.FaultPolicyRef; ref != nil {
		return scope.PolicyKey(cl.Namespace, ref.Name), true
	}
	return "", false
}

// Hide returns the brokers of topic's route to publish read-only, with the reason, when a Topic
// on the Cluster declares topic or the Cluster's own policy governs every topic.
func (v *FacadeView) Hide(topic string, brokers []string) (map[string]string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	cl, ok := v.cluster(ctx)
	if !ok {
		return nil, false
	}
	policyKey, ok := governingPolicy(ctx, v.Reader, cl, topic)
	if !ok {
		return nil, false
	}
	return hiddenBrokers(ctx, v.Reader, v.Runtime, cl, policyKey, brokers), true
}

// hiddenBrokers is what the facade publishes read-only of brokers on cl under policyKey, with the
// reason: the brokers whose pods are not Ready or are terminating (when the policy respects pod
// health) and those the policy isolates, never more than its isolation limit.
func hiddenBrokers(ctx context.Context, r client.Reader, rt *producer.Runtime, cl *routingv1alpha1.Cluster, policyKey string, brokers []string) map[string]string {
	pol, _ := rt.Policy(policyKey)
	candidates := map[string]string{}
	if pol.RespectPodHealth {
		if pods, err := selectedBrokerPods(ctx, r, cl.Namespace, cl.Spec.BrokerSelector); err == nil {
			for name, p := range pods {
				switch {
				case p.Terminating:
					candidates[name] = string(routingv1alpha1.IsolationPodTerminating)
				case !p.Ready:
					candidates[name] = string(routingv1alpha1.IsolationPodNotReady)
				}
			}
		}
	}
	for _, it := range rt.Isolated(policyKey) {
		name, ours := scope.Cluster(cl.Namespace, cl.Name).Local(it.Broker)
		if _, ok := candidates[name]; ours && !ok {
			candidates[name] = string(it.Reason)
		}
	}
	return facade.CapHidden(candidates, brokers, pol.MaxIsolatedPercent)
}
