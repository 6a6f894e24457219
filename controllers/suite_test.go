package controllers

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// Timeouts shared by the envtest suites: how long Eventually waits for observable state, and how
// often it looks.
const (
	eventuallyTimeout  = 20 * time.Second
	eventuallyInterval = 50 * time.Millisecond
)

var (
	testScheme     = runtime.NewScheme()
	testEnv        *envtest.Environment
	restConfig     *rest.Config
	k8sClient      client.Client
	k8sWatchClient client.WithWatch
	kubeconfigPath string
)

// TestMain starts one envtest control plane (kube-apiserver and etcd built by
// hack/setup-envtest.sh) for every test in the package. The tests need it: without
// KUBEBUILDER_ASSETS they fail rather than skip, so a green run always means they ran. Under
// -short (make test-unit) it starts nothing, and the tests that need it skip (needsEnvtest).
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

// needsEnvtest skips a test under -short, where TestMain starts no control plane: the fast tier
// (make test-unit) runs only what needs neither envtest nor a real broker.
func needsEnvtest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the envtest control plane; skipped under -short")
	}
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or "+
			"KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./controllers/")
		return 1
	}
	// Controller logs are noise in a passing run; DETOUR_TEST_LOG=1 shows them.
	if os.Getenv("DETOUR_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	if err := clientgoscheme.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	if err := routingv1alpha1.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	restConfig, err = testEnv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the envtest control plane: %v\n", err)
		// Start can fail after launching etcd and kube-apiserver (a CRD the server refuses):
		// stop them, or they outlive the test binary.
		_ = testEnv.Stop()
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the envtest control plane: %v\n", err)
		}
	}()
	k8sClient, err = client.New(restConfig, client.Options{Scheme: testScheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating a client: %v\n", err)
		return 1
	}
	k8sWatchClient, err = client.NewWithWatch(restConfig, client.Options{Scheme: testScheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating a watch client: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "detour-envtest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating a temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfigPath, err = writeKubeconfig(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "writing a kubeconfig: %v\n", err)
		return 1
	}
	return m.Run()
}

// writeKubeconfig writes a kubeconfig for an administrator of the envtest API server, so tests
// can drive the real kubectl against it.
func writeKubeconfig(dir string) (string, error) {
	user, err := testEnv.AddUser(envtest.User{Name: "detour-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// newNamespace creates a namespace of its own for one test and deletes it when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "detour-test-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}
