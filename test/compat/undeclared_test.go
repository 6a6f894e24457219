package compat_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/operator"
	"github.com/detourmq/detour/internal/testsupport/managertest"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/rmqpb"
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
	endpoint := startManagerServingTheCluster(t, c, undeclaredNormalTopic).endpoint

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

// servingManager is the manager the package's tests share (one per process: controller-runtime
// lets a process register a controller name once), run in this process against an envtest API
// server, watching every namespace, its gRPC endpoint serving TLS with a certificate of its own,
// as deployed without one, and plaintext beside it.
type servingManager struct {
	endpoint string
	cp       *managertest.ControlPlane
	// logPath is where the manager logs: the tests that use it end before it does.
	logPath string
	stop    func()
}

// shared is the package's servingManager, started by the first test that asks for it and
// stopped by TestMain.
var shared struct {
	once sync.Once
	m    *servingManager
	err  error
}

// TestMain runs the package's tests and then stops the manager they shared, if one started.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.m != nil {
		shared.m.stop()
	}
	os.Exit(code)
}

// servingManagerOf starts the shared manager once and returns it.
func servingManagerOf(t *testing.T) *servingManager {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./test/compat/")
	}
	shared.once.Do(func() { shared.m, shared.err = startServingManager() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.m
}

// startServingManager starts envtest and the manager.
func startServingManager() (*servingManager, error) {
	// envtest logs through controller-runtime's logger, which would otherwise complain it has none.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "compat-manager-")
	if err != nil {
		return nil, err
	}
	cp, err := managertest.StartControlPlane(filepath.Join("..", ".."), dir)
	if err != nil {
		return nil, err
	}
	m := &servingManager{cp: cp, logPath: filepath.Join(dir, "manager.log")}
	logFile, err := os.Create(m.logPath)
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	op, err := newServingOperator(cp, m, logFile)
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- op.Run(runCtx) }()
	m.stop = func() {
		stop()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "the shared manager: %v (log %s)\n", err, m.logPath)
		}
		_ = cp.Stop()
		_ = logFile.Close()
	}
	return m, nil
}

// newServingOperator builds the manager with its flags, logging to w.
func newServingOperator(cp *managertest.ControlPlane, m *servingManager, w io.Writer) (*operator.Operator, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.endpoint = l.Addr().String()
	l.Close()
	o := &operator.Options{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0", "--gateway-bind-address=0",
		"--grpc-bind-address=" + m.endpoint, "--grpc-allow-plaintext"}); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return operator.New(cp.Config, o, funcr.New(func(prefix, args string) { fmt.Fprintln(w, prefix, args) }, funcr.Options{}))
}

// servedCluster is a real cluster the shared manager serves whole: a Cluster of its name server
// with undeclaredTopics: Serve under a Detour FaultPolicy, in a namespace of its own, and no
// Topic. Only one exists at a time, so a client naming no namespace means it.
type servedCluster struct {
	*servingManager
	namespace string
}

// servedClusters numbers the served clusters' namespaces.
var servedClusters atomic.Int32

// The name of every served cluster's Cluster.
const servingCluster = "rocketmq"

// startManagerServingTheCluster has the shared manager serve c whole until t ends, and returns
// once its gRPC endpoint serves readyTopic, a topic c's brokers hold.
func startManagerServingTheCluster(t *testing.T, c *rmqtest.Cluster, readyTopic string) *servedCluster {
	t.Helper()
	s := &servedCluster{servingManager: servingManagerOf(t), namespace: fmt.Sprintf("moving-%d", servedClusters.Add(1))}
	cluster := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: servingCluster},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{c.NameServer()}, UndeclaredTopics: routingv1alpha1.UndeclaredTopicsServe,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}},
		&routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "default"}},
		cluster,
	} {
		if err := s.cp.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %s: %v", client.ObjectKeyFromObject(o), err)
		}
	}
	t.Cleanup(func() {
		if err := s.cp.Client.Delete(context.Background(), cluster); err != nil {
			t.Errorf("deleting the served Cluster: %v", err)
		}
	})
	waitFor(t, 90*time.Second, "the manager to serve "+readyTopic+" undeclared (its log: "+s.logPath+")", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		route, err := rmqtest.QueryRouteTLS(ctx, s.endpoint, readyTopic)
		return err == nil && route.GetStatus().GetCode() == rmqpb.Code_OK
	})
	return s
}

// setUndeclaredTopics changes whether the served Cluster serves undeclared topics.
func (s *servedCluster) setUndeclaredTopics(t *testing.T, p routingv1alpha1.UndeclaredTopicsPolicy) {
	t.Helper()
	var cl routingv1alpha1.Cluster
	key := client.ObjectKey{Namespace: s.namespace, Name: servingCluster}
	if err := s.cp.Client.Get(context.Background(), key, &cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.UndeclaredTopics = p
	if err := s.cp.Client.Update(context.Background(), &cl); err != nil {
		t.Fatal(err)
	}
}
