package controllers

import "strings"

// Identities in the runtime are scoped to the namespace the operator found them in, so that one
// namespace can never steer another's traffic: two Topics named alike in two namespaces keep
// routes of their own, and a Pod claiming the broker name of another namespace's broker is a
// different broker to the runtime.

// RouteKey is the runtime's key of a Topic resource's route.
func RouteKey(namespace, name string) string { return namespace + "/" + name }

// brokerID is the runtime's identity of the broker named broker found in namespace (by its pod
// or by a Cluster's name servers).
func brokerID(namespace, broker string) string { return BrokerPrefix(namespace) + broker }

// BrokerPrefix is what the runtime's identities of brokers found in namespace start with: the
// runtime names a broker namespace/brokerName.
func BrokerPrefix(namespace string) string { return namespace + "/" }

// brokerNameIn returns the RocketMQ broker name of a runtime broker identity, and false when the
// identity is not of namespace.
func brokerNameIn(namespace, id string) (string, bool) {
	return strings.CutPrefix(id, BrokerPrefix(namespace))
}
