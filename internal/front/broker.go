package front

import "strings"

// Identities in the runtime are scoped to where the operator found them, so that one namespace
// can never steer another's traffic, nor one Cluster another's: two Topics named alike in two
// namespaces keep routes of their own, a broker found by its pod is namespace/brokerName, and a
// broker a Cluster's name servers publish is namespace/cluster/brokerName (RocketMQ clusters
// commonly all name their brokers broker-a, broker-b, ...). Kubernetes names contain no "/", so
// the scopes never overlap, and a RocketMQ broker name is what follows the last "/".

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

// PodScope is the scope of the brokers found by their pods in namespace.
func PodScope(namespace string) Scope { return Scope{Namespace: namespace} }

// ClusterScope is the scope of the brokers the name servers of the Cluster named cluster in
// namespace publish.
func ClusterScope(namespace, cluster string) Scope {
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
		return s.Namespace + "/"
	}
	return s.Namespace + "/" + s.Cluster + "/"
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
	first, rest, scoped := strings.Cut(id, "/")
	if !scoped {
		return BrokerID{Name: id}, id != ""
	}
	second, name, clustered := strings.Cut(rest, "/")
	if !clustered {
		return BrokerID{Scope: PodScope(first), Name: rest}, first != "" && rest != ""
	}
	ok := first != "" && second != "" && name != "" && !strings.Contains(name, "/")
	return BrokerID{Scope: ClusterScope(first, second), Name: name}, ok
}
