// Package deploy tests what a user deploys: the kustomization under config/, the Helm chart,
// the alerting rules and the Dockerfile, rendered with the real kubectl, Helm and promtool, and
// the manager binary run against a real API server with the RBAC they grant.
package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/demo"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/operator"
	detourscheme "github.com/detourmq/detour/internal/scheme"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
)

// How long tests wait for observable state, and how often they look.
const (
	eventuallyTimeout  = 30 * time.Second
	eventuallyInterval = 25 * time.Millisecond
)

var (
	testEnv        *envtest.Environment
	k8sClient      client.Client
	clientset      *kubernetes.Clientset
	kubeconfigPath string
	repoRoot       string
	// suiteDir holds the suite's files (kubeconfigs, the manager binary); it is removed when the
	// tests end.
	suiteDir string
)

// TestMain starts one envtest control plane for the package. The tests need it: without
// KUBEBUILDER_ASSETS they fail rather than skip, so a green run always means they ran.
func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// needsEnvtest skips a test under -short, where TestMain starts no control plane: the fast tier
// (make test-unit) runs only what needs neither envtest nor Helm or promtool.
func needsEnvtest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the envtest control plane; skipped under -short")
	}
}

func runSuite(m *testing.M) int {
	flag.Parse()
	var err error
	if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testing.Short() {
		return m.Run() // the tests that need a control plane skip (needsEnvtest)
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or "+
			"KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./test/deploy/")
		return 1
	}
	if suiteDir, err = os.MkdirTemp("", "detour-deploy-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(suiteDir)
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if _, err := testEnv.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting the envtest control plane: %v\n", err)
		_ = testEnv.Stop() // Start can fail after launching the processes
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the envtest control plane: %v\n", err)
		}
	}()
	if err := connect(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// connect builds the suite's clients and writes an administrator's kubeconfig for kubectl.
func connect() error {
	// The suite's own clients log nothing worth reading; the managers it starts log to theirs.
	ctrllog.SetLogger(logr.Discard())
	admin, err := testEnv.AddUser(envtest.User{Name: "detour-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	scheme, err := detourscheme.New()
	if err != nil {
		return err
	}
	if k8sClient, err = client.New(admin.Config(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if clientset, err = kubernetes.NewForConfig(admin.Config()); err != nil {
		return err
	}
	kubeconfigPath, err = writeKubeconfig(admin, "admin")
	return err
}

// writeKubeconfig writes user's kubeconfig into the suite's folder and returns its path.
func writeKubeconfig(user *envtest.AuthenticatedUser, name string) (string, error) {
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(suiteDir, name+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// eventually polls cond until it returns nil, failing the test with cond's last error at the
// deadline.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	poll.Until(t, eventuallyTimeout, eventuallyInterval, what, cond)
}

// newNamespace creates a namespace for one test (envtest never finishes deleting namespaces, so
// every test gets a fresh one).
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "detour-deploy-"}}
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

// createTopic creates a FaultPolicy named after the topic and a Topic selecting pods labelled
// app=<app>, with fast retries so failure cases end quickly.
func createTopic(t *testing.T, ns, name, topicName, app string) {
	t.Helper()
	ctx := context.Background()
	fp := &routingv1alpha1.FaultPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.FaultPolicySpec{Retry: routingv1alpha1.RetryPolicy{
			Attempts: 2, SendTimeoutMillis: 2000, PerAttemptTimeoutMillis: ptr.To[int32](1000)}},
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

// serviceAccountToken creates a service account and a token for it with the TokenRequest API.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// freeAddr returns a loopback address with a port that was free a moment ago, for the manager's
// servers, whose ports the test must know in advance.
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

// insecureClient trusts the manager's self-signed certificates.
func insecureClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test gateway's certificate is self-signed
	}}
}

// answer is a decoded gateway response.
type answer struct {
	status int
	ok     gateway.SendResponse
	err    gateway.ErrorResponse
}

// postMessage sends body to the gateway at url as token's holder and decodes the answer.
func postMessage(t *testing.T, c *http.Client, url, contentType, token string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode}
	target := any(&a.err)
	if res.StatusCode == http.StatusOK {
		target = &a.ok
	}
	if err := json.Unmarshal(data, target); err != nil {
		t.Fatalf("POST %s: status %d, body %q is not JSON: %v", url, res.StatusCode, data, err)
	}
	return a
}

// messagesURL is the gateway's URL for Topic ns/name's messages.
func messagesURL(base, ns, name string) string {
	return fmt.Sprintf("%s/v1/namespaces/%s/topics/%s/messages", base, ns, name)
}

// storedCounts reports how often each msgId is stored over all brokers.
func storedCounts(brokers ...*brokersim.Broker) map[string]int {
	out := map[string]int{}
	for _, b := range brokers {
		for k, n := range b.StoredByUniqKey() {
			out[k] += n
		}
	}
	return out
}

// probe GETs a health endpoint and returns its status and body.
func probe(addr, path string) (int, string, error) {
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + path + "?verbose")
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// managerFlags are a manager command line parsed and validated as the manager parses it, read
// back by flag name. A flag whose value does not print itself (a func flag) reads back as given.
type managerFlags map[string]string

// parseFlags parses args with the operator's flags, as the manager command does.
func parseFlags(args []string, stderr io.Writer) (managerFlags, error) {
	o := &operator.Options{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	flags := managerFlags{}
	fs.VisitAll(func(f *flag.Flag) { flags[f.Name] = f.Value.String() })
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if ok && flags[name] == "" {
			flags[name] = value
		}
	}
	return flags, nil
}

// on reads a boolean flag.
func (f managerFlags) on(name string) bool { return f[name] == "true" }

// duration reads a duration flag.
func (f managerFlags) duration(t *testing.T, name string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(f[name])
	if err != nil {
		t.Fatalf("--%s=%q: %v", name, f[name], err)
	}
	return d
}

// managerBinary builds cmd/manager once for the suite and returns its path.
var managerBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(suiteDir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %v\n%s", err, out)
	}
	return bin, nil
})

// logCapture keeps a manager's output so a test can look for refusals in it.
type logCapture struct {
	mu    sync.Mutex
	lines []string
	rest  []byte
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rest = append(l.rest, p...)
	for {
		i := bytes.IndexByte(l.rest, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.lines = append(l.lines, string(l.rest[:i+1]))
		l.rest = l.rest[i+1:]
	}
}

func (l *logCapture) find(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range append(l.lines, string(l.rest)) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// startManagerAs runs the manager binary with args as user, as the Deployment runs it but with
// user's kubeconfig for the in-cluster one; its output (client-go's included) is kept in logs.
// stop sends it SIGTERM, as the kubelet does, and waits for a clean exit; it is idempotent and
// also runs when the test ends.
func startManagerAs(t *testing.T, user *envtest.AuthenticatedUser, args []string) (logs *logCapture, stop func()) {
	t.Helper()
	bin, err := managerBinary()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := writeKubeconfig(user, strings.NewReplacer(":", "-", "/", "-").Replace(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	logs = &logCapture{}
	cmd := exec.Command(bin, append(args, "--kubeconfig="+kubeconfig)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	// Killed with the test binary: a test that is killed must not leave a manager running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the manager stopped with %v:\n%s", err, strings.Join(logs.find(""), ""))
				}
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				t.Errorf("the manager did not stop within a minute of SIGTERM")
			}
		})
	}
	t.Cleanup(stop)
	return logs, stop
}
