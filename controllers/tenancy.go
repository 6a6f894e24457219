package controllers

import (
	"strings"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// Identities in the runtime are scoped to where the operator found them, so that one namespace
// can never steer another's traffic, nor one Cluster another's: two Topics named alike in two
// namespaces keep routes of their own, a broker found by its pod is namespace/brokerName, and a
// broker a Cluster's name servers publish is namespace/cluster/brokerName (RocketMQ clusters
// commonly all name their brokers broker-a, broker-b, ...). Names contain no "/", so the scopes
// never overlap.

// RouteKey is the runtime's key of a Topic resource's route.
func RouteKey(namespace, name string) string { return namespace + "/" + name }

// BrokerPrefix is what the runtime's identities of brokers found by their pods in namespace start
// with.
func BrokerPrefix(namespace string) string { return namespace + "/" }

// ClusterBrokerPrefix is what the runtime's identities of the brokers a Cluster's name servers
// publish start with.
func ClusterBrokerPrefix(namespace, cluster string) string { return namespace + "/" + cluster + "/" }

// TopicBrokerPrefix is the prefix of the brokers a Topic routes to: its Cluster's, or its
// namespace's for a Topic that selects broker pods.
func TopicBrokerPrefix(topic *routingv1alpha1.Topic) string {
	if ref := topic.Spec.ClusterRef; ref != nil {
		return ClusterBrokerPrefix(topic.Namespace, ref.Name)
	}
	return BrokerPrefix(topic.Namespace)
}

// brokerID is the runtime's identity of the broker named broker found by its pod in namespace.
func brokerID(namespace, broker string) string { return BrokerPrefix(namespace) + broker }

// brokerNameIn returns the RocketMQ broker name of a runtime broker identity, and false when the
// identity does not start with prefix or belongs to a narrower scope.
func brokerNameIn(prefix, id string) (string, bool) {
	name, ok := strings.CutPrefix(id, prefix)
	return name, ok && !strings.Contains(name, "/")
}

// splitBrokerID returns the Cluster (empty for a broker found by its pod) and the RocketMQ broker
// name of a runtime identity in namespace; ok is false for identities of other namespaces.
func splitBrokerID(namespace, id string) (cluster, name string, ok bool) {
	rest, ok := strings.CutPrefix(id, BrokerPrefix(namespace))
	if !ok {
		return "", "", false
	}
	if c, n, scoped := strings.Cut(rest, "/"); scoped {
		return c, n, !strings.Contains(n, "/")
	}
	return "", rest, true
}
