// Command manager is the detour operator: the Topic, FaultPolicy and broker-pod controllers, the
// embedded producer runtime they keep current, and the HTTP send gateway in front of it.
//
//	manager --leader-elect --metrics-bind-address=:8443 --gateway-bind-address=:8080
//
// With --local it runs the whole system on this machine instead (what `make demo` does): a
// control plane, three simulated brokers with broker Pods, the samples, the operator, steady
// traffic and a fault script, with a live view.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/pkg/facade"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	metricsAddr             string
	secureMetrics           bool
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	namespace               string
	shareIsolations         bool
	replicaName             string
	brokerPodSelector       labels.Selector
	gatewayAddr             string
	gatewayAuth             bool
	authOpts                gateway.AuthOptions
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
	zap                     zap.Options

	local            bool
	localAssets      string
	localCRDs        string
	localSamples     string
	demoKubeconfig   string
	demoLog          string
	demoDuration     time.Duration
	demoPhase        time.Duration
	demoRate         int
	demoSenders      int
	demoVictimBroker string

	// set records the flags given on the command line, so --local can pick loopback defaults
	// for the ones the user left alone.
	set map[string]bool
}

// parseFlags parses the command line in the kubebuilder style.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{zap: zap.Options{Development: false}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to, e.g. :8443 (HTTPS) or :8080 (HTTP); 0 disables it.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, allowing only callers whose token may get the /metrics path (TokenReview and SubjectAccessReview).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "The address the /healthz and /readyz endpoints bind to; 0 disables them.")
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
	fs.DurationVar(&o.authOpts.TokenTTL, "gateway-auth-token-ttl", gateway.DefaultTokenTTL,
		"How long an accepted bearer token is remembered (kube-apiserver's --authentication-token-webhook-cache-ttl default).")
	fs.DurationVar(&o.authOpts.RejectedTokenTTL, "gateway-auth-rejected-token-ttl", gateway.DefaultRejectedTokenTTL,
		"How long a bearer token the API server rejected is remembered as rejected.")
	fs.DurationVar(&o.authOpts.AllowedTTL, "gateway-auth-allowed-ttl", gateway.DefaultAllowedTTL,
		"How long a granted SubjectAccessReview is remembered: a revoked RoleBinding stops sends within this (kube-apiserver's --authorization-webhook-cache-authorized-ttl default).")
	fs.DurationVar(&o.authOpts.DeniedTTL, "gateway-auth-denied-ttl", gateway.DefaultDeniedTTL,
		"How long a refused SubjectAccessReview is remembered: a new RoleBinding takes effect within this (kube-apiserver's --authorization-webhook-cache-unauthorized-ttl default).")
	fs.Float64Var(&o.authOpts.ClientReviewsPerSecond, "gateway-auth-reviews-per-client", gateway.DefaultClientReviewsPerSecond,
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

	fs.BoolVar(&o.local, "local", false, "Run the whole system locally: control plane, brokers, operator, traffic and a fault script.")
	fs.StringVar(&o.localAssets, "local-assets", "", "With --local: the folder with kube-apiserver and etcd (printed by hack/setup-envtest.sh).")
	fs.StringVar(&o.localCRDs, "local-crds", "config/crd/bases", "With --local: the CRDs to install.")
	fs.StringVar(&o.localSamples, "local-samples", "config/samples", "With --local: the resources to apply.")
	fs.StringVar(&o.demoKubeconfig, "demo-kubeconfig", "bin/demo.kubeconfig", "With --local: where to write a kubeconfig for the control plane.")
	fs.StringVar(&o.demoLog, "demo-log", "bin/demo.log", "With --local: where the operator's log goes (the terminal shows the live view); - means stderr.")
	fs.DurationVar(&o.demoDuration, "demo-duration", 0, "With --local: stop after this long; 0 runs until interrupted.")
	fs.DurationVar(&o.demoPhase, "demo-phase", 10*time.Second, "With --local: how long each step of the fault script lasts.")
	fs.IntVar(&o.demoRate, "demo-rate", 200, "With --local: messages per second, in total.")
	fs.IntVar(&o.demoSenders, "demo-senders", 4, "With --local: concurrent senders.")
	fs.StringVar(&o.demoVictimBroker, "demo-fault-broker", "broker-b", "With --local: the broker the fault script abuses.")

	config.RegisterFlags(fs)
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c := o.facadeCluster; c != "" {
		if ns, name, ok := strings.Cut(c, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--namesrv-facade-cluster must be namespace/name, got %q", c)
		}
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if o.facadeIdleTimeout <= 0 {
		return nil, errors.New("--namesrv-facade-idle-timeout must be positive")
	}
	if o.shutdownTimeout <= 0 || o.shutdownDelay < 0 {
		return nil, errors.New("--shutdown-timeout must be positive and --shutdown-delay not negative")
	}
	if o.local && (o.demoRate <= 0 || o.demoSenders <= 0 || o.demoPhase < time.Second || o.demoDuration < 0) {
		return nil, errors.New("--demo-rate and --demo-senders must be positive, --demo-phase at least 1s, --demo-duration not negative")
	}
	return o, nil
}

// run parses args and runs the operator (or the local demo) until SIGINT or SIGTERM; a second
// signal exits at once. It returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "manager:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	done := make(chan struct{})
	defer close(done)
	var force forcedStop
	forced := make(chan struct{}) // closed when a second interrupt takes over the exit
	go func() {
		select {
		case <-signals:
			fmt.Fprintln(stderr, "manager: stopping (interrupt again to exit at once)")
			cancel()
		case <-done:
			return
		}
		select {
		case <-signals:
			close(forced)
			force.run(5 * time.Second)
			os.Exit(1)
		case <-done:
		}
	}()

	if o.local {
		err = runLocal(ctx, o, stdout, stderr, &force)
	} else {
		err = runCluster(ctx, o, stderr)
	}
	if ctx.Err() != nil {
		// A second interrupt may race the end of a quick graceful stop; it still means "exit at
		// once with status 1", so give it a moment to land and leave the exit to it.
		select {
		case <-forced:
			select {} // the signal goroutine exits the process
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "manager:", err)
		return 1
	}
	return 0
}

// runCluster runs the operator against the cluster of the kubeconfig (or in-cluster config).
func runCluster(ctx context.Context, o *options, stderr io.Writer) error {
	log := zap.New(zap.UseFlagOptions(&o.zap), zap.WriteTo(stderr))
	ctrl.SetLogger(log)
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	op, err := newOperator(cfg, o, log)
	if err != nil {
		return err
	}
	return op.run(ctx)
}

// forcedStop is what a second interrupt does before the process exits: the local demo's control
// plane runs in process groups of its own, which no terminal signal reaches, so it must be told
// to stop or it outlives the demo.
type forcedStop struct {
	mu sync.Mutex
	fn func()
}

// set registers the function to run on a forced exit.
func (f *forcedStop) set(fn func()) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

// run runs the registered function, waiting at most timeout for it.
func (f *forcedStop) run(timeout time.Duration) {
	f.mu.Lock()
	fn := f.fn
	f.mu.Unlock()
	if fn == nil {
		return
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		fn()
	}()
	select {
	case <-finished:
	case <-time.After(timeout):
	}
}
