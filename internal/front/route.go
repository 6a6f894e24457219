package front

import routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"

// RouteKey is the runtime's key of the route of the Topic resource namespace/name: exactly that
// resource's, so another namespace's Topic of the same topicName keeps a route of its own. It is
// a key in the runtime and in status, so its form never changes.
func RouteKey(namespace, name string) string { return namespace + "/" + name }

// TopicScope is the scope of the brokers a Topic routes to: its Cluster's, or its namespace's
// pods' for a Topic that selects broker pods.
func TopicScope(topic *routingv1alpha1.Topic) Scope {
	if ref := topic.Spec.ClusterRef; ref != nil {
		return ClusterScope(topic.Namespace, ref.Name)
	}
	return PodScope(topic.Namespace)
}

// TopicTarget is where requests to a Topic go: its RocketMQ topic, its route and its brokers'
// scope. It names no Upstream: that takes a read of the Topic's Cluster, which only the gRPC
// endpoint needs (Resolver.ResolveTopic).
func TopicTarget(topic *routingv1alpha1.Topic) Target {
	return Target{Topic: topic.Spec.TopicName, Route: RouteKey(topic.Namespace, topic.Name), Brokers: TopicScope(topic)}
}
