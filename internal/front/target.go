package front

import (
	"context"
	"errors"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// ErrTopicNotFound is returned (or wrapped) by a resolver for a topic that no served Topic
// declares, or that more than one does when the request cannot say which it means. Doors answer
// it as their protocol answers an unknown topic (404, TOPIC_NOT_FOUND), never as an outage.
var ErrTopicNotFound = errors.New("topic not found")

// Target is where a door's request goes: the RocketMQ topic a Topic resource declares, the
// runtime's route of exactly that resource, the scope its brokers are named in, and the RocketMQ
// Proxy that consumers' calls on it are forwarded to.
type Target struct {
	// Topic is the RocketMQ topic (spec.topicName).
	Topic string
	// Route is the runtime's route key; "" means Topic (a runtime run without the operator keys
	// routes by topic).
	Route string
	// Brokers is the scope the runtime names the route's brokers in; doors answer with the
	// brokers' RocketMQ names (Brokers.Name), as RocketMQ does.
	Brokers scope.Scope
	// Upstream, when set, is the RocketMQ Proxy that consumers' calls on the topic are forwarded
	// to; nil when the Topic's Cluster declares none (or the door forwards nothing).
	Upstream *Upstream
	// Undeclared, set when no Topic declares the topic and a Cluster serves it, is the route the
	// runtime keeps for it while it is used; the Resolver asks for it on every request.
	Undeclared *producer.NameServerRoute
}

// RouteKey is the key of the runtime's route the Target sends by.
func (t Target) RouteKey() string {
	if t.Route == "" {
		return t.Topic
	}
	return t.Route
}

// Upstream is a RocketMQ Proxy that consumers' calls are forwarded to.
type Upstream struct {
	// Addr is the Proxy's gRPC address, host:port.
	Addr string
	// TLS, when set, makes the connection TLS; nil means plaintext (the Proxy serves both on its
	// one port).
	TLS *UpstreamTLS
}

// UpstreamTLS is how the Proxy's certificate is checked.
type UpstreamTLS struct {
	// CA is the PEM bundle the Proxy's certificate must chain to; empty means the system's roots.
	CA []byte
	// ServerName is the name the certificate must carry; empty means the host of Addr.
	ServerName string
	// InsecureSkipVerify accepts any certificate: the Proxy's own is self-signed by default
	// (tlsTestModeEnable), so without a CA for it this is the only way to speak TLS to it. The
	// connection is then encrypted but the Proxy is not authenticated.
	InsecureSkipVerify bool
}

// NameResolver answers the HTTP gateway's request, which names a Topic resource by its
// Kubernetes namespace and name.
type NameResolver interface {
	ResolveName(ctx context.Context, namespace, name string) (Target, error)
}

// NameResolverFunc adapts a function to NameResolver.
type NameResolverFunc func(ctx context.Context, namespace, name string) (Target, error)

// ResolveName implements NameResolver.
func (f NameResolverFunc) ResolveName(ctx context.Context, namespace, name string) (Target, error) {
	return f(ctx, namespace, name)
}

// TopicResolver answers the gRPC endpoint's request, which names a RocketMQ topic and, in the
// resource namespace, the Kubernetes namespace of the Topic meant ("" when the client sets none).
type TopicResolver interface {
	ResolveTopic(ctx context.Context, namespace, topic string) (Target, error)
}

// TopicResolverFunc adapts a function to TopicResolver.
type TopicResolverFunc func(ctx context.Context, namespace, topic string) (Target, error)

// ResolveTopic implements TopicResolver.
func (f TopicResolverFunc) ResolveTopic(ctx context.Context, namespace, topic string) (Target, error) {
	return f(ctx, namespace, topic)
}
