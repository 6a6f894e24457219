package operator

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/controllers"
	"github.com/detourmq/detour/internal/grpcfront"
)

// grpcOptions configure the RocketMQ 5 gRPC endpoint.
type grpcOptions struct {
	addr           string
	secure         bool
	certDir        string
	allowPlaintext bool
	advertise      string
}

// register adds the endpoint's flags.
func (g *grpcOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "grpc-bind-address", ":8082",
		"The address RocketMQ 5's gRPC protocol is served on, for the 5.x SDKs' producers (in the Proxy's seat); 0 disables it.")
	fs.BoolVar(&g.secure, "grpc-secure", true,
		"Serve the gRPC endpoint over TLS (the SDKs' default), with tls.crt and tls.key from --grpc-cert-dir or a self-signed certificate.")
	fs.StringVar(&g.certDir, "grpc-cert-dir", "",
		"A directory with tls.crt and tls.key for the gRPC endpoint, reloaded when they change; empty means --gateway-cert-dir.")
	fs.BoolVar(&g.allowPlaintext, "grpc-allow-plaintext", false,
		"Also serve gRPC clients without TLS on the same port (SDKs with TLS turned off).")
	fs.StringVar(&g.advertise, "grpc-advertise-address", "",
		"host:port routes name as every broker's endpoint; empty echoes the access point each client queried with, as RocketMQ's Proxy does.")
}

// addGRPCFront adds the gRPC endpoint to the manager when it is enabled.
func (op *Operator) addGRPCFront(o *Options, tlsOpts []func(*tls.Config)) error {
	g := o.grpc
	if g.addr == "0" {
		return nil
	}
	opts := grpcfront.Options{
		Addr: g.addr, Runtime: op.rt, Topics: grpcfront.TopicResolverFunc(op.resolveRocketMQTopic),
		AllowPlaintext: g.allowPlaintext, Advertise: g.advertise, ShutdownTimeout: o.shutdownTimeout,
		Metrics: processMetrics().GRPC, Logger: op.log.WithName("grpc"),
	}
	if g.secure {
		dir := g.certDir
		if dir == "" {
			dir = o.gatewayCertDir
		}
		cfg, err := op.gatewayTLS(dir, tlsOpts)
		if err != nil {
			return err
		}
		opts.TLS = cfg
	}
	srv, err := grpcfront.New(opts)
	if err != nil {
		return err
	}
	if err := op.mgr.Add(srv); err != nil {
		_ = srv.Close()
		return err
	}
	op.grpc = srv
	return nil
}

// resolveRocketMQTopic finds the Topic that publishes a client's RocketMQ topic. A client's
// resource namespace, when set, is the Kubernetes namespace of the Topic; without one the topic
// must be published by one Topic only, as the client cannot say which it means.
func (op *Operator) resolveRocketMQTopic(ctx context.Context, namespace, topic string) (grpcfront.Target, error) {
	if op.namespace != "" && namespace != "" && namespace != op.namespace {
		return grpcfront.Target{}, fmt.Errorf("%w: namespace %s is not served here", grpcfront.ErrTopicNotFound, namespace)
	}
	if namespace == "" {
		namespace = op.namespace
	}
	var list routingv1alpha1.TopicList
	if err := op.mgr.GetClient().List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return grpcfront.Target{}, err
	}
	var found []*routingv1alpha1.Topic
	for i := range list.Items {
		if list.Items[i].Spec.TopicName == topic {
			found = append(found, &list.Items[i])
		}
	}
	switch len(found) {
	case 0:
		return grpcfront.Target{}, fmt.Errorf("%w: no Topic publishes %s", grpcfront.ErrTopicNotFound, topic)
	case 1:
		t := found[0]
		return grpcfront.Target{Topic: t.Spec.TopicName, Route: controllers.RouteKey(t.Namespace, t.Name),
			BrokerPrefix: controllers.TopicBrokerPrefix(t)}, nil
	}
	names := make([]string, len(found))
	for i, t := range found {
		names[i] = t.Namespace + "/" + t.Name
	}
	sort.Strings(names)
	return grpcfront.Target{}, fmt.Errorf("%w: Topics %s all publish %s; set the client's namespace to the Kubernetes namespace of the one meant",
		grpcfront.ErrTopicNotFound, strings.Join(names, ", "), topic)
}
