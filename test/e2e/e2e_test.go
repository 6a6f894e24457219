//go:build e2e

// Package e2e runs detour on a real single-node Kubernetes cluster (kubelet, containerd, kube-proxy,
// scheduler, controller manager) with real Apache RocketMQ in pods: deployed as a user deploys it
// (`kubectl apply -k config/default`), then driven through rolling restarts, a frozen broker, the
// loss of the leader, an eviction, a certificate rotation, a black-holed broker under a
// whole-cluster FaultPolicy and that policy's deletion; RocketMQ 5's Java gRPC SDK sends beside
// the gateway's senders through a broker's rolling restart and the frozen broker. `make test-e2e`
// starts the node (hack/e2e-cluster.sh), runs these tests inside its network namespace and tears
// it down.
//
// The tests run in file order and share one deployment: each leaves the cluster as it found it.
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestOperatorRunsAsDeployed: config/default brings up two Ready replicas, exactly one of which
// holds the leader Lease.
func TestOperatorRunsAsDeployed(t *testing.T) {
	k := deploy(t)
	pods := k.managerPods(t)
	if len(pods) != 2 {
		t.Fatalf("want 2 manager pods, got %d", len(pods))
	}
	for _, p := range pods {
		if !podReady(&p) {
			t.Errorf("manager pod %s is not Ready", p.Name)
		}
	}
	leader := k.leader(t)
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == leader }) {
		t.Errorf("the leader Lease is held by %q, not by a manager pod", leader)
	}
	t.Logf("leader: %s", leader)
}

// TestMetricsNeedTheReaderRole: /metrics answers over HTTPS to a token bound to
// detour-metrics-reader, and refuses no token (401) and a token without the role (403).
func TestMetricsNeedTheReaderRole(t *testing.T) {
	k := deploy(t)
	addr, err := k.serviceAddr(operatorNamespace, "detour-controller-manager-metrics-service")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		token  string
		status int
	}{
		{"reader", k.token(t, "scraper"), http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"a token without the role", k.token(t, "stranger"), http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := httpsClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("HTTP %d, want %d: %.200s", resp.StatusCode, tc.status, body)
			}
			if tc.status == http.StatusOK && !bytes.Contains(body, []byte("detour_")) {
				t.Errorf("metrics hold no detour_ series: %.300s", body)
			}
		})
	}
}

// TestGatewaySendsForSendersOnly: the gateway stores a message for a token bound to
// detour-topic-sender in the Topic's namespace and refuses another ServiceAccount's.
func TestGatewaySendsForSendersOnly(t *testing.T) {
	k := deploy(t)
	c := httpsClient()
	r, err := k.send(c, k.token(t, "sender"), "hello from a sender")
	if err != nil || r.status != http.StatusOK || r.MsgID == "" {
		t.Fatalf("sender: %+v, %v", r, err)
	}
	t.Logf("stored as %s on %s", r.MsgID, r.Broker)
	r, err = k.send(c, k.token(t, "stranger"), "hello from a stranger")
	if err != nil || r.status != http.StatusForbidden {
		t.Fatalf("stranger: want 403, got %+v, %v", r, err)
	}
}

// TestFacadeServesReadsAndRefusesWrites: the detour-namesrv Service answers a client's route
// query and refuses, without forwarding, a request that would change the name server
// (DELETE_TOPIC_IN_NAMESRV for the Topic): the route is still served afterwards.
func TestFacadeServesReadsAndRefusesWrites(t *testing.T) {
	k := deploy(t)
	c := remoting.NewClient(remoting.ClientOptions{DialTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := routePerms(c, k.facade, topicName); err != nil {
		t.Fatalf("route of %s through the facade: %v", topicName, err)
	}
	const deleteTopicInNamesrv = 216
	resp, err := c.Invoke(ctx, k.facade, remoting.NewRequest(deleteTopicInNamesrv, map[string]string{"topic": topicName}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.NoPermission {
		t.Fatalf("DELETE_TOPIC_IN_NAMESRV through the facade answered %d (%s), want %d (refused)", resp.Code, resp.Remark, remoting.NoPermission)
	}
	t.Logf("refused: %s", resp.Remark)
	perms, err := routePerms(c, k.facade, topicName)
	if err != nil || len(perms) != len(brokers) {
		t.Fatalf("route of %s after the refused delete: %v %v", topicName, perms, err)
	}
}

// TestGRPCEndpointRefusesAnIllegalTag: a message whose tag holds '|' (the separator of tag
// expressions, so no consumer could subscribe to it) is refused through the detour-grpc Service
// with ILLEGAL_MESSAGE_TAG, as RocketMQ's Proxy refuses it (test/compat's parity cases), and
// nothing is stored.
func TestGRPCEndpointRefusesAnIllegalTag(t *testing.T) {
	k := deploy(t)
	conn, err := grpc.NewClient(k.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the manager's self-signed certificate, inside the node
		MinVersion:         tls.VersionTLS12,
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "e2e-illegal-tag", "x-mq-language", "GOLANG",
		"x-mq-protocol", "v2", "x-mq-client-version", "e2e")
	tag := "a|b"
	resp, err := rmqpb.NewMessagingServiceClient(conn).SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
		Topic: &rmqpb.Resource{Name: topicName}, Body: []byte("never stored"),
		SystemProperties: &rmqpb.SystemProperties{MessageId: fmt.Sprintf("E2E%029X", time.Now().UnixNano()), Tag: &tag,
			MessageType: rmqpb.MessageType_NORMAL, BodyEncoding: rmqpb.Encoding_IDENTITY, BornTimestamp: timestamppb.Now(), BornHost: "10.88.0.1"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetEntries()) != 1 || resp.GetEntries()[0].GetStatus().GetCode() != rmqpb.Code_ILLEGAL_MESSAGE_TAG {
		t.Fatalf("want one entry refused with ILLEGAL_MESSAGE_TAG, got %v", resp)
	}
	t.Logf("refused: %s", resp.GetEntries()[0].GetStatus().GetMessage())
}

// TestRollingRestartsLoseNoSend: three rounds of `kubectl rollout restart` of each broker
// StatefulSet in turn, then a `kubectl delete pod --force` of a broker (no graceful shutdown: the
// name server keeps its old address until the new pod registers), each broker coming back in a new
// pod at a new address, while the gateway's senders, RocketMQ 5's Java gRPC SDK through the
// detour-grpc Service (twice: to the Topic, and to a topic no Topic declares, which the Cluster
// serves as a whole) and RocketMQ's default Java producer through the detour-namesrv facade all
// send: no gateway or gRPC send fails, the Java producer's only failures are on a restarting
// broker before its first route poll after the restart began, and a Java consumer reads back every
// acknowledged message.
func TestRollingRestartsLoseNoSend(t *testing.T) {
	k := deploy(t)
	k.serveUndeclared(t)
	// The senders' JVMs start one after another, each warm before the next starts, and all are
	// sending before the first restart: on a 2-core node, three JVMs starting at once beside two
	// brokers have made a cold client's first sends outlast their 3 s budget on a healthy broker,
	// which no route can help and this test does not measure.
	gr := k.startGRPCTraffic(t)
	gu := k.startGRPCTrafficTo(t, undeclaredTopic)
	gr.waitAcked(t, 10)
	gu.waitAcked(t, 10)
	fc := k.startFacadeTraffic(t)
	tr := k.startTraffic(t, k.token(t, "sender"), 4, 100*time.Millisecond)
	k.waitAcked(t, tr, 40)
	var ds []disruption
	for round := 1; round <= 3; round++ {
		for _, b := range brokers {
			d := k.restartBroker(t, b, "rollout", "restart", "statefulset/"+b)
			t.Logf("round %d: %s restarted, at %s, and Ready again in %v", round, b, k.brokerPod(t, b).Status.PodIP, d.end.Sub(d.start).Round(100*time.Millisecond))
			ds = append(ds, d)
			k.waitBrokerServes(t, tr, b)
		}
	}
	d := k.restartBroker(t, "broker-a", "delete", "pod", "broker-a-0", "--force", "--grace-period=0")
	t.Logf("broker-a-0 deleted with --force, back at %s and Ready in %v", k.brokerPod(t, "broker-a").Status.PodIP, d.end.Sub(d.start).Round(100*time.Millisecond))
	ds = append(ds, d)
	k.waitBrokerServes(t, tr, "broker-a")
	acked := tr.finish(t)
	maps.Copy(acked, gr.finish(t))
	maps.Copy(acked, fc.finish(t, ds))
	ackedUndeclared := gu.finish(t)
	if t.Failed() {
		k.keepRestartDiagnostics(t)
	}
	k.checkReadBack(t, acked)
	k.checkReadBackFrom(t, undeclaredTopic, ackedUndeclared)
}

// keepRestartDiagnostics writes what tells a failed restart run apart to a file in the node's
// log folder, kept after the node is torn down, so the test's own output ends with its failures:
// whose readiness probes failed (did a healthy broker turn NotReady while the other restarted),
// which brokers the runtimes isolated and readmitted and when, and what the managers logged of
// sends, routes and brokers.
func (k *cluster) keepRestartDiagnostics(t *testing.T) {
	t.Helper()
	var b bytes.Buffer
	if out, err := k.kubectl(nil, "-n", namespace, "get", "events", "--field-selector", "reason=Unhealthy"); err == nil {
		fmt.Fprintf(&b, "failed probes in %s:\n%s\n", namespace, out)
	}
	if out, err := k.kubectl(nil, "get", "events", "-A", "--field-selector", "involvedObject.kind=FaultPolicy",
		"--sort-by=.metadata.creationTimestamp", "-o", "custom-columns=TIME:.eventTime,REASON:.reason,MESSAGE:.message"); err == nil {
		fmt.Fprintf(&b, "isolations:\n%s\n", out)
	}
	if out, err := k.kubectl(nil, "-n", operatorNamespace, "logs", "-l", "control-plane=controller-manager", "--tail=-1", "--prefix"); err == nil {
		fmt.Fprintf(&b, "the managers' logs about sends and routes:\n%s", grepLines(out, "Send", "route", "Broker", "broker"))
	}
	path := filepath.Join(k.state, "logs", t.Name()+".log")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Logf("diagnostics not kept (%v):\n%s", err, b.String())
		return
	}
	t.Logf("probe failures, isolations and the managers' logs kept in %s", path)
}

// grepLines keeps the lines of out holding any of words, at most the last 200.
func grepLines(out []byte, words ...string) string {
	var keep []string
	for line := range strings.Lines(string(out)) {
		for _, w := range words {
			if strings.Contains(line, w) {
				keep = append(keep, line)
				break
			}
		}
	}
	return strings.Join(keep[max(0, len(keep)-200):], "")
}

// restartBroker runs a kubectl command that replaces a broker's pod and waits until the broker's
// StatefulSet has a Ready pod that is not the one it had.
func (k *cluster) restartBroker(t *testing.T, broker string, args ...string) disruption {
	t.Helper()
	old := k.brokerPod(t, broker).UID
	d := disruption{broker: broker, start: time.Now()}
	if _, err := k.kubectl(nil, append([]string{"-n", namespace}, args...)...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, broker+" back in a new Ready pod", func() error {
		pod, err := k.cs.CoreV1().Pods(namespace).Get(context.Background(), broker+"-0", metav1.GetOptions{})
		if d.deleting.IsZero() && (err != nil || pod.UID != old || pod.DeletionTimestamp != nil) {
			d.deleting = time.Now() // the old pod terminating or gone: the facade hides it from now
		}
		switch {
		case err != nil:
			return err
		case pod.UID == old:
			return fmt.Errorf("still the old pod")
		case pod.DeletionTimestamp != nil || !podReady(pod):
			return fmt.Errorf("new pod %s not Ready", pod.Status.PodIP)
		}
		return nil
	})
	d.end = time.Now()
	return d
}

// TestFrozenBrokerIsIsolatedAndReturns: a broker's JVM stopped (SIGSTOP from the node) fails its
// readiness probe; detour isolates it before sends fail, through the gateway and from RocketMQ 5's
// Java gRPC SDK alike, `kubectl get faultpolicies` shows why, the broker returns once thawed, and a
// Java consumer reads back every acknowledged message.
func TestFrozenBrokerIsIsolatedAndReturns(t *testing.T) {
	k := deploy(t)
	gr := k.startGRPCTraffic(t)
	tr := k.startTraffic(t, k.token(t, "sender"), 4, 100*time.Millisecond)
	// Start from a healthy cluster: no broker isolated, sends landing on both.
	eventually(t, 2*time.Minute, "no broker isolated before the freeze", func() error {
		if iso := k.faultPolicy(t).Status.IsolatedBrokers; len(iso) > 0 {
			return fmt.Errorf("isolated: %+v", iso)
		}
		return nil
	})
	for _, b := range brokers {
		k.waitBrokerServes(t, tr, b)
	}
	gr.waitAcked(t, 10)
	id := containerID(t, k.brokerPod(t, "broker-b"))
	if err := k.ctr("tasks", "kill", "--signal", "SIGSTOP", id); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := k.ctr("tasks", "kill", "--signal", "SIGCONT", id); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(thaw)
	frozen := time.Now()

	var iso routingv1alpha1.IsolatedBroker
	eventually(t, time.Minute, "broker-b isolated in the FaultPolicy's status", func() error {
		fp := k.faultPolicy(t)
		for _, b := range fp.Status.IsolatedBrokers {
			if b.BrokerName == "broker-b" {
				iso = b
				return nil
			}
		}
		return fmt.Errorf("isolated: %+v", fp.Status.IsolatedBrokers)
	})
	t.Logf("broker-b isolated %v after the freeze, reason %s", time.Since(frozen).Round(100*time.Millisecond), iso.Reason)
	eventually(t, 2*time.Minute, "broker-b's pod NotReady", func() error {
		if podReady(k.brokerPod(t, "broker-b")) {
			return fmt.Errorf("still Ready")
		}
		return nil
	})
	out, err := k.kubectl(nil, "-n", namespace, "get", "faultpolicies", "default")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get faultpolicies:\n%s", out)
	k.waitAcked(t, tr, tr.acknowledged()+40) // sends go on while it is frozen

	thaw()
	eventually(t, 2*time.Minute, "broker-b readmitted", func() error {
		fp := k.faultPolicy(t)
		if len(fp.Status.IsolatedBrokers) > 0 {
			return fmt.Errorf("isolated: %+v", fp.Status.IsolatedBrokers)
		}
		return nil
	})
	k.waitBrokerServes(t, tr, "broker-b")
	acked := tr.finish(t)
	maps.Copy(acked, gr.finish(t))
	k.checkReadBack(t, acked)
}

// TestLeaderLossKeepsTheGatewayAnswering: deleting the leader's pod hands leadership to the other
// replica while the gateway Service keeps answering, and nothing acknowledged is lost.
func TestLeaderLossKeepsTheGatewayAnswering(t *testing.T) {
	k := deploy(t)
	tr := k.startTraffic(t, k.token(t, "sender"), 4, 100*time.Millisecond)
	k.waitAcked(t, tr, 40)
	old := k.leader(t)
	if err := k.cs.CoreV1().Pods(operatorNamespace).Delete(context.Background(), old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 2*time.Minute, "another replica leads", func() error {
		if l := k.leader(t); l == old || l == "" {
			return fmt.Errorf("leader still %q", l)
		}
		return nil
	})
	t.Logf("%s took over from %s in %v", k.leader(t), old, time.Since(start).Round(100*time.Millisecond))
	if _, err := k.kubectl(nil, "-n", operatorNamespace, "rollout", "status", "deployment/detour-controller-manager", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
	k.waitAcked(t, tr, tr.acknowledged()+40)
	acked := tr.finish(t)
	k.checkReadBack(t, acked)
}

// TestEvictionRespectsThePodDisruptionBudget: as `kubectl drain` does (cordon, then evict), the
// first manager pod may go, the second may not while the first has no Ready replacement.
func TestEvictionRespectsThePodDisruptionBudget(t *testing.T) {
	k := deploy(t)
	if _, err := k.kubectl(nil, "cordon", "node0"); err != nil {
		t.Fatal(err)
	}
	uncordon := func() {
		if _, err := k.kubectl(nil, "uncordon", "node0"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(uncordon)
	pods := k.managerPods(t)
	if len(pods) != 2 {
		t.Fatalf("want 2 manager pods, got %d", len(pods))
	}
	evict := func(name string) error {
		return k.cs.PolicyV1().Evictions(operatorNamespace).Evict(context.Background(), &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNamespace}})
	}
	if err := evict(pods[0].Name); err != nil {
		t.Fatalf("evicting the first manager pod: %v", err)
	}
	err := evict(pods[1].Name)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the second manager pod: want 429 (the PodDisruptionBudget), got %v", err)
	}
	t.Logf("second eviction refused: %v", err)
	uncordon()
	if _, err := k.kubectl(nil, "-n", operatorNamespace, "rollout", "status", "deployment/detour-controller-manager", "--timeout=180s"); err != nil {
		t.Fatal(err)
	}
}

// managerPods are the operator's pods that are not being deleted.
func (k *cluster) managerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := k.cs.CoreV1().Pods(operatorNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// leader is the pod holding the leader Lease (its identity is the pod name and a suffix).
func (k *cluster) leader(t *testing.T) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return holder
}

func (k *cluster) faultPolicy(t *testing.T) *routingv1alpha1.FaultPolicy {
	t.Helper()
	var fp routingv1alpha1.FaultPolicy
	if err := k.c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "default"}, &fp); err != nil {
		t.Fatal(err)
	}
	return &fp
}

// waitAcked waits until traffic has n acknowledged sends.
func (k *cluster) waitAcked(t *testing.T, tr *traffic, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d sends acknowledged", n), func() error {
		if got := tr.acknowledged(); got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// waitBrokerServes waits until traffic lands on broker again.
func (k *cluster) waitBrokerServes(t *testing.T, tr *traffic, broker string) {
	t.Helper()
	tr.mu.Lock()
	before := map[string]bool{}
	for id := range tr.acked {
		before[id] = true
	}
	tr.mu.Unlock()
	eventually(t, 2*time.Minute, "sends reach "+broker+" again", func() error {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for id, b := range tr.acked {
			if b == broker && !before[id] {
				return nil
			}
		}
		return fmt.Errorf("no new send on %s", broker)
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerID is the containerd id of a pod's first container.
func containerID(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	_, id, ok := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	if !ok {
		t.Fatalf("pod %s: container id %q", p.Name, p.Status.ContainerStatuses[0].ContainerID)
	}
	return id
}
