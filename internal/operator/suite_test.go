package operator

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/demo"
	detourscheme "github.com/detourmq/detour/internal/scheme"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/scope"
)

// How long tests wait for observable state, and how often they look.
const (
	eventuallyTimeout  = 30 * time.Second
	eventuallyInterval = 25 * time.Millisecond
)

var (
	testEnv        *envtest.Environment
	adminConfig    *rest.Config
	k8sClient      client.Client
	clientset      *kubernetes.Clientset
	kubeconfigPath string
	repoRoot       string
	// suiteDir holds the suite's files; it is removed when the tests end.
	suiteDir string
)

// TestMain starts one envtest control plane for the package. The tests need it: without
// KUBEBUILDER_ASSETS they fail rather than skip, so a green run always means they ran.
func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// needsEnvtest skips a test under -short, where TestMain starts no control plane: the fast tier
// (make test-unit) runs only what needs neither envtest nor a real broker, Helm or promtool.
func needsEnvtest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the envtest control plane; skipped under -short")
	}
}

func runSuite(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// The fast tier starts no control plane; the tests that need one skip (needsEnvtest).
		var err error
		if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or "+
			"KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./internal/operator/")
		return 1
	}
	var err error
	if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if adminConfig, err = testEnv.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting the envtest control plane: %v\n", err)
		_ = testEnv.Stop() // Start can fail after launching the processes
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the envtest control plane: %v\n", err)
		}
	}()
	scheme, err := detourscheme.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8sClient, err = client.New(adminConfig, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if clientset, err = kubernetes.NewForConfig(adminConfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Once, before anything logs: klog's logger must not change while client-go goroutines run.
	klog.SetLogger(zap.New(zap.WriteTo(klogSink)))
	dir, err := os.MkdirTemp("", "detour-manager-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	suiteDir = dir
	admin, err := testEnv.AddUser(envtest.User{Name: "detour-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	data, err := admin.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// eventually polls cond until it returns nil, failing the test with cond's last error at the
// deadline.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	eventuallyWithin(t, eventuallyTimeout, what, cond)
}

// eventuallyWithin is eventually with its own timeout, for what waits on client-go's backoff.
func eventuallyWithin(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, eventuallyInterval, what, cond)
}

// newNamespace creates a namespace for one test (envtest never finishes deleting namespaces, so
// every test gets a fresh one).
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "detour-manager-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// startBroker starts a brokersim broker and its Ready Pod in ns with the given labels.
func startBroker(t *testing.T, ns, name string, labels map[string]string) *brokersim.Broker {
	t.Helper()
	b, err := brokersim.StartBroker(name, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := demo.CreateBrokerPod(context.Background(), k8sClient, ns, b, labels); err != nil {
		t.Fatal(err)
	}
	return b
}

// fastRetries end failure cases quickly: two attempts, the first capped at 1 s, 2 s in all.
var fastRetries = routingv1alpha1.RetryPolicy{Attempts: 2, SendTimeoutMillis: 2000, PerAttemptTimeoutMillis: ptr.To[int32](1000)}

// createTopic creates a FaultPolicy named after the topic and a Topic selecting pods labelled
// app=<app>, with fast retries so failure cases end quickly.
func createTopic(t *testing.T, ns, name, topicName, app string) {
	t.Helper()
	createTopicRetrying(t, ns, name, topicName, app, fastRetries)
}

// createTopicRetrying is createTopic with the FaultPolicy's retries given.
func createTopicRetrying(t *testing.T, ns, name, topicName, app string, retry routingv1alpha1.RetryPolicy) {
	t.Helper()
	ctx := context.Background()
	fp := &routingv1alpha1.FaultPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       routingv1alpha1.FaultPolicySpec{Retry: retry},
	}
	if err := k8sClient.Create(ctx, fp); err != nil {
		t.Fatal(err)
	}
	topic := &routingv1alpha1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{
			TopicName:      topicName,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{demo.LabelApp: app}},
			WriteQueueNums: 2,
			ReadQueueNums:  2,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: name},
		},
	}
	if err := k8sClient.Create(ctx, topic); err != nil {
		t.Fatal(err)
	}
}

// testOptions parses a command line as the binary would, with the test's local defaults first:
// nothing bound outside loopback, no metrics, scoped to ns.
func testOptions(t *testing.T, ns string, args ...string) *Options {
	t.Helper()
	base := []string{
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--gateway-bind-address=127.0.0.1:0",
		"--grpc-bind-address=127.0.0.1:0",
		"--gateway-auth=false",
		"--gateway-secure=false",
		"--shutdown-timeout=20s",
		"--namespace=" + ns,
	}
	o, err := parseFlags(append(base, args...), io.Discard)
	if err != nil {
		t.Fatalf("parsing flags: %v", err)
	}
	return o
}

// runningOperator is an operator started by a test.
type runningOperator struct {
	*Operator
	cancel context.CancelFunc
	done   chan error
	err    error
	waited atomic.Bool
}

// startOperator builds and starts an operator on cfg and stops it when the test ends.
func startOperator(t *testing.T, cfg *rest.Config, o *Options, hooks ...operatorHooks) *runningOperator {
	t.Helper()
	logw := &testLogWriter{t: t}
	log := zap.New(zap.WriteTo(logw))
	op, err := newOperator(cfg, o, log, append(hooks, operatorHooks{skipNameValidation: true})...)
	if err != nil {
		t.Fatalf("building the operator: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningOperator{Operator: op, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- op.Run(ctx) }()
	t.Cleanup(func() {
		_ = r.stop()
		logw.done.Store(true)
	})
	return r
}

// stop ends the operator and waits until run returned, returning its error.
func (r *runningOperator) stop() error {
	r.cancel()
	if r.waited.CompareAndSwap(false, true) {
		r.err = <-r.done
	}
	return r.err
}

// waitForRoute waits until the operator's runtime routes the Topic whose spec.topicName is topic
// over n brokers. A scoped operator's Topic is looked for in its own namespace only, so a test run
// again (-count) finds its own Topic, not the one an earlier run left in another namespace; an
// unscoped operator's tests keep one Topic per RocketMQ topic.
func (r *runningOperator) waitForRoute(t *testing.T, topic string, n int) {
	t.Helper()
	eventually(t, "topic "+topic+" routed over the brokers", func() error {
		var topics routingv1alpha1.TopicList
		if err := k8sClient.List(context.Background(), &topics, client.InNamespace(r.namespace)); err != nil {
			return err
		}
		i := slices.IndexFunc(topics.Items, func(x routingv1alpha1.Topic) bool { return x.Spec.TopicName == topic })
		if i < 0 {
			return fmt.Errorf("no Topic declares %s", topic)
		}
		info, ok := r.rt.RouteInfo(scope.TopicRoute(topics.Items[i].Namespace, topics.Items[i].Name))
		if !ok {
			return fmt.Errorf("no route")
		}
		seen := map[string]bool{}
		for _, q := range info.Queues {
			seen[q.Broker] = true
		}
		if len(seen) != n {
			return fmt.Errorf("route over %v", seen)
		}
		return nil
	})
}

// testLogWriter sends the operator's log to the test log when DETOUR_TEST_LOG is set, and stops
// once the test is over.
type testLogWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	if !w.done.Load() && os.Getenv("DETOUR_TEST_LOG") != "" {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// klogSink receives what client-go logs through klog; a test that wants it points it at a
// writer of its own for a while, and otherwise it is dropped.
var klogSink = &switchWriter{}

type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

// freeAddr returns a loopback address with a port that was free a moment ago, for servers
// (the health probe) that do not report the port they picked.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// insecureClient trusts the gateway's self-signed certificate.
func insecureClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test gateway's certificate is self-signed
	}}
}
