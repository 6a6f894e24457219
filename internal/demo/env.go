// Package demo runs detour end to end on one machine: a real kube-apiserver and etcd (the
// envtest control plane), simulated RocketMQ brokers on loopback with broker Pods pointing at
// them, the sample resources, steady traffic through the operator's runtime and a fault script,
// with a live one-line-per-second view.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	detourscheme "github.com/detourmq/detour/internal/scheme"
	"github.com/detourmq/detour/pkg/brokersim"
)

// Labels the demo's broker Pods carry, as the samples' Topic selects them.
const (
	LabelApp        = "app"
	AppBroker       = "rocketmq-broker"
	LabelBrokerName = "routing.detour.dev/broker-name"
	LabelBrokerID   = "routing.detour.dev/broker-id"
	// holdFinalizer keeps a deleted broker Pod around in Terminating, as a kubelet would while
	// the broker shuts down.
	holdFinalizer = "demo.detour.dev/hold"
)

// DefaultBrokers are the brokers the demo starts.
var DefaultBrokers = []string{"broker-a", "broker-b", "broker-c"}

// EnvOptions configure StartEnv.
type EnvOptions struct {
	// AssetsDir holds kube-apiserver and etcd (KUBEBUILDER_ASSETS, when set, wins as in envtest).
	AssetsDir string
	// CRDDir holds the CRDs to install; SamplesDir the resources to apply (every *.yaml).
	CRDDir, SamplesDir string
	// KubeconfigPath is where an administrator kubeconfig for the control plane is written.
	KubeconfigPath string
	// Namespace receives the broker Pods and the samples; "" means "default".
	Namespace string
	// Brokers names the simulated brokers; nil means DefaultBrokers.
	Brokers []string
	// Progress receives one line per start-up step; nil discards.
	Progress io.Writer
	// OnControlPlane, when set, receives Env.Stop as soon as the control plane runs, for a caller
	// that must be able to stop it before StartEnv returns (its processes are in process groups
	// of their own, which a terminal's interrupt does not reach).
	OnControlPlane func(stop func() error)
}

// Env is a running demo environment.
type Env struct {
	// Config is an administrator's connection to the control plane.
	Config *rest.Config
	// Client is an uncached client on Config.
	Client client.Client
	// NameServer knows every broker, for RocketMQ clients that want routes the classic way.
	NameServer *brokersim.NameServer
	// KubeconfigPath is the kubeconfig written for kubectl.
	KubeconfigPath string
	// Namespace holds the broker Pods and the samples.
	Namespace string

	brokers  []*brokersim.Broker
	testEnv  *envtest.Environment
	progress io.Writer

	stopOnce sync.Once
	stopErr  error
}

// StartEnv starts the control plane with the CRDs, the brokers and a name server, creates a
// Ready broker Pod per broker, applies the samples and writes the kubeconfig. On error
// everything started so far is stopped.
func StartEnv(ctx context.Context, opts EnvOptions) (_ *Env, err error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Brokers == nil {
		opts.Brokers = DefaultBrokers
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.AssetsDir == "" && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("no control plane binaries: pass --local-assets \"$(hack/setup-envtest.sh)\" or run `make demo`")
	}
	if _, err := os.Stat(opts.CRDDir); err != nil {
		return nil, fmt.Errorf("the CRDs are not at %s (run from the repository root): %w", opts.CRDDir, err)
	}
	e := &Env{Namespace: opts.Namespace, KubeconfigPath: opts.KubeconfigPath, progress: opts.Progress}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()

	e.step("Starting the control plane (kube-apiserver and etcd) with detour's CRDs")
	e.testEnv = &envtest.Environment{
		BinaryAssetsDirectory: opts.AssetsDir,
		CRDDirectoryPaths:     []string{opts.CRDDir},
		ErrorIfCRDPathMissing: true,
	}
	if e.Config, err = e.testEnv.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	if opts.OnControlPlane != nil {
		opts.OnControlPlane(e.Stop)
	}
	scheme, err := detourscheme.New()
	if err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if err := e.writeKubeconfig(); err != nil {
		return nil, err
	}

	e.step("Starting %d RocketMQ brokers and a name server on 127.0.0.1", len(opts.Brokers))
	for _, name := range opts.Brokers {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("starting broker %s: %w", name, err)
		}
		e.brokers = append(e.brokers, b)
	}
	if e.NameServer, err = brokersim.StartNameServer("127.0.0.1:0", e.brokers...); err != nil {
		return nil, fmt.Errorf("starting the name server: %w", err)
	}

	e.step("Creating a Ready broker Pod for each broker in namespace %s", e.Namespace)
	for _, b := range e.brokers {
		if err := e.createBrokerPod(ctx, b); err != nil {
			return nil, err
		}
	}

	e.step("Applying %s", opts.SamplesDir)
	if err := e.applySamples(ctx, opts.SamplesDir); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) step(format string, args ...any) {
	fmt.Fprintf(e.progress, "demo: "+format+"\n", args...)
}

// Broker returns the broker with the given name, or nil.
func (e *Env) Broker(name string) *brokersim.Broker {
	for _, b := range e.brokers {
		if b.Name() == name {
			return b
		}
	}
	return nil
}

// PodName is the name of a broker's Pod, in the RocketMQ operator's style.
func PodName(broker string) string { return broker + "-master-0" }

func (e *Env) writeKubeconfig() error {
	if e.KubeconfigPath == "" {
		return nil
	}
	user, err := e.testEnv.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding the demo user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(e.KubeconfigPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(e.KubeconfigPath, data, 0o600)
}

// createBrokerPod creates a demo broker Pod, held by the demo's finalizer so that deleting it
// leaves it Terminating.
func (e *Env) createBrokerPod(ctx context.Context, b *brokersim.Broker) error {
	return CreateBrokerPod(ctx, e.Client, e.Namespace, b, nil, holdFinalizer)
}

// CreateBrokerPod creates a Pod for broker b in namespace, labelled as a master of that broker
// (app=rocketmq-broker unless labels say otherwise, plus any other labels given) and, standing
// in for the kubelet, reports it running and Ready on 127.0.0.1 with the broker's port as the
// container port "main".
func CreateBrokerPod(ctx context.Context, c client.Client, namespace string, b *brokersim.Broker, labels map[string]string, finalizers ...string) error {
	_, portText, err := net.SplitHostPort(b.Addr())
	if err != nil {
		return fmt.Errorf("broker %s address %q: %w", b.Name(), b.Addr(), err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("broker %s address %q: %w", b.Name(), b.Addr(), err)
	}
	all := map[string]string{LabelApp: AppBroker, LabelBrokerName: b.Name(), LabelBrokerID: "0"}
	maps.Copy(all, labels)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  namespace,
			Name:       PodName(b.Name()),
			Labels:     all,
			Finalizers: finalizers,
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "broker",
			Image: "apache/rocketmq:5.3.1",
			Ports: []corev1.ContainerPort{{Name: "main", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
		}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  "127.0.0.1",
		PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("reporting pod %s Ready: %w", pod.Name, err)
	}
	return nil
}

// MarkTerminating deletes a broker's Pod; its finalizer keeps it in Terminating (a deletion
// timestamp is set) until ReplacePod.
func (e *Env) MarkTerminating(ctx context.Context, broker string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: PodName(broker)}}
	if err := e.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	return nil
}

// ReplacePod lets a terminating broker Pod go and creates its successor, Ready, as a
// StatefulSet would after a rolling restart.
func (e *Env) ReplacePod(ctx context.Context, broker string) error {
	b := e.Broker(broker)
	if b == nil {
		return fmt.Errorf("no broker %s", broker)
	}
	key := client.ObjectKey{Namespace: e.Namespace, Name: PodName(broker)}
	var pod corev1.Pod
	if err := e.Client.Get(ctx, key, &pod); err == nil {
		if pod.DeletionTimestamp == nil {
			return nil // still the live pod: nothing to replace
		}
		pod.Finalizers = slices.DeleteFunc(pod.Finalizers, func(f string) bool { return f == holdFinalizer })
		if err := e.Client.Update(ctx, &pod); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing pod %s: %w", key.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.Client.Get(ctx, key, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s is still there after its finalizer was removed", key.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return e.createBrokerPod(ctx, b)
}

// applySamples creates every object of every *.yaml file in dir in the demo namespace.
func (e *Env) applySamples(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no samples in %s (run from the repository root)", dir)
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("decoding %s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			obj.SetNamespace(e.Namespace)
			if err := e.Client.Create(ctx, &obj); err != nil {
				return fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), f, err)
			}
		}
	}
	return nil
}

// Stop stops the brokers, the name server and the control plane, and removes the kubeconfig
// (it points at a control plane that no longer exists). It may be called more than once, from
// any goroutine; every call returns the first one's result.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		if e.NameServer != nil {
			errs = append(errs, e.NameServer.Close())
		}
		for _, b := range e.brokers {
			errs = append(errs, b.Close())
		}
		if e.testEnv != nil && e.Config != nil {
			errs = append(errs, e.testEnv.Stop())
		}
		if e.KubeconfigPath != "" {
			if err := os.Remove(e.KubeconfigPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}
