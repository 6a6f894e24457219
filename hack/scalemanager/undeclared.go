package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/managertest"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// undeclaredCluster is the Cluster that serves its undeclared topics; the only one that does, so
// clients naming no namespace (as RocketMQ's SDKs do) are served by it.
const undeclaredCluster = "whole"

// undeclaredWriters are the gRPC clients asking for routes at once.
const undeclaredWriters = 16

// measureUndeclared measures the manager bin keeping the routes of c.undeclared topics nobody
// declared, each asked for once through its gRPC endpoint: a brokersim broker (counting, not
// storing) holds them behind a name server of its own, and a Cluster with undeclaredTopics: Serve
// names that name server. The manager's bounds on undeclared topics are raised to take them all
// at once (--undeclared-topics-max and the new-topic rate and burst), since the defaults would
// keep 20,000 and admit 200 a second. Memory is read after a garbage collection, once every
// Topic is Ready and the manager has settled, and again with every route kept; the difference
// is given per topic, with the name server's route queries it took.
func measureUndeclared(ctx context.Context, cp *managertest.ControlPlane, ready *readiness, bin string, c config) error {
	topics, nsrv, stop, err := startUndeclaredWorld(c.undeclared)
	if err != nil {
		return err
	}
	defer stop()
	if err := createUndeclaredCluster(ctx, cp, nsrv.Addr()); err != nil {
		return err
	}
	n := strconv.Itoa(c.undeclared)
	m, err := managertest.Start(bin, cp.Kubeconfig, "--undeclared-topics-max="+n,
		"--undeclared-topics-new-burst="+n, "--undeclared-topics-new-per-second="+n)
	if err != nil {
		return err
	}
	defer m.Stop()
	if _, err := ready.waitAll("undeclared topics", m, 20*time.Minute); err != nil {
		return fmt.Errorf("undeclared topics: %w", err)
	}
	<-time.After(c.settle)
	rss0, heap0, err := collectedMemory(m)
	if err != nil {
		return err
	}
	queries0 := nsrv.RouteQueries()
	start := time.Now()
	if err := askRoutes(ctx, m.GRPC, topics); err != nil {
		return err
	}
	took, queries := since(start), nsrv.RouteQueries()-queries0
	rss1, heap1, err := collectedMemory(m)
	if err != nil {
		return err
	}
	per := func(a, b float64) float64 { return (b - a) / 1024 / float64(c.undeclared) }
	fmt.Printf("undeclared topics: %d routes asked for once each through the gRPC endpoint in %v, %d name-server route queries; "+
		"after a collection, RSS %.1f → %.1f MiB (%.2f KiB per topic), heap in use %.1f → %.1f MiB (%.2f KiB per topic)\n",
		c.undeclared, took, queries, rss0/(1<<20), rss1/(1<<20), per(rss0, rss1), heap0/(1<<20), heap1/(1<<20), per(heap0, heap1))
	return nil
}

// startUndeclaredWorld starts a broker holding n topics and a name server publishing it; it
// returns the topics, the name server, and what stops both.
func startUndeclaredWorld(n int) ([]string, *brokersim.NameServer, func(), error) {
	broker, err := brokersim.StartBrokerWith("broker-u", "127.0.0.1:0", brokersim.Options{CountOnly: true, Cluster: undeclaredCluster})
	if err != nil {
		return nil, nil, nil, err
	}
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("U_%06d", i)
		broker.CreateTopic(topics[i], 4)
	}
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", broker)
	if err != nil {
		_ = broker.Close()
		return nil, nil, nil, err
	}
	return topics, nsrv, func() { _ = nsrv.Close(); _ = broker.Close() }, nil
}

// createUndeclaredCluster creates the FaultPolicy that governs the undeclared topics and the
// Cluster that serves them.
func createUndeclaredCluster(ctx context.Context, cp *managertest.ControlPlane, nameServer string) error {
	policy := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "scale-whole"},
		Spec: routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.PresetDetour}}
	cluster := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: undeclaredCluster},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nameServer}, UndeclaredTopics: routingv1alpha1.UndeclaredTopicsServe,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: policy.Name}}}
	for _, o := range []client.Object{policy, cluster} {
		if err := cp.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

// askRoutes asks the gRPC endpoint at addr for the route of every topic, once each, from
// undeclaredWriters clients on one connection, naming no namespace as RocketMQ's SDKs do; it
// fails on the first answer that is not OK.
func askRoutes(ctx context.Context, addr string, topics []string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the manager's own self-signed certificate, on loopback
		MinVersion:         tls.VersionTLS12,
	})))
	if err != nil {
		return err
	}
	defer conn.Close()
	endpoints, err := rmqtest.EndpointsOf(addr)
	if err != nil {
		return err
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "scalemanager", "x-mq-language", "GOLANG",
		"x-mq-protocol", "v2", "x-mq-client-version", "scalemanager")
	svc := rmqpb.NewMessagingServiceClient(conn)
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range undeclaredWriters {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(topics); i = int(next.Add(1)) - 1 {
				if err := askRoute(ctx, svc, endpoints, topics[i]); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// askRoute asks for one topic's route and fails unless it is OK.
func askRoute(ctx context.Context, svc rmqpb.MessagingServiceClient, endpoints *rmqpb.Endpoints, topic string) error {
	resp, err := svc.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}, Endpoints: endpoints})
	if err != nil {
		return fmt.Errorf("route of %s: %w", topic, err)
	}
	if code := resp.GetStatus().GetCode(); code != rmqpb.Code_OK {
		return fmt.Errorf("route of %s: %v %s", topic, code, resp.GetStatus().GetMessage())
	}
	return nil
}

// collectedMemory is the manager's RSS and heap in use right after a garbage collection, which a
// heap profile with gc=1 runs first: without it, the heap in use moves by tens of MiB with the
// collector's timing, as much as the routes being measured.
func collectedMemory(m *managertest.Manager) (rss, heap float64, err error) {
	resp, err := http.Get("http://" + m.Pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, 0, fmt.Errorf("a collection through the profiling endpoint: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("a collection through the profiling endpoint: %s", resp.Status)
	}
	return m.Memory()
}
