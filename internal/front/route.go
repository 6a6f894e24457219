package front

import (
	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/scope"
)

// TopicScope is the scope of the brokers a Topic routes to: its Cluster's, or its namespace's
// pods' for a Topic that selects broker pods.
func TopicScope(topic *routingv1alpha1.Topic) scope.Scope {
	if ref := topic.Spec.ClusterRef; ref != nil {
		return scope.Cluster(topic.Namespace, ref.Name)
	}
	return scope.Pods(topic.Namespace)
}

// TopicTarget is where requests to a Topic go: its RocketMQ topic, its route and its brokers'
// scope. It names no Upstream: that takes a read of the Topic's Cluster, which only the gRPC
// endpoint needs (Resolver.ResolveTopic).
func TopicTarget(topic *routingv1alpha1.Topic) Target {
	return Target{Topic: topic.Spec.TopicName, Route: scope.TopicRoute(topic.Namespace, topic.Name), Brokers: TopicScope(topic)}
}
