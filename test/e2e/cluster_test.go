//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/poll"
)

// What the suite deploys. The operator goes where config/default puts it; RocketMQ and the
// resources a user declares go in a namespace of their own.
const (
	operatorNamespace = "detour-system"
	namespace         = "rocketmq"
	topicName         = "E2EOrders"
	managerImage      = "detour.e2e/manager:dev"
	leaseName         = "detour-manager.routing.detour.dev"
)

// brokers are the broker StatefulSets, one master each.
var brokers = []string{"broker-a", "broker-b"}

// cluster is the running node and what the suite deployed on it.
type cluster struct {
	kubeconfig string
	// state is the node's folder (containerd's socket, the stand-in for persistent volumes).
	state string
	// rocketmqImage is the RocketMQ image the node imported.
	rocketmqImage string
	cs            *kubernetes.Clientset
	c             client.Client
	// nameServer is the RocketMQ name-server Service's address; facade the detour-namesrv
	// Service's; gateway the send gateway's base URL; grpc the detour-grpc Service's address.
	nameServer, facade, gateway, grpc string
}

// TestMain runs the suite and then stops the suite's Prometheus, should a test have started it.
func TestMain(m *testing.M) {
	code := m.Run()
	stopPrometheus()
	os.Exit(code)
}

var (
	deployOnce sync.Once
	deployed   *cluster
	deployErr  error
)

// deploy returns the cluster with the operator, RocketMQ and a user's resources deployed, doing
// it on the first call. The node is started by hack/e2e-cluster.sh (make test-e2e), which also
// tears it down.
func deploy(t *testing.T) *cluster {
	t.Helper()
	deployOnce.Do(func() {
		deployed, deployErr = deployAll(t)
		if deployErr != nil && deployed != nil {
			deployed.describe(t)
		}
	})
	if deployErr != nil {
		t.Fatalf("deploying: %v", deployErr)
	}
	return deployed
}

func deployAll(t *testing.T) (*cluster, error) {
	k := &cluster{
		kubeconfig:    os.Getenv("DETOUR_E2E_KUBECONFIG"),
		state:         os.Getenv("DETOUR_E2E_STATE"),
		rocketmqImage: os.Getenv("DETOUR_E2E_ROCKETMQ_IMAGE"),
	}
	if k.kubeconfig == "" || k.state == "" || k.rocketmqImage == "" {
		return nil, fmt.Errorf("DETOUR_E2E_KUBECONFIG, DETOUR_E2E_STATE and DETOUR_E2E_ROCKETMQ_IMAGE are unset: run the suite with `make test-e2e`, which starts the node")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		return nil, err
	}
	if k.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = routingv1alpha1.AddToScheme(scheme)
	if k.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}

	deployed = k // for describe, should a step fail
	start := time.Now()
	if err := k.deployOperator(t); err != nil {
		return k, err
	}
	t.Logf("operator deployed and both replicas Ready in %v", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	if err := k.deployRocketMQ(t); err != nil {
		return k, err
	}
	t.Logf("RocketMQ (name server, %d brokers) Ready in %v", len(brokers), time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	if err := k.deployResources(t); err != nil {
		return k, err
	}
	t.Logf("Cluster, FaultPolicy and Topic Ready in %v", time.Since(start).Round(100*time.Millisecond))
	// From here on, Prometheus scrapes the managers through every test.
	if _, err := k.startPrometheus(t); err != nil {
		return k, err
	}
	return k, nil
}

// deployOperator applies config/default as a user would, with only the image overridden.
func (k *cluster) deployOperator(t *testing.T) error {
	overlay := t.TempDir()
	base, err := filepath.Abs("../../config/default")
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(overlay, base)
	if err != nil {
		return err
	}
	name, tag, _ := strings.Cut(managerImage, ":")
	kustomization := fmt.Sprintf("resources:\n- %s\nimages:\n- name: detour\n  newName: %s\n  newTag: %s\n", rel, name, tag)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return err
	}
	if _, err := k.kubectl(nil, "apply", "--server-side", "-k", overlay); err != nil {
		return err
	}
	_, err = k.kubectl(nil, "-n", operatorNamespace, "rollout", "status", "deployment/detour-controller-manager", "--timeout=180s")
	return err
}

// deployRocketMQ applies testdata/rocketmq.yaml and waits for every StatefulSet.
func (k *cluster) deployRocketMQ(t *testing.T) error {
	manifest, err := render("testdata/rocketmq.yaml", map[string]any{
		"Namespace": namespace, "Image": k.rocketmqImage, "Brokers": brokers,
		"Volumes": filepath.Join(k.state, "volumes"),
	})
	if err != nil {
		return err
	}
	if _, err := k.kubectl(manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	for _, sts := range append([]string{"namesrv"}, brokers...) {
		if _, err := k.kubectl(nil, "-n", namespace, "rollout", "status", "statefulset/"+sts, "--timeout=180s"); err != nil {
			return err
		}
	}
	if k.nameServer, err = k.serviceAddr(namespace, "namesrv"); err != nil {
		return err
	}
	if k.facade, err = k.serviceAddr(operatorNamespace, "detour-namesrv"); err != nil {
		return err
	}
	gw, err := k.serviceAddr(operatorNamespace, "detour-gateway")
	if err != nil {
		return err
	}
	k.gateway = "https://" + gw
	if k.grpc, err = k.serviceAddr(operatorNamespace, "detour-grpc"); err != nil {
		return err
	}
	return nil
}

// deployResources applies the Cluster, FaultPolicy, Topic and the senders' RBAC, and waits until
// the Topic is Ready (created on every master and routed).
func (k *cluster) deployResources(t *testing.T) error {
	manifest, err := render("testdata/detour.yaml", map[string]any{
		"Namespace": namespace, "NameServer": k.nameServer, "Topic": topicName,
	})
	if err != nil {
		return err
	}
	if _, err := k.kubectl(manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := k.kubectl(nil, "-n", namespace, "wait", "--for=condition=Ready", "topics.routing.detour.dev/orders", "--timeout=180s"); err != nil {
		return err
	}
	return k.waitEveryReplicaRoutes(t)
}

// waitEveryReplicaRoutes sends through each manager pod's gateway directly (not the Service)
// until every replica routes the Topic: Ready is written by the leader from its own runtime, and
// the other replica resolves the route the leader's topic creation published on its own.
func (k *cluster) waitEveryReplicaRoutes(t *testing.T) error {
	pods, err := k.cs.CoreV1().Pods(operatorNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
	if err != nil {
		return err
	}
	out, err := k.kubectl(nil, "-n", namespace, "create", "token", "sender", "--duration=10m")
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(out))
	c := httpsClient()
	start := time.Now()
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue // on its way out; only the replicas that stay must route
		}
		url := fmt.Sprintf("https://%s:8080", p.Status.PodIP)
		var last string
		for {
			r, err := k.sendTo(c, url, token, "routed?")
			if err == nil && r.status == http.StatusOK {
				break
			}
			last = fmt.Sprintf("%+v %v", r, err)
			if time.Since(start) > 2*time.Minute {
				return fmt.Errorf("the gateway of %s does not route the Topic: %s", p.Name, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("every replica's gateway routed the Topic %v after Ready", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// describe logs what a user would look at when something does not come up: every pod, the
// events, and the logs of pods that are not Ready.
func (k *cluster) describe(t *testing.T) {
	t.Helper()
	out, _ := k.kubectl(nil, "get", "pods,statefulsets,deployments,topics,clusters,faultpolicies", "-A", "-o", "wide")
	t.Logf("state:\n%s", out)
	out, _ = k.kubectl(nil, "get", "events", "-A", "--sort-by=.lastTimestamp")
	t.Logf("events:\n%s", tail(out, 60))
	pods, err := k.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if podReady(&p) || p.Namespace == "kube-system" {
			continue
		}
		out, _ := k.kubectl(nil, "-n", p.Namespace, "logs", p.Name, "--all-containers", "--tail=40")
		t.Logf("logs of %s/%s:\n%s", p.Namespace, p.Name, out)
	}
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// render executes a testdata template.
func render(path string, data any) ([]byte, error) {
	tmpl, err := template.ParseFiles(path)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = tmpl.Execute(&b, data)
	return b.Bytes(), err
}

// serviceAddr is a Service's cluster IP and first port.
func (k *cluster) serviceAddr(ns, name string) (string, error) {
	svc, err := k.cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), nil
}

// kubectl runs the real kubectl against the node, as a user would.
func (k *cluster) kubectl(stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes(), nil
}

// ctr runs containerd's client against the node's containerd, in the namespace of Kubernetes'
// containers.
func (k *cluster) ctr(args ...string) error {
	cmd := exec.Command("ctr", append([]string{"--address", filepath.Join(k.state, "containerd", "containerd.sock"), "-n", "k8s.io"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// token is a fresh token of a ServiceAccount in the RocketMQ namespace.
func (k *cluster) token(t *testing.T, sa string) string {
	t.Helper()
	out, err := k.kubectl(nil, "-n", namespace, "create", "token", sa, "--duration=1h")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// brokerPod is the running pod of a broker StatefulSet.
func (k *cluster) brokerPod(t *testing.T, broker string) *corev1.Pod {
	t.Helper()
	pod, err := k.cs.CoreV1().Pods(namespace).Get(context.Background(), broker+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// eventually polls cond every 200 ms until it returns nil or timeout passes, then fails with its
// last error.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, 200*time.Millisecond, what, cond)
}
