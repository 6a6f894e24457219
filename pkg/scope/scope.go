// Package scope is the one home of the runtime's identities and the form they are written in:
// where a broker was found (Scope), a broker's identity within it (BrokerID), and the keys of
// routes and fault policies. Identities in the runtime are scoped to where the operator found
// them, so that one namespace can never steer another's traffic, nor one Cluster another's: two
// Topics named alike in two namespaces keep routes of their own, a broker found by its pod is
// namespace/brokerName, and a broker a Cluster's name servers publish is
// namespace/cluster/brokerName (RocketMQ clusters commonly all name their brokers broker-a,
// broker-b, ...). Kubernetes names contain no "/", so the scopes never overlap, and a RocketMQ
// broker name is what follows the last "/".
//
// These strings are keys in the runtime and in the resources' status, written by every release
// so far, so their form never changes. Nothing else in the product builds or cuts them by hand:
// hack/docgen's identity check fails `make verify` on a "/" glued or cut outside this package.
package scope

import "strings"

// sep separates the parts of every identity.
const sep = "/"

// Scope is where the operator found a broker: the pods of a namespace (Cluster empty), or the
// name servers of a Cluster in a namespace. The zero Scope is no scope at all: the runtime's
// identity of such a broker is its RocketMQ name, as when the runtime runs without the operator.
type Scope struct {
	// Namespace is the Kubernetes namespace the broker was found in.
	Namespace string
	// Cluster is the Cluster whose name servers publish the broker; empty for a broker found by
	// its pod.
	Cluster string
}

// Pods is the scope of the brokers found by their pods in namespace.
func Pods(namespace string) Scope { return Scope{Namespace: namespace} }

// Cluster is the scope of the brokers the name servers of the Cluster named cluster in namespace
// publish.
func Cluster(namespace, cluster string) Scope {
	return Scope{Namespace: namespace, Cluster: cluster}
}

// Prefix is what the runtime's identities of the scope's brokers start with: "namespace/",
// "namespace/cluster/", or nothing for the zero Scope. It is a key in the runtime and in status,
// so its form never changes.
func (s Scope) Prefix() string {
	switch {
	case s.Namespace == "":
		return ""
	case s.Cluster == "":
		return s.Namespace + sep
	}
	return s.Namespace + sep + s.Cluster + sep
}

// Broker is the identity of the broker named name in the scope.
func (s Scope) Broker(name string) BrokerID { return BrokerID{Scope: s, Name: name} }

// Local returns the RocketMQ name of the runtime broker identity id, and false when id is not a
// broker of exactly this scope: of another scope, or of a narrower one (a Cluster's broker is
// not one of its namespace's pods).
func (s Scope) Local(id string) (string, bool) {
	b, ok := ParseBrokerID(id)
	return b.Name, ok && b.Scope == s
}

// Name is what a client is told a broker of the scope is called: the RocketMQ name of id, as
// RocketMQ names it; an id of another scope is returned whole rather than half stripped.
func (s Scope) Name(id string) string {
	if name, ok := s.Local(id); ok {
		return name
	}
	return id
}

// Names is Name of every id, in a new slice; ids itself when the scope is zero, as then there is
// nothing to strip.
func (s Scope) Names(ids []string) []string {
	if s.Namespace == "" {
		return ids
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = s.Name(id)
	}
	return out
}

// UndeclaredRoute is the runtime's key of the route of topic, undeclared (no Topic resource
// declares it), served by the Cluster of the scope: the scope's Prefix, then the topic. A
// Cluster's scope has one "/" part more than any TopicRoute, so the two never meet.
func (s Scope) UndeclaredRoute(topic string) string { return s.Prefix() + topic }

// WatchRoute is the runtime's key of the watch route of the scope's Cluster: the route, sent on
// by nobody, that puts every master its name servers list under its faultPolicyRef. No Topic's
// key (namespace/name of a DNS name) has a colon, so the two never meet.
func (s Scope) WatchRoute() string { return s.Namespace + sep + "cluster:" + s.Cluster }

// UndeclaredTopic reverses UndeclaredRoute: the topic of the key of one of the scope's undeclared
// routes; a key of another scope is returned whole.
func (s Scope) UndeclaredTopic(key string) string { return strings.TrimPrefix(key, s.Prefix()) }

// UndeclaredMetricsTopic is the topic label the sends to the undeclared topics of the scope's
// Cluster are counted under: one per Cluster, so that clients naming topics grow no series.
func (s Scope) UndeclaredMetricsTopic() string { return s.Prefix() + "*" }

// MetricsCluster is the cluster label the doors count the scope's sends under: namespace/name of
// its Cluster, or the namespace alone for the brokers a namespace's pods are. Prometheus keeps the
// namespace label for the scraped pod's own, so the scope's namespace travels inside this one.
func (s Scope) MetricsCluster() string { return strings.TrimSuffix(s.Prefix(), sep) }

// BrokerID is the runtime's identity of a broker: its RocketMQ name within the scope it was found
// in.
type BrokerID struct {
	// Scope is where the broker was found.
	Scope Scope
	// Name is the broker's RocketMQ name (brokerName in its broker.conf).
	Name string
}

// String is the identity as the runtime keys it and status records it: the scope's Prefix then
// the name.
func (b BrokerID) String() string { return b.Scope.Prefix() + b.Name }

// ParseBrokerID reads a runtime broker identity: "name", "namespace/name" or
// "namespace/cluster/name". It is false for anything else (an empty part, or more than three).
func ParseBrokerID(id string) (BrokerID, bool) {
	first, rest, scoped := strings.Cut(id, sep)
	if !scoped {
		return BrokerID{Name: id}, id != ""
	}
	second, name, clustered := strings.Cut(rest, sep)
	if !clustered {
		return BrokerID{Scope: Pods(first), Name: rest}, first != "" && rest != ""
	}
	ok := first != "" && second != "" && name != "" && !strings.Contains(name, sep)
	return BrokerID{Scope: Cluster(first, second), Name: name}, ok
}

// SplitBrokerID cuts any runtime broker identity, well formed or not, at its last "/": prefix
// is the identity up to and including it (the Prefix of the broker's scope, "" for an unscoped
// broker) and name what follows (the RocketMQ name). Unlike ParseBrokerID it never refuses: the
// runtime keys credentials by the prefix of whatever identities it was given.
func SplitBrokerID(id string) (prefix, name string) {
	i := strings.LastIndex(id, sep) + 1
	return id[:i], id[i:]
}

// TopicRoute is the runtime's key of the route of the Topic resource namespace/name: exactly
// that resource's, so another namespace's Topic of the same topicName keeps a route of its own.
// It is a key in the runtime and in status, so its form never changes.
func TopicRoute(namespace, name string) string { return namespace + sep + name }

// PolicyKey is the runtime's name of the FaultPolicy namespace/name. FaultPolicies are
// namespaced, the runtime's policies are not.
func PolicyKey(namespace, name string) string { return namespace + sep + name }

// ParsePolicyKey reverses PolicyKey; ok is false for the runtime's default policy ("") and for
// any key PolicyKey does not write.
func ParsePolicyKey(key string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(key, sep)
	return namespace, name, ok && namespace != "" && name != ""
}
