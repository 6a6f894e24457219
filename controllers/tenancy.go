package controllers

import (
	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
)

// Identities in the runtime are scoped to where the operator found them; front.Scope and
// front.BrokerID say how. These names keep the controllers' call sites short.

// RouteKey is the runtime's key of a Topic resource's route (front.RouteKey).
func RouteKey(namespace, name string) string { return front.RouteKey(namespace, name) }

// BrokerPrefix is what the runtime's identities of brokers found by their pods in namespace start
// with.
func BrokerPrefix(namespace string) string { return front.PodScope(namespace).Prefix() }

// ClusterBrokerPrefix is what the runtime's identities of the brokers a Cluster's name servers
// publish start with.
func ClusterBrokerPrefix(namespace, cluster string) string {
	return front.ClusterScope(namespace, cluster).Prefix()
}

// TopicBrokerPrefix is the prefix of the brokers a Topic routes to: its Cluster's, or its
// namespace's for a Topic that selects broker pods.
func TopicBrokerPrefix(topic *routingv1alpha1.Topic) string { return front.TopicScope(topic).Prefix() }

// brokerID is the runtime's identity of the broker named broker found by its pod in namespace.
func brokerID(namespace, broker string) string {
	return front.PodScope(namespace).Broker(broker).String()
}

// brokerNameIn returns the RocketMQ broker name of a runtime broker identity, and false when the
// identity does not start with prefix or belongs to a narrower scope.
func brokerNameIn(prefix, id string) (string, bool) {
	b, ok := front.ParseBrokerID(id)
	return b.Name, ok && b.Scope.Prefix() == prefix
}

// splitBrokerID returns the Cluster (empty for a broker found by its pod) and the RocketMQ broker
// name of a runtime identity in namespace; ok is false for identities of other namespaces.
func splitBrokerID(namespace, id string) (cluster, name string, ok bool) {
	b, ok := front.ParseBrokerID(id)
	return b.Scope.Cluster, b.Name, ok && b.Scope.Namespace == namespace
}
