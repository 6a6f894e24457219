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
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/controllers"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/internal/metrics"
	detourscheme "github.com/detourmq/detour/internal/scheme"
	"github.com/detourmq/detour/pkg/facade"
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

// newOperator is New with the adjustments tests make.
func newOperator(cfg *rest.Config, o *Options, log logr.Logger, hooks ...operatorHooks) (*Operator, error) {
	scheme, err := detourscheme.New()
	if err != nil {
		return nil, err
	}
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
	tlsOpts := []func(*tls.Config){}
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building an HTTP client for the API server: %w", err)
	}
	set := processMetrics()
	var auth *kubeauth.Reviewer
	if (o.gatewayAuth && o.gatewayAddr != "0") || (o.secureMetrics && o.metricsAddr != "0") {
		authOpts := o.authOpts
		authOpts.OnReviewPanic = func() { set.Gateway.Panicked(metrics.PanicInReview) }
		if auth, err = kubeauth.New(cfg, httpClient, authOpts); err != nil {
			return nil, err
		}
	}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.secureMetrics, TLSOpts: tlsOpts}
	if o.secureMetrics {
		metricsOpts.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
			return kubeauth.NonResourceFilter(auth), nil
		}
	}
	// Leader election is detour's own (controllers.Leadership), not the manager's: the manager
	// stops the process when it loses the lease, and losing the lease must stop only the
	// leader's writes, never the gateway.
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
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
		return nil, err
	}
	if fleet != nil {
		fleet.LeaseDuration = h.fleetLease
		// Only the Lease's namespace: a Role there is all the replicas need to share views.
		mgrOpts.Cache.ByObject[&routingv1alpha1.ReplicaView{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{fleet.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	lead := controllers.AlwaysLeading()
	if o.leaderElect {
		ns, err := leaseNamespace(o)
		if err != nil {
			return nil, err
		}
		if lead, err = controllers.NewLeadership(cfg, ns, o.leaderElectionID, h.leaseTimings, log.WithName("leader")); err != nil {
			return nil, err
		}
	}

	op := &Operator{mgr: mgr, namespace: o.namespace, log: log, shutdownDelay: o.shutdownDelay, lead: lead}
	op.rt = producer.New(producer.Options{
		Metrics:       set.Runtime,
		Logger:        log.WithName("runtime"),
		ProducerGroup: o.producerGroup,
	})
	ok := false
	defer func() {
		if !ok {
			op.closeRuntime()
		}
	}()
	clusterFacades := &controllers.ClusterFacadeOptions{Host: o.clusterFacadeHost, Base: facade.Options{
		Metrics: set.Facade, MaxConnsPerSource: o.facadePerSource, IdleTimeout: o.facadeIdleTimeout,
		Logger: log.WithName("namesrv-facade")}}
	if len(o.facadeServiceSelector) > 0 {
		// The Services live with the manager's pods, which they select: the Lease's namespace.
		if clusterFacades.ServiceNamespace, err = leaseNamespace(o); err != nil {
			return nil, fmt.Errorf("--cluster-facade-service-selector: %w", err)
		}
		clusterFacades.ServiceSelector = o.facadeServiceSelector
	}
	if op.ctrls, err = controllers.Setup(mgr, op.rt, controllers.Options{Leadership: lead, Namespace: o.namespace, Fleet: fleet,
		ClusterFacades: clusterFacades, Metrics: set}); err != nil {
		return nil, fmt.Errorf("setting up the controllers: %w", err)
	}

	if o.gatewayAddr != "0" {
		gwOpts := gateway.Options{
			Addr:            o.gatewayAddr,
			Sender:          op.rt,
			Topics:          gateway.TopicResolverFunc(op.resolveTopic),
			ShutdownTimeout: o.shutdownTimeout,
			Metrics:         set.Gateway,
			Logger:          log.WithName("gateway"),
		}
		if o.gatewayAuth {
			gwOpts.Authorizer = auth
		}
		if o.gatewaySecure {
			if gwOpts.TLS, err = op.gatewayTLS(o.gatewayCertDir, tlsOpts); err != nil {
				return nil, err
			}
		} else if o.gatewayAuth {
			log.Info("The send gateway serves plain HTTP: callers' bearer tokens cross the network unencrypted")
		}
		if op.gw, err = gateway.New(gwOpts); err != nil {
			return nil, err
		}
		if err := mgr.Add(op.gw); err != nil {
			_ = op.gw.Close()
			return nil, err
		}
	}
	if err := op.addGRPCFront(o, tlsOpts); err != nil {
		return nil, fmt.Errorf("the RocketMQ gRPC endpoint: %w", err)
	}

	if o.facadeAddr != "0" {
		view := &controllers.FacadeView{Reader: mgr.GetClient(), Runtime: op.rt}
		if ns, name, ok := strings.Cut(o.facadeCluster, "/"); ok {
			view.Cluster = types.NamespacedName{Namespace: ns, Name: name}
		}
		events := &controllers.FacadeEvents{View: view, Recorder: mgr.GetEventRecorder("detour-namesrv-facade")}
		if err := mgr.Add(&facadeRunnable{opts: facade.Options{
			Addr: o.facadeAddr, View: view, Metrics: set.Facade,
			MaxConnsPerSource: o.facadePerSource, IdleTimeout: o.facadeIdleTimeout,
			OnChange: events.Record, Logger: log.WithName("namesrv-facade"),
		}}); err != nil {
			return nil, err
		}
	}

	if err := op.addHealthChecks(); err != nil {
		if op.gw != nil {
			_ = op.gw.Close()
		}
		return nil, err
	}
	ok = true
	return op, nil
}

// Run starts the manager and blocks until ctx ends. Shutdown goes in the order that loses no
// acknowledged message: readiness drops and the replica keeps serving for the shutdown delay;
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

// resolveTopic finds a Topic in the manager's cache. Namespaces outside --namespace are not
// served: their Topics are not watched.
func (op *Operator) resolveTopic(ctx context.Context, namespace, name string) (gateway.Target, error) {
	if op.namespace != "" && namespace != op.namespace {
		return gateway.Target{}, gateway.ErrTopicNotFound
	}
	var t routingv1alpha1.Topic
	err := op.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &t)
	if apierrors.IsNotFound(err) {
		return gateway.Target{}, gateway.ErrTopicNotFound
	}
	if err != nil {
		return gateway.Target{}, err
	}
	// Exactly this resource's route: another namespace's Topic of the same topicName has its own.
	return gateway.Target{Topic: t.Spec.TopicName, Route: controllers.RouteKey(namespace, name),
		BrokerPrefix: controllers.TopicBrokerPrefix(&t)}, nil
}

// addHealthChecks makes liveness follow the runtime, and readiness the runtime, the cache and
// the gateway: a replica is ready when it can actually send what it is asked to.
func (op *Operator) addHealthChecks() error {
	runtimeOpen := func(*http.Request) error {
		if op.rtClosed.Load() {
			return errors.New("the producer runtime is closed")
		}
		return nil
	}
	if err := op.mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := op.mgr.AddHealthzCheck("runtime", runtimeOpen); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("runtime", runtimeOpen); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("shutdown", func(*http.Request) error {
		if op.stopping.Load() {
			return errors.New("the manager is stopping")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("isolations-restored", func(*http.Request) error {
		if !op.ctrls.IsolationsRestored() {
			return errors.New("the isolations recorded in FaultPolicy status are not restored yet")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := op.mgr.AddReadyzCheck("cache-sync", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !op.mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the informer caches have not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	if op.gw != nil {
		if err := op.mgr.AddReadyzCheck("gateway", func(*http.Request) error { return op.gw.Serving() }); err != nil {
			return err
		}
	}
	return op.mgr.AddReadyzCheck("topics-routed", op.topicsRouted())
}

// topicsRouted is a readiness check that passes once every Topic present when the caches synced
// has been routed once: its route is in force, or (on a Cluster) its name servers were asked,
// whatever they answered. A rollout then never answers 503 NoRoute to traffic it accepted because
// the new replica had not routed yet. Once passed it stays passed: Topics created later are not
// a reason to take a serving replica out of its Service.
//
// The Topics are listed in the background: a list can block for minutes while the API server is
// unreachable (the client's discovery waits on it), and a probe must answer at once, not ready.
func (op *Operator) topicsRouted() healthz.Checker {
	var (
		passed  atomic.Bool
		mu      sync.Mutex
		initial []routingv1alpha1.Topic
		listed  bool
		listing bool
		listErr error
	)
	list := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var topics routingv1alpha1.TopicList
		err := errors.New("the informer caches have not synced")
		if op.mgr.GetCache().WaitForCacheSync(ctx) {
			err = op.mgr.GetClient().List(ctx, &topics)
		}
		mu.Lock()
		defer mu.Unlock()
		listing, listErr = false, err
		if err == nil {
			initial, listed = topics.Items, true
		}
	}
	return func(*http.Request) error {
		if passed.Load() {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if !listed {
			if !listing {
				listing = true
				go list()
			}
			if listErr != nil {
				return fmt.Errorf("listing the Topics present at start: %w", listErr)
			}
			return errors.New("listing the Topics present at start")
		}
		var waiting []string
		for i := range initial {
			t := &initial[i]
			key := controllers.RouteKey(t.Namespace, t.Name)
			_, routed := op.rt.RouteInfo(key)
			_, asked := op.rt.RouteStatus(key)
			if !routed && !asked {
				waiting = append(waiting, t.Namespace+"/"+t.Name)
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("%d of %d Topics not routed yet, for example %s", len(waiting), len(initial), waiting[0])
		}
		passed.Store(true)
		return nil
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

// knownKindsFirst maps the kinds the operator watches (Pods and its own) without asking the API
// server, and everything else as the dynamic mapper does. Building the pod cache needs to know
// whether Pods are namespaced, and a replica must be buildable while the API server is
// unreachable: it then waits, not ready, instead of failing.
type knownKindsFirst struct {
	known *meta.DefaultRESTMapper
	meta.RESTMapper
}

func newKnownKindsFirst(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	known := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion, routingv1alpha1.GroupVersion})
	known.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	for _, kind := range []string{"Topic", "FaultPolicy", "Cluster", "ReplicaView"} {
		known.Add(routingv1alpha1.GroupVersion.WithKind(kind), meta.RESTScopeNamespace)
	}
	return knownKindsFirst{known: known, RESTMapper: dynamic}, nil
}

// RESTMapping implements meta.RESTMapper.
func (m knownKindsFirst) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if mapping, err := m.known.RESTMapping(gk, versions...); err == nil {
		return mapping, nil
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// RESTMappings implements meta.RESTMapper.
func (m knownKindsFirst) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if mappings, err := m.known.RESTMappings(gk, versions...); err == nil && len(mappings) > 0 {
		return mappings, nil
	}
	return m.RESTMapper.RESTMappings(gk, versions...)
}
