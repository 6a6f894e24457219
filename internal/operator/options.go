package operator

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/routecache"
)

// Options are the operator's flags, as BindFlags registers them.
type Options struct {
	metricsAddr             string
	secureMetrics           bool
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	namespace               string
	shareIsolations         bool
	replicaName             string
	brokerPodSelector       labels.Selector
	gatewayAddr             string
	gatewayAuth             bool
	authOpts                kubeauth.Options
	gatewaySecure           bool
	gatewayCertDir          string
	grpc                    grpcOptions
	facadeAddr              string
	facadeCluster           string
	clusterFacadeHost       string
	facadeServiceSelector   map[string]string
	facadePerSource         int
	facadeIdleTimeout       time.Duration
	enableHTTP2             bool
	shutdownTimeout         time.Duration
	shutdownDelay           time.Duration
	producerGroup           string
	defaultCluster          string
	undeclared              producer.UndeclaredTopicOptions
	zap                     zap.Options
}

// BindFlags registers the operator's flags on fs, the zap logging flags among them, in the
// kubebuilder style; o takes their defaults now and their values when fs is parsed.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, allowing only callers whose token may get the /metrics path (TokenReview and SubjectAccessReview).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "The address the /healthz and /readyz endpoints bind to; 0 disables them.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0",
		"The address Go's profiling endpoints (/debug/pprof/) bind to, plain HTTP and unauthenticated: bind it to loopback; 0 disables them.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Enable leader election: one replica at a time writes status; every replica keeps its runtime current and serves the gateway.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "detour-manager.routing.detour.dev", "The name of the leader election Lease.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"The namespace of the leader election Lease; defaults to the pod's namespace in a cluster, else to --namespace.")
	fs.BoolVar(&o.shareIsolations, "share-isolations", true,
		"With --leader-elect: replicas share what they learn through ReplicaViews in the Lease's namespace, so a broker one replica isolates is avoided by all.")
	fs.StringVar(&o.replicaName, "replica-name", "",
		"The name of this replica's ReplicaView; empty means the host name (the pod's name). It must differ between replicas.")
	fs.StringVar(&o.namespace, "namespace", "", "Watch only this namespace (Topics, FaultPolicies, broker Pods); empty watches all.")
	fs.Func("broker-pod-selector", "A label selector (e.g. app.kubernetes.io/component=broker) for the Pods the manager watches: "+
		"every Topic's and Cluster's brokerSelector sees only pods within it. Empty watches every pod, each held in a slim form.",
		func(v string) error {
			sel, err := labels.Parse(v)
			if err != nil {
				return fmt.Errorf("not a label selector: %w", err)
			}
			if !sel.Empty() {
				o.brokerPodSelector = sel
			}
			return nil
		})
	fs.StringVar(&o.gatewayAddr, "gateway-bind-address", ":8080", "The address the send gateway binds to; 0 disables it.")
	fs.BoolVar(&o.gatewayAuth, "gateway-auth", true,
		"Require a bearer token allowed to create topics/messages on the Topic (TokenReview and SubjectAccessReview). Turn off only for local use.")
	fs.DurationVar(&o.authOpts.TokenTTL, "gateway-auth-token-ttl", kubeauth.DefaultTokenTTL,
		"How long an accepted bearer token is remembered (kube-apiserver's --authentication-token-webhook-cache-ttl default).")
	fs.DurationVar(&o.authOpts.RejectedTokenTTL, "gateway-auth-rejected-token-ttl", kubeauth.DefaultRejectedTokenTTL,
		"How long a bearer token the API server rejected is remembered as rejected.")
	fs.DurationVar(&o.authOpts.AllowedTTL, "gateway-auth-allowed-ttl", kubeauth.DefaultAllowedTTL,
		"How long a granted SubjectAccessReview is remembered: a revoked RoleBinding stops sends within this (kube-apiserver's --authorization-webhook-cache-authorized-ttl default).")
	fs.DurationVar(&o.authOpts.DeniedTTL, "gateway-auth-denied-ttl", kubeauth.DefaultDeniedTTL,
		"How long a refused SubjectAccessReview is remembered: a new RoleBinding takes effect within this (kube-apiserver's --authorization-webhook-cache-unauthorized-ttl default).")
	fs.Float64Var(&o.authOpts.ClientReviewsPerSecond, "gateway-auth-reviews-per-client", kubeauth.DefaultClientReviewsPerSecond,
		"TokenReviews and SubjectAccessReviews one client address may cause per second (bursts of twice as many); beyond, 429.")
	fs.BoolVar(&o.gatewaySecure, "gateway-secure", true,
		"Serve the send gateway over HTTPS, with tls.crt and tls.key from --gateway-cert-dir or a self-signed certificate.")
	fs.StringVar(&o.gatewayCertDir, "gateway-cert-dir", "", "A directory with tls.crt and tls.key for the send gateway; reloaded when they change.")
	o.grpc.register(fs)
	fs.StringVar(&o.facadeAddr, "namesrv-facade-bind-address", "0",
		"The address RocketMQ's name-server protocol is served on, in front of a Cluster's name servers, so unmodified clients avoid the brokers detour would avoid; 0 disables it.")
	fs.StringVar(&o.facadeCluster, "namesrv-facade-cluster", "",
		"The Cluster (namespace/name) the name-server facade fronts; empty means the only Cluster there is.")
	fs.StringVar(&o.clusterFacadeHost, "cluster-facade-bind-host", "",
		"The host the name-server facades of Clusters that ask for one (spec.facade.port) listen on; empty means every interface.")
	fs.Func("cluster-facade-service-selector", "Labels of the manager's pods (e.g. control-plane=controller-manager): the leader then keeps a Service "+
		"per Cluster facade in the manager's namespace, selecting them. Empty keeps none.",
		func(v string) error {
			m, err := labels.ConvertSelectorToLabelsMap(v)
			if err != nil {
				return fmt.Errorf("not a list of labels: %w", err)
			}
			o.facadeServiceSelector = m
			return nil
		})
	fs.IntVar(&o.facadePerSource, "namesrv-facade-max-conns-per-source", 0,
		"Connections one IP address may hold to the name-server facade; 0 means a sixteenth of its 1024 (64), negative no share (clients behind one NAT address).")
	fs.DurationVar(&o.facadeIdleTimeout, "namesrv-facade-idle-timeout", facade.DefaultIdleTimeout,
		"How long a name-server facade connection may stay silent between requests (RocketMQ clients poll routes every 30 s).")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the HTTPS endpoints (off by default as a mitigation for HTTP/2 stream floods).")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 25*time.Second,
		"How long shutdown waits for gateway sends in flight and for the controllers to stop.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", 0,
		"On SIGTERM, report not ready but keep serving this long before draining, so Services stop routing here first.")
	fs.StringVar(&o.producerGroup, "producer-group", "", "The RocketMQ producer group announced in sends; empty means detour-producer.")
	o.registerUndeclared(fs)
	o.zap.BindFlags(fs)
}

// registerUndeclared registers the flags of the topics Clusters serve undeclared: which Cluster a
// client naming no namespace means, and the bounds of the routes kept for them.
func (o *Options) registerUndeclared(fs *flag.FlagSet) {
	fs.StringVar(&o.defaultCluster, "default-cluster", "",
		"The Cluster (namespace/name) that serves an undeclared topic a gRPC client names when several Clusters serve undeclared topics (spec.undeclaredTopics: Serve) and the client's namespace does not pick one; empty refuses such a request, naming the Clusters.")
	fs.IntVar(&o.undeclared.MaxTopics, "undeclared-topics-max", routecache.DefaultMaxKeys,
		"The most undeclared topics whose routes one replica keeps at once (RocketMQ Proxy keeps 20,000); beyond it the least recently used is dropped.")
	fs.DurationVar(&o.undeclared.IdleAfter, "undeclared-topics-idle-timeout", routecache.DefaultIdleAfter,
		"How long an undeclared topic's route is kept unused before it is dropped.")
	fs.Float64Var(&o.undeclared.LoadsPerSecond, "undeclared-topics-new-per-second", routecache.DefaultLoadsPerSecond,
		"How many topics not yet in use a replica asks the name servers for a second, after a burst of --undeclared-topics-new-burst; requests naming more are answered too-many-requests, so no client can flood the name servers by naming topics.")
	fs.IntVar(&o.undeclared.LoadBurst, "undeclared-topics-new-burst", routecache.DefaultLoadBurst,
		"How many topics not yet in use a replica asks the name servers for at once before --undeclared-topics-new-per-second applies.")
}

// Validate refuses flag values the operator cannot run with, before anything starts.
func (o *Options) Validate() error {
	for flag, c := range map[string]string{"--namesrv-facade-cluster": o.facadeCluster, "--default-cluster": o.defaultCluster} {
		if _, err := parseClusterFlag(flag, c); err != nil {
			return err
		}
	}
	u := o.undeclared
	if u.MaxTopics < 1 || u.IdleAfter <= 0 || u.LoadsPerSecond <= 0 || u.LoadBurst < 1 {
		return errors.New("--undeclared-topics-max, --undeclared-topics-idle-timeout, --undeclared-topics-new-per-second and --undeclared-topics-new-burst must be positive")
	}
	if o.facadeIdleTimeout <= 0 {
		return errors.New("--namesrv-facade-idle-timeout must be positive")
	}
	if o.shutdownTimeout <= 0 || o.shutdownDelay < 0 {
		return errors.New("--shutdown-timeout must be positive and --shutdown-delay not negative")
	}
	return o.grpc.validate(o.namespace)
}

// parseClusterFlag reads a flag naming a Cluster as namespace/name; "" is no Cluster.
//
//docgen:not-identity a Kubernetes object's namespace/name as a flag gives it
func parseClusterFlag(flag, c string) (client.ObjectKey, error) {
	if c == "" {
		return client.ObjectKey{}, nil
	}
	ns, name, ok := strings.Cut(c, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("%s must be namespace/name, got %q", flag, c)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// Logger is the logger the zap flags describe, writing to w.
func (o *Options) Logger(w io.Writer) logr.Logger {
	return zap.New(zap.UseFlagOptions(&o.zap), zap.WriteTo(w))
}
