package front

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// TopicNameField indexes Topics by the RocketMQ topic they declare (spec.topicName), so that a
// request naming a RocketMQ topic reads the Topics declaring it and no other. The API server
// cannot select on it: a lookup by it must read the manager's cache, which the manager's field
// indexer registers it with (TopicNameValues is the index function).
const TopicNameField = "spec.topicName"

// TopicNameValues is TopicNameField's index function: the topic a Topic declares.
func TopicNameValues(o client.Object) []string {
	t, ok := o.(*routingv1alpha1.Topic)
	if !ok || t.Spec.TopicName == "" {
		return nil
	}
	return []string{t.Spec.TopicName}
}

// TopicsNamed returns the Topics of namespace ("" means every namespace the cache holds) that
// declare the RocketMQ topic, sorted by namespace and name. r must be a cache indexed by
// TopicNameField; the Topics are the cache's own, not copies, so the caller must not change them.
func TopicsNamed(ctx context.Context, r client.Reader, namespace, topic string) ([]routingv1alpha1.Topic, error) {
	var list routingv1alpha1.TopicList
	// The cache's index keeps an all-namespaces key beside each namespaced one, so a request
	// naming no namespace is one index read too, never a list of every Topic. No deep copy: a
	// request reads the Topic and lets go of it, and copying is most of a lookup's cost.
	err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{TopicNameField: topic},
		client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	if len(list.Items) > 1 {
		slices.SortFunc(list.Items, func(a, b routingv1alpha1.Topic) int {
			return strings.Compare(client.ObjectKeyFromObject(&a).String(), client.ObjectKeyFromObject(&b).String())
		})
	}
	return list.Items, nil
}

// Resolver is the doors' one resolver: it reads Topics and Clusters from the manager's cache and
// answers every door's request with a Target.
type Resolver struct {
	// Reader is the manager's cache (its client), indexed by TopicNameField.
	Reader client.Reader
	// Namespace, when set, is the only namespace served (the manager's --namespace): its cache
	// holds no other, so another namespace's request is not found rather than an error.
	Namespace string
	// Routes, when set, keeps the routes of undeclared topics (the runtime); without it a topic
	// no Topic declares is not found, whatever its Cluster says.
	Routes RouteUser
	// DefaultCluster, when set, is the Cluster that serves an undeclared topic a client names in
	// no namespace (or in the Cluster's) when several Clusters serve undeclared topics.
	DefaultCluster client.ObjectKey
	// answers, once Remember set them, are the answers given until a Topic or Cluster changed.
	answers atomic.Pointer[answers]
}

var (
	_ NameResolver  = (*Resolver)(nil)
	_ TopicResolver = (*Resolver)(nil)
)

// ResolveName is the Target of the Topic resource namespace/name, by a Get from the cache. The
// Target carries no Upstream: the gateway, which asks this, forwards nothing.
func (r *Resolver) ResolveName(ctx context.Context, namespace, name string) (Target, error) {
	if r.Namespace != "" && namespace != r.Namespace {
		return Target{}, fmt.Errorf("%w: namespace %s is not served here", ErrTopicNotFound, namespace)
	}
	return r.recall(answerKey{namespace: namespace, name: name}, func() (Target, error) { return r.resolveName(ctx, namespace, name) })
}

// resolveName is ResolveName's answer read from the cache.
func (r *Resolver) resolveName(ctx context.Context, namespace, name string) (Target, error) {
	var t routingv1alpha1.Topic
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &t)
	if apierrors.IsNotFound(err) {
		return Target{}, fmt.Errorf("%w: no Topic %s/%s", ErrTopicNotFound, namespace, name)
	}
	if err != nil {
		return Target{}, err
	}
	return TopicTarget(&t), nil
}

// ResolveTopic is the Target of the Topic that declares the RocketMQ topic in namespace, with
// the Proxy of its Cluster. A client naming no namespace means any namespace served; then the
// topic must be declared by one Topic only, as the client cannot say which it means. A topic no
// Topic declares is served by a Cluster that serves undeclared topics (see undeclared.go), its
// route in the runtime when this returns.
func (r *Resolver) ResolveTopic(ctx context.Context, namespace, topic string) (Target, error) {
	if r.Namespace != "" && namespace != "" && namespace != r.Namespace {
		return Target{}, fmt.Errorf("%w: namespace %s is not served here", ErrTopicNotFound, namespace)
	}
	if namespace == "" {
		namespace = r.Namespace
	}
	t, err := r.recall(answerKey{byTopic: true, namespace: namespace, name: topic}, func() (Target, error) {
		return r.resolveTopic(ctx, namespace, topic)
	})
	if err != nil {
		return Target{}, err
	}
	return t, r.use(ctx, t)
}

// resolveTopic is ResolveTopic's answer read from the cache.
func (r *Resolver) resolveTopic(ctx context.Context, namespace, topic string) (Target, error) {
	found, err := TopicsNamed(ctx, r.Reader, namespace, topic)
	if err != nil {
		return Target{}, err
	}
	switch len(found) {
	case 0:
		return r.resolveUndeclared(ctx, namespace, topic)
	case 1:
		t := &found[0]
		up, err := r.proxyOf(ctx, t)
		if err != nil {
			return Target{}, err
		}
		target := TopicTarget(t)
		target.Upstream = up
		return target, nil
	}
	names := make([]string, len(found))
	for i := range found {
		names[i] = client.ObjectKeyFromObject(&found[i]).String()
	}
	return Target{}, fmt.Errorf("%w: Topics %s all publish %s; set the client's namespace to the Kubernetes namespace of the one meant",
		ErrTopicNotFound, strings.Join(names, ", "), topic)
}

// proxyOf is the RocketMQ Proxy of a Topic's Cluster (spec.proxy), nil when the Topic has no
// Cluster, its Cluster does not exist (yet), or declares no Proxy.
func (r *Resolver) proxyOf(ctx context.Context, t *routingv1alpha1.Topic) (*Upstream, error) {
	if t.Spec.ClusterRef == nil {
		return nil, nil
	}
	var c routingv1alpha1.Cluster
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Spec.ClusterRef.Name}, &c)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ClusterProxy(c.Spec.Proxy), nil
}

// ClusterProxy is the Upstream a Cluster's spec.proxy declares; nil for none.
func ClusterProxy(p *routingv1alpha1.ClusterProxy) *Upstream {
	if p == nil {
		return nil
	}
	up := &Upstream{Addr: p.Address}
	if p.TLS != nil {
		up.TLS = &UpstreamTLS{CA: p.TLS.CABundle, ServerName: p.TLS.ServerName,
			InsecureSkipVerify: p.TLS.InsecureSkipVerify != nil && *p.TLS.InsecureSkipVerify}
	}
	return up
}
