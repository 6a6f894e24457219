package compat_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/operator"
	"github.com/detourmq/detour/internal/testsupport/managertest"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// Topics created with mqadmin and declared by no Topic: one of each message type the SDK sends.
const (
	undeclaredNormalTopic = "DetourUndeclaredNormal"
	undeclaredFIFOTopic   = "DetourUndeclaredFIFO"
	undeclaredTxTopic     = "DetourUndeclaredTx"
)

// testUndeclaredTopicsThroughTheManager proves that a team moving from the Proxy needs one
// Cluster resource and no Topic: topics created by hand with RocketMQ's own mqadmin on the real
// cluster c (a NORMAL, a FIFO and a TRANSACTION topic) are served through the manager's gRPC
// endpoint, the manager running against an API server that holds only a Cluster with
// undeclaredTopics: Serve and its FaultPolicy. RocketMQ's Java gRPC SDK sends normal messages,
// FIFO messages in groups, and transactions committed and rolled back, and RocketMQ's Java
// consumer reads every acknowledged message back exactly once, groups in order, nothing rolled
// back stored.
func testUndeclaredTopicsThroughTheManager(t *testing.T, c *rmqtest.Cluster, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for topic, msgType := range map[string]string{undeclaredNormalTopic: "NORMAL", undeclaredFIFOTopic: "FIFO", undeclaredTxTopic: "TRANSACTION"} {
		if err := c.CreateTopicWithMQAdmin(ctx, topic, 2, msgType); err != nil {
			t.Fatal(err)
		}
	}
	endpoint := startManagerServingTheCluster(t, c).endpoint

	run := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: endpoint, Topic: undeclaredNormalTopic, Normal: 10})
	acked := ackedSends(t, run, 10)
	readBackExactly(t, acked, c.Consume(t, context.Background(), undeclaredNormalTopic, len(acked), 90*time.Second))

	const fifo, groups = 12, 3
	run = rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: endpoint, Topic: undeclaredFIFOTopic, FIFO: fifo, Groups: groups})
	acked = ackedSends(t, run, fifo)
	byID := readBackExactly(t, acked, c.Consume(t, context.Background(), undeclaredFIFOTopic, len(acked), 90*time.Second))
	last := groupsInOrder(t, acked, byID, groups)

	tx := transactionCounts{commit: 2, rollback: 2}
	run = rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: endpoint, Topic: undeclaredTxTopic, Commit: tx.commit, Rollback: tx.rollback})
	tx.check(t, c, undeclaredTxTopic, run)
	t.Logf("topics created with mqadmin and declared by no Topic: 10 normal, %d FIFO (groups on %v) and %d transactional messages sent "+
		"through the manager with the Java gRPC SDK, every acknowledged one read back", fifo, last, tx.commit+tx.rollback)
}

// servingManager is the manager serving a whole real cluster: its gRPC endpoint, and the API
// server holding its Cluster (servingNamespace/servingCluster).
type servingManager struct {
	endpoint string
	cp       *managertest.ControlPlane
}

// The namespace and name of the serving manager's Cluster.
const servingNamespace, servingCluster = "moving", "rocketmq"

// setUndeclaredTopics changes whether the manager's Cluster serves undeclared topics.
func (m *servingManager) setUndeclaredTopics(t *testing.T, p routingv1alpha1.UndeclaredTopicsPolicy) {
	t.Helper()
	var cl routingv1alpha1.Cluster
	key := client.ObjectKey{Namespace: servingNamespace, Name: servingCluster}
	if err := m.cp.Client.Get(context.Background(), key, &cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.UndeclaredTopics = p
	if err := m.cp.Client.Update(context.Background(), &cl); err != nil {
		t.Fatal(err)
	}
}

// startManagerServingTheCluster runs the manager in this process, with args, against an envtest
// API server holding a Cluster of c's name server that serves undeclared topics under a Detour
// FaultPolicy, and nothing else; its gRPC endpoint serves TLS with a certificate of its own, as
// deployed without one. Everything stops when t ends.
func startManagerServingTheCluster(t *testing.T, c *rmqtest.Cluster, args ...string) *servingManager {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./test/compat/")
	}
	// envtest logs through controller-runtime's logger, which would otherwise complain it has none.
	ctrllog.SetLogger(logr.Discard())
	cp, err := managertest.StartControlPlane(filepath.Join("..", ".."), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	const ns = servingNamespace
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: servingCluster},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{c.NameServer()}, UndeclaredTopics: routingv1alpha1.UndeclaredTopicsServe,
				FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}},
	} {
		if err := cp.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", client.ObjectKeyFromObject(o), err)
		}
	}
	endpoint := freeLoopbackAddr(t)
	o := &operator.Options{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	if err := fs.Parse(append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--gateway-bind-address=0",
		"--grpc-bind-address=" + endpoint, "--namespace=" + ns}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	op, err := operator.New(cp.Config, o, testr.NewWithOptions(t, testr.Options{Verbosity: 0}))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- op.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the manager: %v", err)
		}
	})
	waitFor(t, 60*time.Second, "the manager's gRPC endpoint to listen", func() bool {
		conn, err := net.DialTimeout("tcp", endpoint, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return &servingManager{endpoint: endpoint, cp: cp}
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr())
}
