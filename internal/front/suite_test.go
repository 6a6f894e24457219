package front

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	detourscheme "github.com/detourmq/detour/internal/scheme"
	"github.com/detourmq/detour/internal/testsupport/poll"
)

var (
	testScheme *runtime.Scheme
	restConfig *rest.Config
	k8sClient  client.Client
)

// TestMain starts one envtest control plane for the package's resolver tests and benchmarks.
// Without KUBEBUILDER_ASSETS they fail rather than skip, so a green run always means they ran;
// under -short it starts nothing, and those that need it skip.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or "+
			"KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./internal/front/")
		return 1
	}
	// The caches' logs are noise here.
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

// needsEnvtest skips a test under -short, where TestMain starts no control plane.
func needsEnvtest(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the envtest control plane; skipped under -short")
	}
}

// namespaceSeq numbers the namespaces of one test process.
var (
	namespaceMu  sync.Mutex
	namespaceSeq int
)

// newNamespace creates a namespace of its own for one test or benchmark.
func newNamespace(tb testing.TB) string {
	tb.Helper()
	namespaceMu.Lock()
	namespaceSeq++
	name := fmt.Sprintf("front-%d-%d", os.Getpid(), namespaceSeq)
	namespaceMu.Unlock()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return name
}

// startCache runs an informer cache over namespaces (none means every namespace) with
// TopicNameField indexed, as the manager's is, until the test ends, and returns it once it
// holds want Topics of those namespaces.
func startCache(tb testing.TB, want int, namespaces ...string) cache.Cache {
	tb.Helper()
	opts := cache.Options{Scheme: testScheme}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(restConfig, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.IndexField(ctx, &routingv1alpha1.Topic{}, TopicNameField, TopicNameValues); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("cache: %v", err)
		}
	})
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("the cache never synced")
	}
	poll.Until(tb, 2*time.Minute, 20*time.Millisecond, "the cache holds every Topic", func() error {
		var list routingv1alpha1.TopicList
		if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		n := 0
		for i := range list.Items {
			if len(namespaces) == 0 || slices.Contains(namespaces, list.Items[i].Namespace) {
				n++
			}
		}
		if n != want {
			return fmt.Errorf("%d of %d Topics cached", n, want)
		}
		return nil
	})
	return c
}

// clusterTopic is a Topic named name in ns declaring the RocketMQ topic topicName on the Cluster
// cluster.
func clusterTopic(ns, name, topicName, cluster string) *routingv1alpha1.Topic {
	return &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{TopicName: topicName, ClusterRef: &routingv1alpha1.ClusterReference{Name: cluster},
			Create: ptr.To(false), WriteQueueNums: 1, ReadQueueNums: 1, Perm: 6}}
}

// podTopic is a Topic named name in ns declaring the RocketMQ topic topicName on the broker pods
// labelled app=name.
func podTopic(ns, name, topicName string) *routingv1alpha1.Topic {
	return &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{TopicName: topicName, WriteQueueNums: 1, ReadQueueNums: 1, Perm: 6,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
}

// proxiedCluster is a Cluster named name in ns whose RocketMQ Proxy serves at proxy.
func proxiedCluster(ns, name, proxy string) *routingv1alpha1.Cluster {
	return &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{"127.0.0.1:9876"},
			Proxy: &routingv1alpha1.ClusterProxy{Address: proxy}}}
}

// create creates every object, failing the test on the first error.
func create(tb testing.TB, objs ...client.Object) {
	tb.Helper()
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			tb.Fatalf("creating %s: %v", client.ObjectKeyFromObject(o), err)
		}
	}
}
