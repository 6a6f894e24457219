// Package scale measures detour's doors and controllers with many Topics against a real API
// server (envtest) and brokersim brokers: a request must cost the same with 10,000 Topics as with
// one, and status writes must stay bounded while brokers flap.
package scale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	detourscheme "github.com/detourmq/detour/internal/scheme"
)

var (
	testScheme *runtime.Scheme
	restConfig *rest.Config
	k8sClient  client.Client
)

// TestMain starts one envtest control plane for the package. Without KUBEBUILDER_ASSETS it fails
// rather than skips, so a green run always means the measurements ran; under -short it starts
// nothing and every test skips.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./test/scale/")
		return 1
	}
	// The caches' and controllers' logs are noise here.
	ctrl.SetLogger(logr.Discard())
	var err error
	if testScheme, err = detourscheme.New(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if restConfig, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting the envtest control plane: %v\n", err)
		_ = env.Stop() // Start can fail after launching the processes
		return 1
	}
	// Creating ten thousand Topics from a few writers at once must not wait on the client's
	// default rate limit (5 per second).
	restConfig.QPS, restConfig.Burst = 2000, 4000
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the envtest control plane: %v\n", err)
		}
	}()
	if k8sClient, err = client.New(restConfig, client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// needsEnvtest skips under -short, where TestMain starts no control plane.
func needsEnvtest(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the envtest control plane; skipped under -short")
	}
}

// createNamespace creates the namespace name for one test or benchmark, deleted when it ends.
func createNamespace(tb testing.TB, name string) {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
}

// clusterTopic is a Topic named name in ns declaring the RocketMQ topic topicName on the Cluster
// cluster, which it does not create (the brokers already hold it).
func clusterTopic(ns, name, topicName, cluster string) *routingv1alpha1.Topic {
	return &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{TopicName: topicName, ClusterRef: &routingv1alpha1.ClusterReference{Name: cluster},
			Create: ptr.To(false), WriteQueueNums: 4, ReadQueueNums: 4, Perm: 6}}
}

// createAll creates objs from a few writers at once, failing on the first error.
func createAll(tb testing.TB, objs []client.Object) {
	tb.Helper()
	const writers = 16
	next := make(chan client.Object)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for o := range next {
				if err := k8sClient.Create(context.Background(), o); err != nil {
					errs <- fmt.Errorf("creating %s: %w", client.ObjectKeyFromObject(o), err)
					return
				}
			}
		})
	}
feed:
	for _, o := range objs {
		select {
		case next <- o:
		case err := <-errs:
			tb.Error(err)
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Error(err)
	}
	if tb.Failed() {
		tb.FailNow()
	}
}
