package front

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// A topic no Topic resource declares is served by a Cluster whose spec.undeclaredTopics is
// Serve: its route is the runtime's to keep while clients use it (producer.Runtime.UseRoute),
// under the Cluster's faultPolicyRef, its brokers named in the Cluster's scope. Which Cluster a
// request means:
//   - the gateway's request names it (ResolveClusterTopic);
//   - a gRPC client's request names a namespace, or none (RocketMQ's SDKs usually send none).
//     Of the Clusters serving undeclared topics in that namespace (every namespace served when
//     none is named), the Resolver's DefaultCluster when it is one of them, else the only one;
//     with several and no default, the request is refused naming them.

// ErrBusy is returned (wrapped) when an undeclared topic's route cannot be asked for now because
// clients named more new topics than the runtime asks the name servers for a second. Doors
// answer it as too many requests: the client should try again shortly.
var ErrBusy = errors.New("too many new topics at once")

// ErrUnavailable is returned (wrapped) when an undeclared topic's Cluster's name servers did not
// answer for its route. Doors answer it as the service being unavailable.
var ErrUnavailable = errors.New("the name servers did not answer")

// RouteUser is what the Resolver needs of the runtime for undeclared topics: their routes kept
// while in use (producer.Runtime implements it).
type RouteUser interface {
	UseRoute(ctx context.Context, spec producer.NameServerRoute) error
}

// servesUndeclared reports whether a Cluster serves the topics no Topic declares.
func servesUndeclared(c *routingv1alpha1.Cluster) bool {
	return c.Spec.UndeclaredTopics == routingv1alpha1.UndeclaredTopicsServe && c.Spec.FaultPolicyRef != nil
}

// UndeclaredTarget is the Target of topic, undeclared, on Cluster c, with the route the runtime
// must keep for it.
func UndeclaredTarget(c *routingv1alpha1.Cluster, topic string) Target {
	brokers := scope.Cluster(c.Namespace, c.Name)
	refresh := producer.DefaultRouteRefresh
	if s := c.Spec.RouteRefreshSeconds; s > 0 {
		refresh = time.Duration(s) * time.Second
	}
	spec := &producer.NameServerRoute{Key: brokers.UndeclaredRoute(topic), Topic: topic,
		Brokers: brokers, NameServers: c.Spec.NameServers, Policy: scope.PolicyKey(c.Namespace, c.Spec.FaultPolicyRef.Name),
		Refresh: refresh, MetricsTopic: brokers.UndeclaredMetricsTopic()}
	return Target{Topic: topic, Route: spec.Key, Brokers: brokers, Upstream: ClusterProxy(c.Spec.Proxy), Undeclared: spec}
}

// resolveUndeclared is the Target of a topic no Topic in namespace ("" every namespace served)
// declares: on the Cluster that serves it by the rules above.
func (r *Resolver) resolveUndeclared(ctx context.Context, namespace, topic string) (Target, error) {
	var list routingv1alpha1.ClusterList
	// The cache's own objects, read and let go of: a Target keeps nothing of them that anyone
	// changes (the runtime copies the name servers it is given).
	if err := r.Reader.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return Target{}, err
	}
	var serving []*routingv1alpha1.Cluster
	for i := range list.Items {
		if servesUndeclared(&list.Items[i]) {
			serving = append(serving, &list.Items[i])
		}
	}
	switch {
	case len(serving) == 0:
		return Target{}, fmt.Errorf("%w: no Topic publishes %s, and no Cluster serves undeclared topics", ErrTopicNotFound, topic)
	case len(serving) == 1:
		return UndeclaredTarget(serving[0], topic), nil
	}
	for _, c := range serving {
		if c.Namespace == r.DefaultCluster.Namespace && c.Name == r.DefaultCluster.Name {
			return UndeclaredTarget(c, topic), nil
		}
	}
	names := make([]string, len(serving))
	for i, c := range serving {
		names[i] = client.ObjectKeyFromObject(c).String()
	}
	slices.Sort(names)
	return Target{}, fmt.Errorf("%w: no Topic publishes %s, and Clusters %s all serve undeclared topics; set the client's namespace "+
		"to the Kubernetes namespace of the one meant, or name a default Cluster (the manager's --default-cluster)",
		ErrTopicNotFound, topic, strings.Join(names, ", "))
}

// ResolveClusterTopic is the Target of a RocketMQ topic sent through the Cluster namespace/cluster:
// the Topic in namespace that declares it on that Cluster, when there is one (its own policy and
// status win), else the topic undeclared, when the Cluster serves undeclared topics. The route
// is in the runtime when it returns.
func (r *Resolver) ResolveClusterTopic(ctx context.Context, namespace, cluster, topic string) (Target, error) {
	if r.Namespace != "" && namespace != r.Namespace {
		return Target{}, fmt.Errorf("%w: namespace %s is not served here", ErrTopicNotFound, namespace)
	}
	t, err := r.recall(answerKey{byCluster: cluster, namespace: namespace, name: topic}, func() (Target, error) {
		return r.resolveClusterTopic(ctx, namespace, cluster, topic)
	})
	if err != nil {
		return Target{}, err
	}
	return t, r.use(ctx, t)
}

// resolveClusterTopic is ResolveClusterTopic's answer read from the cache.
func (r *Resolver) resolveClusterTopic(ctx context.Context, namespace, cluster, topic string) (Target, error) {
	declared, err := TopicsNamed(ctx, r.Reader, namespace, topic)
	if err != nil {
		return Target{}, err
	}
	var c routingv1alpha1.Cluster
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, &c)
	if apierrors.IsNotFound(err) {
		return Target{}, fmt.Errorf("%w: no Cluster %s/%s", ErrTopicNotFound, namespace, cluster)
	}
	if err != nil {
		return Target{}, err
	}
	for i := range declared {
		if ref := declared[i].Spec.ClusterRef; ref != nil && ref.Name == cluster {
			target := TopicTarget(&declared[i])
			target.Upstream = ClusterProxy(c.Spec.Proxy)
			return target, nil
		}
	}
	if !servesUndeclared(&c) {
		return Target{}, fmt.Errorf("%w: no Topic publishes %s on Cluster %s/%s, which serves declared topics only (spec.undeclaredTopics)",
			ErrTopicNotFound, topic, namespace, cluster)
	}
	return UndeclaredTarget(&c, topic), nil
}

// use asks the runtime for an undeclared Target's route, on every request: the runtime drops a
// route unused for minutes, and a remembered answer must not outlive it. A declared Target
// needs nothing.
func (r *Resolver) use(ctx context.Context, t Target) error {
	if t.Undeclared == nil {
		return nil
	}
	if r.Routes == nil {
		return fmt.Errorf("%w: topic %s is undeclared and undeclared topics are not served here", ErrTopicNotFound, t.Topic)
	}
	err := r.Routes.UseRoute(ctx, *t.Undeclared)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, producer.ErrTopicNotPublished):
		return fmt.Errorf("%w: the name servers of Cluster %s/%s do not publish topic %s", ErrTopicNotFound,
			t.Brokers.Namespace, t.Brokers.Cluster, t.Topic)
	case errors.Is(err, producer.ErrTooManyNewTopics):
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case ctx.Err() != nil:
		return err
	}
	return fmt.Errorf("%w: topic %s of Cluster %s/%s: %w", ErrUnavailable, t.Topic, t.Brokers.Namespace, t.Brokers.Cluster, err)
}
