package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// startManager runs a manager with the controllers and a fresh runtime until the test ends, as
// the operator binary does.
func startManager(t *testing.T) *producer.Runtime {
	t.Helper()
	rt, _ := startStoppableManager(t)
	return rt
}

// startStoppableManager is startManager with a stop function, for restart tests; stop waits
// until the manager and its runtime are down and may be called more than once.
func startStoppableManager(t *testing.T) (*producer.Runtime, func()) {
	t.Helper()
	return startManagerWith(t, producer.Options{}, Options{})
}

// startManagerWith is startStoppableManager with runtime and controller options; the runtime's
// metrics and expiry interval are the suite's.
func startManagerWith(t *testing.T, ropts producer.Options, copts Options) (*producer.Runtime, func()) {
	t.Helper()
	ropts.Metrics, ropts.ExpiryInterval = metrics.NewRuntime(), 50*time.Millisecond
	rt := producer.New(ropts)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several tests start a manager in one process; controller names repeat.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// Pods are held slim, as the operator binary holds them.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: PodCache(nil)}},
	})
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	if _, err := Setup(mgr, rt, copts); err != nil {
		t.Fatalf("setting up the controllers: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
			_ = rt.Close()
		})
	}
	t.Cleanup(stop)
	return rt, stop
}

// cluster is a test's RocketMQ cluster: brokersim brokers on loopback and the Pods that point at
// them, as a kubelet would report them.
type cluster struct {
	ns      string
	app     string
	brokers []*brokersim.Broker
	pods    []*corev1.Pod
}

// startCluster starts n brokers named <ns>-broker-<i> and creates a Ready Pod for each. Broker
// names carry the namespace because one runtime serves every test.
func startCluster(t *testing.T, ns string, n int) *cluster {
	t.Helper()
	c := &cluster{ns: ns, app: "rocketmq-" + ns}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-broker-%c", ns, 'a'+i)
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatalf("starting broker %s: %v", name, err)
		}
		t.Cleanup(func() { _ = b.Close() })
		c.brokers = append(c.brokers, b)
		c.pods = append(c.pods, createBrokerPod(t, ns, c.app, name, b.Addr()))
	}
	return c
}

// createBrokerPod creates a master broker Pod whose main port is the broker's and marks it
// Ready with podIP 127.0.0.1, since envtest has no kubelet.
func createBrokerPod(t *testing.T, ns, app, broker, addr string) *corev1.Pod {
	t.Helper()
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: broker + "-master-0",
			Labels: map[string]string{"app": app, LabelBrokerName: broker, LabelBrokerID: "0"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Image: "apache/rocketmq",
			Ports: []corev1.ContainerPort{{Name: "main", ContainerPort: int32(port)}}}}},
	}
	if err := k8sClient.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	t.Cleanup(func() {
		var p corev1.Pod
		if k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &p) == nil && len(p.Finalizers) > 0 {
			p.Finalizers = nil
			_ = k8sClient.Update(ctx, &p)
		}
	})
	setPodReady(t, pod, true)
	return pod
}

// updateObject reads obj afresh, applies change and writes it, again on a conflict: the
// controllers write status and finalizers of the same objects, so a test's read-modify-write
// can lose a race it is not about.
func updateObject(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return k8sClient.Update(ctx, obj)
	})
	if err != nil {
		t.Fatalf("updating %s: %v", client.ObjectKeyFromObject(obj), err)
	}
}

// setPodReady sets the pod's Ready condition as the kubelet would.
func setPodReady(t *testing.T, pod *corev1.Pod, ready bool) {
	t.Helper()
	ctx := context.Background()
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	pod.Status.PodIP = "127.0.0.1"
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := k8sClient.Status().Update(ctx, pod); err != nil {
		t.Fatalf("updating pod status: %v", err)
	}
}

// createTopic creates a Topic selecting the cluster's pods and referencing policy (none if "").
func (c *cluster) createTopic(t *testing.T, name, policy string) *routingv1alpha1.Topic {
	t.Helper()
	topic := &routingv1alpha1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{
			TopicName:      "T_" + c.ns + "_" + name,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.app}},
			WriteQueueNums: 2,
		},
	}
	if policy != "" {
		topic.Spec.FaultPolicyRef = &routingv1alpha1.FaultPolicyReference{Name: policy}
	}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatalf("creating topic: %v", err)
	}
	return topic
}

// createPolicy creates a FaultPolicy with spec.
func createPolicy(t *testing.T, ns, name string, spec routingv1alpha1.FaultPolicySpec) *routingv1alpha1.FaultPolicy {
	t.Helper()
	fp := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := k8sClient.Create(context.Background(), fp); err != nil {
		t.Fatalf("creating fault policy: %v", err)
	}
	return fp
}

// eventually polls cond until it returns nil or the suite's timeout passes, then fails with the
// last error.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	eventuallyWithin(t, eventuallyTimeout, what, cond)
}

// eventuallyWithin is eventually with its own timeout, for state that real processes produce.
func eventuallyWithin(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, eventuallyInterval, what, cond)
}

// topicReady waits until the Topic's Ready condition is True with want brokers in status.
func topicReady(t *testing.T, topic *routingv1alpha1.Topic, want int) {
	t.Helper()
	eventually(t, "topic ready", func() error {
		var got routingv1alpha1.Topic
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || len(got.Status.Brokers) != want {
			return fmt.Errorf("status = %+v", got.Status)
		}
		return nil
	})
}

// getPolicy reads a FaultPolicy from the API server.
func getPolicy(t *testing.T, ns, name string) *routingv1alpha1.FaultPolicy {
	t.Helper()
	var fp routingv1alpha1.FaultPolicy
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &fp); err != nil {
		t.Fatalf("getting fault policy: %v", err)
	}
	return &fp
}

// isolatedIn returns the status entry of broker, or nil.
func isolatedIn(fp *routingv1alpha1.FaultPolicy, broker string) *routingv1alpha1.IsolatedBroker {
	for i := range fp.Status.IsolatedBrokers {
		if fp.Status.IsolatedBrokers[i].BrokerName == broker {
			return &fp.Status.IsolatedBrokers[i]
		}
	}
	return nil
}

// send sends one message by a Topic's route, as the gateway does, with a bounded context.
func send(rt *producer.Runtime, topic *routingv1alpha1.Topic) (*producer.SendResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rt.SendRoute(ctx, routeOf(topic), &producer.Message{Topic: topic.Spec.TopicName, Body: []byte("hello")})
}

// routeOf is the runtime's key of a Topic's route.
func routeOf(topic *routingv1alpha1.Topic) string {
	return scope.TopicRoute(topic.Namespace, topic.Name)
}

// routedTo waits until the runtime routes topic to want brokers.
func routedTo(t *testing.T, rt *producer.Runtime, topic *routingv1alpha1.Topic, want int) {
	t.Helper()
	eventually(t, "route in the runtime", func() error {
		info, ok := rt.RouteInfo(routeOf(topic))
		if !ok {
			return errors.New("no route")
		}
		if len(info.Brokers) != want {
			return fmt.Errorf("route has brokers %+v", info.Brokers)
		}
		return nil
	})
}

// routedCluster is the common start of the end-to-end tests: a manager, three Ready brokers in a
// namespace of their own, a FaultPolicy named policy and a Topic "orders" referencing it, waited
// for until the Topic is Ready and the runtime routes it over all three brokers.
func routedCluster(t *testing.T, policy string, spec routingv1alpha1.FaultPolicySpec) (string, *producer.Runtime, *cluster, *routingv1alpha1.Topic) {
	t.Helper()
	ns := newNamespace(t)
	rt := startManager(t)
	c := startCluster(t, ns, 3)
	createPolicy(t, ns, policy, spec)
	topic := c.createTopic(t, "orders", policy)
	topicReady(t, topic, 3)
	routedTo(t, rt, topic, 3)
	return ns, rt, c, topic
}
