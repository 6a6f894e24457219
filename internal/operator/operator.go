// Package operator wires the detour operator: the controller-runtime manager with the
// controllers, the producer runtime they keep current, the send gateway and the name-server
// facade. The manager command runs it against a cluster, the demo command against a local
// control plane.
package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/controllers"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/kubeauth"
	detourscheme "github.com/detourmq/detour/internal/scheme"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
)

// Operator is one manager process: the controller-runtime manager with the controllers, the
// producer runtime they feed, and the send gateway in front of the runtime.
type Operator struct {
	mgr       ctrl.Manager
	rt        *producer.Runtime
	rtClosed  atomic.Bool
	gw        *gateway.Server   // nil when the gateway is disabled
	grpc      *grpcfront.Server // nil when the gRPC endpoint is disabled
	namespace string
	log       logr.Logger
	// shutdownDelay is how long a stopping replica keeps serving while reporting not ready, so
	// Services stop routing to it before its gateway stops accepting.
	shutdownDelay time.Duration
	stopping      atomic.Bool
	lead          *controllers.Leadership
	ctrls         *controllers.Controllers
	// resolver is the doors' one resolver over the manager's cache, which indexes spec.topicName
	// (controllers.Setup registers it); it remembers its answers once the cache has started.
	// Namespaces outside --namespace are not served: their Topics are not watched.
	resolver *front.Resolver
}

// cacheSyncTimeout is how long a controller waits for its caches: as long as the API server
// takes to answer.
const cacheSyncTimeout = 365 * 24 * time.Hour

// leaseNamespace is where the leader election Lease lives: --leader-election-namespace, else the
// pod's namespace in a cluster, else --namespace.
func leaseNamespace(o *Options) (string, error) {
	if o.leaderElectionNamespace != "" {
		return o.leaderElectionNamespace, nil
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if o.namespace != "" {
		return o.namespace, nil
	}
	return "", errors.New("--leader-elect needs --leader-election-namespace (or --namespace) outside a cluster")
}

// fleetOptions says where and under which name this replica shares its view, or nil when
// replicas do not share (no leader election: a single replica, or --share-isolations=false).
func fleetOptions(o *Options) (*controllers.FleetOptions, error) {
	if !o.leaderElect || !o.shareIsolations {
		return nil, nil
	}
	ns, err := leaseNamespace(o)
	if err != nil {
		return nil, err
	}
	name := o.replicaName
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("naming this replica's view: %w", err)
		}
	}
	name = strings.ToLower(name)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("--replica-name %q cannot name a ReplicaView: %s", name, strings.Join(errs, "; "))
	}
	return &controllers.FleetOptions{Namespace: ns, Replica: name}, nil
}

// serviceAccountNamespace holds the pod's namespace in a cluster.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorHooks are adjustments tests make to a manager that flags do not cover.
type operatorHooks struct {
	// skipNameValidation lets several managers register the same controllers in one process.
	skipNameValidation bool
	// leaseTimings shorten the leader election for tests; zero values take the defaults.
	leaseTimings controllers.LeaseTimings
	// fullPods caches whole Pods, for measuring what slimming them saves.
	fullPods bool
	// fleetLease shortens how long a replica's view stands without renewal; 0 keeps the default.
	fleetLease time.Duration
}

// New builds the manager, the runtime, the controllers, the gateway and the health checks from
// the parsed flags. Nothing runs until Run.
func New(cfg *rest.Config, o *Options, log logr.Logger) (*Operator, error) {
	return newOperator(cfg, o, log)
}

// Runtime is the producer runtime the controllers keep current, for callers that send through
// it in this process.
func (op *Operator) Runtime() *producer.Runtime { return op.rt }

// GatewayURL is the send gateway's base URL, or "" when the gateway is disabled.
func (op *Operator) GatewayURL() string {
	if op.gw == nil {
		return ""
	}
	return op.gw.URL()
}

// newOperator is New with the adjustments tests make. It builds in the order the parts depend
// on one another: the manager, the leadership, the runtime, the controllers, then the doors
// (send gateway, gRPC endpoint, name-server facade) and the health checks.
func newOperator(cfg *rest.Config, o *Options, log logr.Logger, hooks ...operatorHooks) (*Operator, error) {
	h := mergeHooks(hooks)
	tlsOpts := []func(*tls.Config){}
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	set := processMetrics()
	auth, err := newReviewer(cfg, o, set)
	if err != nil {
		return nil, err
	}
	mgrOpts, fleet, err := managerOptions(o, h, log, metricsServing(o, auth, tlsOpts))
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	lead, err := newLeadership(cfg, o, h, log)
	if err != nil {
		return nil, err
	}
	defaultCluster, _ := parseClusterFlag("--default-cluster", o.defaultCluster) // Validate checked it
	op := &Operator{mgr: mgr, namespace: o.namespace, log: log, shutdownDelay: o.shutdownDelay, lead: lead}
	op.rt = producer.New(producer.Options{
		Metrics:          set.Runtime,
		Logger:           log.WithName("runtime"),
		ProducerGroup:    o.producerGroup,
		UndeclaredTopics: o.undeclared,
	})
	op.resolver = &front.Resolver{Reader: mgr.GetClient(), Namespace: o.namespace, Routes: op.rt, DefaultCluster: defaultCluster}
	ok := false
	defer func() {
		if !ok {
			if op.gw != nil {
				_ = op.gw.Close()
			}
			op.closeRuntime()
		}
	}()
	if err := op.addControllers(o, fleet, set, log); err != nil {
		return nil, err
	}
	if err := op.mgr.Add(manager.RunnableFunc(op.rememberAnswers)); err != nil {
		return nil, err
	}
	if err := op.addGateway(o, auth, tlsOpts, set, log); err != nil {
		return nil, err
	}
	if err := op.addGRPCFront(o, tlsOpts); err != nil {
		return nil, fmt.Errorf("the RocketMQ gRPC endpoint: %w", err)
	}
	if err := op.addFacade(o, set, log); err != nil {
		return nil, err
	}
	if err := op.addHealthChecks(); err != nil {
		return nil, err
	}
	ok = true
	return op, nil
}

// mergeHooks folds the tests' adjustments into one.
func mergeHooks(hooks []operatorHooks) operatorHooks {
	var h operatorHooks
	for _, x := range hooks {
		h.skipNameValidation = h.skipNameValidation || x.skipNameValidation
		h.fullPods = h.fullPods || x.fullPods
		if x.leaseTimings != (controllers.LeaseTimings{}) {
			h.leaseTimings = x.leaseTimings
		}
		if x.fleetLease > 0 {
			h.fleetLease = x.fleetLease
		}
	}
	return h
}

// newReviewer builds the token and access reviews the send gateway and the metrics endpoint
// share, when either asks for them; nil otherwise.
func newReviewer(cfg *rest.Config, o *Options, set *metrics.Set) (*kubeauth.Reviewer, error) {
	if !(o.gatewayAuth && o.gatewayAddr != "0") && !(o.secureMetrics && o.metricsAddr != "0") {
		return nil, nil
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building an HTTP client for the API server: %w", err)
	}
	authOpts := o.authOpts
	authOpts.OnReviewPanic = func() { set.Gateway.Panicked(metrics.PanicInReview) }
	return kubeauth.New(cfg, httpClient, authOpts)
}

// metricsServing is how the manager serves its metrics: over TLS and behind the reviews with
// --metrics-secure.
func metricsServing(o *Options, auth *kubeauth.Reviewer, tlsOpts []func(*tls.Config)) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.secureMetrics, TLSOpts: tlsOpts}
	if o.secureMetrics {
		opts.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
			return kubeauth.NonResourceFilter(auth), nil
		}
	}
	return opts
}

// managerOptions are the controller-runtime manager's options, and the fleet's when replicas
// share views.
func managerOptions(o *Options, h operatorHooks, log logr.Logger, metricsOpts metricsserver.Options) (ctrl.Options, *controllers.FleetOptions, error) {
	scheme, err := detourscheme.New()
	if err != nil {
		return ctrl.Options{}, nil, err
	}
	// Leader election is detour's own (controllers.Leadership), not the manager's: the manager
	// stops the process when it loses the lease, and losing the lease must stop only the
	// leader's writes, never the gateway.
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		GracefulShutdownTimeout: ptr.To(o.shutdownTimeout),
		MapperProvider:          newKnownKindsFirst,
		Controller: config.Controller{
			SkipNameValidation: ptr.To(h.skipNameValidation),
			// A replica started while the API server is unreachable waits for it, not ready,
			// instead of failing after controller-runtime's default of two minutes.
			CacheSyncTimeout: cacheSyncTimeout,
		},
	}
	podCache := controllers.PodCache(o.brokerPodSelector)
	if h.fullPods {
		podCache.Transform = nil
	}
	mgrOpts.Cache = cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: podCache}}
	if o.namespace != "" {
		mgrOpts.Cache.DefaultNamespaces = map[string]cache.Config{o.namespace: {}}
	}
	fleet, err := fleetOptions(o)
	if err != nil {
		return ctrl.Options{}, nil, err
	}
	if fleet != nil {
		fleet.LeaseDuration = h.fleetLease
		// Only the Lease's namespace: a Role there is all the replicas need to share views.
		mgrOpts.Cache.ByObject[&routingv1alpha1.ReplicaView{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{fleet.Namespace: {}}}
	}
	return mgrOpts, fleet, nil
}

// newLeadership is detour's leader election with --leader-elect, else a replica that always
// leads.
func newLeadership(cfg *rest.Config, o *Options, h operatorHooks, log logr.Logger) (*controllers.Leadership, error) {
	if !o.leaderElect {
		return controllers.AlwaysLeading(), nil
	}
	ns, err := leaseNamespace(o)
	if err != nil {
		return nil, err
	}
	return controllers.NewLeadership(cfg, ns, o.leaderElectionID, h.leaseTimings, log.WithName("leader"))
}

// addControllers sets up the controllers, with a name-server facade per Cluster that asks for
// one.
func (op *Operator) addControllers(o *Options, fleet *controllers.FleetOptions, set *metrics.Set, log logr.Logger) error {
	clusterFacades := &controllers.ClusterFacadeOptions{Host: o.clusterFacadeHost, Base: facade.Options{
		Metrics: set.Facade, MaxConnsPerSource: o.facadePerSource, IdleTimeout: o.facadeIdleTimeout,
		Logger: log.WithName("namesrv-facade")}}
	if len(o.facadeServiceSelector) > 0 {
		// The Services live with the manager's pods, which they select: the Lease's namespace.
		ns, err := leaseNamespace(o)
		if err != nil {
			return fmt.Errorf("--cluster-facade-service-selector: %w", err)
		}
		clusterFacades.ServiceNamespace = ns
		clusterFacades.ServiceSelector = o.facadeServiceSelector
	}
	ctrls, err := controllers.Setup(op.mgr, op.rt, controllers.Options{Leadership: op.lead, Namespace: o.namespace, Fleet: fleet,
		ClusterFacades: clusterFacades, Metrics: set})
	if err != nil {
		return fmt.Errorf("setting up the controllers: %w", err)
	}
	op.ctrls = ctrls
	return nil
}

// rememberAnswers lets the doors' resolver remember its answers once the cache has started (see
// front.Resolver.Remember), until ctx ends. Should the informers fail it, the doors go on
// resolving every request from the cache, as before the cache started.
func (op *Operator) rememberAnswers(ctx context.Context) error {
	if err := op.resolver.Remember(ctx, op.mgr.GetCache()); err != nil && ctx.Err() == nil {
		op.log.Error(err, "The doors resolve every request from the cache: remembering answers failed")
	}
	<-ctx.Done()
	return nil
}

// addGateway serves the send gateway, unless --gateway-bind-address is 0.
func (op *Operator) addGateway(o *Options, auth *kubeauth.Reviewer, tlsOpts []func(*tls.Config), set *metrics.Set, log logr.Logger) error {
	if o.gatewayAddr == "0" {
		return nil
	}
	gwOpts := gateway.Options{
		Addr:            o.gatewayAddr,
		Sender:          op.rt,
		Topics:          op.resolver,
		Clusters:        op.resolver,
		ShutdownTimeout: o.shutdownTimeout,
		Metrics:         set.Gateway,
		Logger:          log.WithName("gateway"),
	}
	if o.gatewayAuth {
		gwOpts.Authorizer = auth
	}
	var err error
	if o.gatewaySecure {
		if gwOpts.TLS, err = op.gatewayTLS(o.gatewayCertDir, tlsOpts); err != nil {
			return err
		}
	} else if o.gatewayAuth {
		log.Info("The send gateway serves plain HTTP: callers' bearer tokens cross the network unencrypted")
	}
	if op.gw, err = gateway.New(gwOpts); err != nil {
		return err
	}
	return op.mgr.Add(op.gw) // on failure newOperator closes the gateway
}

// addFacade serves the process-wide name-server facade, unless --namesrv-facade-bind-address is
// 0.
func (op *Operator) addFacade(o *Options, set *metrics.Set, log logr.Logger) error {
	if o.facadeAddr == "0" {
		return nil
	}
	view := &controllers.FacadeView{Reader: op.mgr.GetClient(), Runtime: op.rt}
	//docgen:not-identity the Cluster's namespace/name as --namesrv-facade-cluster gives it
	if ns, name, ok := strings.Cut(o.facadeCluster, "/"); ok {
		view.Cluster = types.NamespacedName{Namespace: ns, Name: name}
	}
	events := &controllers.FacadeEvents{View: view, Recorder: op.mgr.GetEventRecorder("detour-namesrv-facade")}
	return op.mgr.Add(&facadeRunnable{opts: facade.Options{
		Addr: o.facadeAddr, View: view, Metrics: set.Facade,
		MaxConnsPerSource: o.facadePerSource, IdleTimeout: o.facadeIdleTimeout,
		OnChange: events.Record, Logger: log.WithName("namesrv-facade"),
	}})
}

// Run starts the manager and blocks until ctx ends. Shutdown goes in the order that loses no
// acknowledged message: readiness drops and the replica keeps serving for the shutdown delay,
// each gateway answer closing its connection so clients move to the replicas that stay;
// then the gateway stops accepting and waits for the sends in flight (it stops first, with the
// other runnables that need no leader); then the controllers and caches stop; and only then is
// the runtime closed.
func (op *Operator) Run(ctx context.Context) error {
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	defer stopMgr()
	go func() {
		select {
		case <-ctx.Done():
		case <-mgrCtx.Done():
			return // the manager ended on its own
		}
		op.stopping.Store(true)
		if op.gw != nil {
			op.gw.Retire()
		}
		if op.shutdownDelay > 0 {
			op.log.Info("Stopping: reporting not ready while still serving", "delay", op.shutdownDelay)
			select {
			case <-time.After(op.shutdownDelay):
			case <-mgrCtx.Done():
			}
		}
		stopMgr()
	}()
	err := op.mgr.Start(mgrCtx)
	stopMgr()
	if op.gw != nil {
		_ = op.gw.Close() // releases the port if the manager failed before starting the gateway
		<-op.gw.Done()
	}
	op.closeRuntime()
	if err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	op.log.Info("Stopped")
	return nil
}

func (op *Operator) closeRuntime() {
	if op.rtClosed.CompareAndSwap(false, true) {
		_ = op.rt.Close()
	}
}

// gatewayTLS serves tls.crt and tls.key from certDir whenever they are there, read again every
// second (a Secret created or rotated after start is served without a restart), and a
// self-signed certificate until then (encryption without a verifiable identity, as the metrics
// endpoint does by default).
func (op *Operator) gatewayTLS(certDir string, opts []func(*tls.Config)) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	for _, f := range opts {
		f(cfg)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("detour-gateway", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed gateway certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if certDir == "" {
		cfg.Certificates = []tls.Certificate{pair}
		return cfg, nil
	}
	g := newGatewayCert(certDir, &pair, op.log.WithName("gateway-tls"))
	if g.current == nil {
		op.log.Info("No tls.crt and tls.key in the gateway certificate folder yet; serving a self-signed certificate until they appear", "dir", certDir)
	}
	if err := op.mgr.Add(g); err != nil {
		return nil, err
	}
	cfg.GetCertificate = g.GetCertificate
	return cfg, nil
}

// facadeRunnable serves the name-server facade on every replica while the manager runs; it starts
// with the manager, so its view reads a started cache.
type facadeRunnable struct {
	opts facade.Options
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves clients.
func (*facadeRunnable) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (f *facadeRunnable) Start(ctx context.Context) error {
	srv, err := facade.Start(f.opts)
	if err != nil {
		return err
	}
	f.opts.Logger.Info("Serving RocketMQ's name-server protocol", "addr", srv.Addr())
	<-ctx.Done()
	return srv.Close()
}
