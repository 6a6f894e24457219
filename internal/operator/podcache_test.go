package operator

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createBystanderPods creates n pods that are not brokers, each with a manifest of a typical
// application pod's size (annotations, three containers with environment, volumes).
func createBystanderPods(t *testing.T, ns string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d", i),
					Labels:      map[string]string{"app": "shop-frontend", "tier": "web"},
					Annotations: map[string]string{"deploy.example/config": strings.Repeat("c", 2048)}}}
				for c := range 3 {
					ctr := corev1.Container{Name: fmt.Sprintf("c%d", c), Image: "registry.example/app:1.2.3",
						Command: []string{"/app", "--serve", "--port=8080"}}
					for e := range 10 {
						ctr.Env = append(ctr.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", e), Value: strings.Repeat("v", 40)})
					}
					pod.Spec.Containers = append(pod.Spec.Containers, ctr)
					pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", c),
						VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
				}
				if err := k8sClient.Create(context.Background(), pod); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// steadyHeap is the live heap the process keeps: the least of five readings after a collection,
// 200 ms apart, so decode buffers and reconciles still in flight after a start are not counted
// as what the cache holds.
func steadyHeap() uint64 {
	var least uint64
	for i := range 5 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if i == 0 || m.HeapAlloc < least {
			least = m.HeapAlloc
		}
	}
	return least
}

// TestPodCacheHoldsBrokersNotBystanders measures what the manager's pod cache costs in a
// namespace of 2,000 application pods and one broker: whole pods, slim pods (the default) and
// slim pods behind --broker-pod-selector, which caches only the broker. The heap figures are
// logged; the test proves what each configuration caches.
func TestPodCacheHoldsBrokersNotBystanders(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 2,000 pods")
	}
	ns := newNamespace(t)
	startBroker(t, ns, "pc", map[string]string{"app": "pc", "app.kubernetes.io/component": "broker"})
	createTopic(t, ns, "orders", "PodCacheOrders", "pc")
	const bystanders = 2000
	createBystanderPods(t, ns, bystanders)

	measure := func(name string, args []string, hooks ...operatorHooks) (int, float64) {
		t.Helper()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		op := startOperator(t, adminConfig, testOptions(t, ns, args...), hooks...)
		op.waitForRoute(t, "PodCacheOrders", 1)
		var pods corev1.PodList
		if err := op.mgr.GetCache().List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if len(p.ManagedFields) > 0 != (len(hooks) > 0) {
				t.Fatalf("%s: cached pod %s has %d managed fields", name, p.Name, len(p.ManagedFields))
			}
		}
		cached := len(pods.Items)
		pods.Items = nil // the test's own copies are not the cache's cost
		mib := (float64(steadyHeap()) - float64(before.HeapAlloc)) / (1 << 20)
		if err := op.stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d pods cached, live heap %+.1f MiB while running", name, cached, mib)
		return cached, mib
	}
	// Smallest first: a stopped operator's last garbage must not be counted against the next.
	selected, selectedMiB := measure("slim pods, --broker-pod-selector", []string{"--broker-pod-selector=app.kubernetes.io/component=broker"})
	slim, slimMiB := measure("slim pods", nil)
	full, fullMiB := measure("whole pods", nil, operatorHooks{fullPods: true})
	if full != bystanders+1 || slim != bystanders+1 || selected != 1 {
		t.Fatalf("cached %d whole, %d slim, %d selected pods; want %d, %d and only the broker", full, slim, selected, bystanders+1, bystanders+1)
	}
	t.Logf("heap while running, against whole pods: slim %.2f×, selected %.2f×; each cached bystander %.1f KiB slim, %.1f KiB whole",
		slimMiB/fullMiB, selectedMiB/fullMiB, (slimMiB-selectedMiB)*1024/bystanders, (fullMiB-selectedMiB)*1024/bystanders)
}
