package operator

import (
	"crypto/tls"
	"flag"
	"fmt"

	"github.com/detourmq/detour/internal/grpcfront"
)

// grpcOptions configure the RocketMQ 5 gRPC endpoint.
type grpcOptions struct {
	addr           string
	secure         bool
	certDir        string
	allowPlaintext bool
	advertise      string
	accessKeys     string // namespace/name of the access keys Secret; "" checks no signatures
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
	fs.StringVar(&g.accessKeys, "grpc-access-keys-secret", "",
		"namespace/name of a Secret of access keys every gRPC call must be signed with (as the SDKs' credentials providers sign): "+
			"data key <accessKey> holds its secret, <accessKey>.topics the comma-separated topics it may send to, or * for all. Empty serves unsigned calls.")
}

// validate refuses an access keys Secret the manager cannot watch: outside --namespace, its cache
// holds no Secret.
func (g *grpcOptions) validate(namespace string) error {
	if g.accessKeys == "" {
		return nil
	}
	ref, err := parseSecretRef(g.accessKeys)
	if err != nil {
		return fmt.Errorf("--grpc-access-keys-secret %w, got %q", err, g.accessKeys)
	}
	if namespace != "" && ref.Namespace != namespace {
		return fmt.Errorf("--grpc-access-keys-secret %s is outside --namespace %s, which is all the manager watches", g.accessKeys, namespace)
	}
	return nil
}

// addGRPCFront adds the gRPC endpoint to the manager when it is enabled.
func (op *Operator) addGRPCFront(o *Options, tlsOpts []func(*tls.Config)) error {
	g := o.grpc
	if g.addr == "0" {
		return nil
	}
	opts := grpcfront.Options{
		Addr: g.addr, Runtime: op.rt, Topics: op.resolver,
		AllowPlaintext: g.allowPlaintext, Advertise: g.advertise, ShutdownTimeout: o.shutdownTimeout,
		Metrics: processMetrics().GRPC, Logger: op.log.WithName("grpc"),
		UpstreamHint: "declare the RocketMQ Proxy in spec.proxy of the Topic's Cluster",
	}
	if g.accessKeys != "" {
		ref, err := parseSecretRef(g.accessKeys)
		if err != nil {
			return err
		}
		opts.Credentials = &secretAccessKeys{key: ref, meta: op.mgr.GetClient(), api: op.mgr.GetAPIReader(), log: op.log.WithName("grpc")}
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
