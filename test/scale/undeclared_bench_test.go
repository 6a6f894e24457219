package scale

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

var (
	// undeclaredPublished is how many topics the undeclared world's name server publishes.
	undeclaredPublished = flag.Int("scale.undeclared.published", 100000, "topics BenchmarkUndeclaredTopics' name server publishes")
	// undeclaredUsed is how many of them its clients use, in turn.
	undeclaredUsed = flag.Int("scale.undeclared.used", 1000, "published topics BenchmarkUndeclaredTopics' clients use, in turn")
	// undeclaredHostile is how long the hostile client names random topics.
	undeclaredHostile = flag.Duration("scale.undeclared.hostile", 10*time.Second, "how long BenchmarkUndeclaredTopics' hostile client names random topics")
)

// undeclaredWorld is a manager's view of a Cluster that serves its undeclared topics: a brokersim
// broker (counting, not storing) holding -scale.undeclared.published topics behind a brokersim
// name server, the Cluster (undeclaredTopics: Serve) and no Topic, an informer cache of it, a
// runtime keeping the routes of the topics in use, and the gRPC endpoint resolving through
// front.Resolver as the manager wires it (remembering its answers).
type undeclaredWorld struct {
	ns     string
	topics []string // the published topics clients use, in turn
	nsrv   *brokersim.NameServer
	rt     *producer.Runtime
	grpc   rmqpb.MessagingServiceClient
	// gateway is the send gateway's base URL, http its client.
	gateway string
	http    *http.Client
}

// newUndeclaredWorld builds the world, its runtime bounded by opts.
func newUndeclaredWorld(tb testing.TB, name string, opts producer.UndeclaredTopicOptions) *undeclaredWorld {
	tb.Helper()
	w := &undeclaredWorld{ns: "scale-" + name}
	broker, err := brokersim.StartBrokerWith("broker-a", "127.0.0.1:0", brokersim.Options{CountOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = broker.Close() })
	for i := range *undeclaredPublished {
		topic := fmt.Sprintf("U_%06d", i)
		broker.CreateTopic(topic, 4)
		if i < *undeclaredUsed {
			w.topics = append(w.topics, topic)
		}
	}
	if w.nsrv, err = brokersim.StartNameServer("127.0.0.1:0", broker); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = w.nsrv.Close() })
	createNamespace(tb, w.ns)
	createAll(tb, []client.Object{&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: clusterName,
		Labels: map[string]string{worldLabel: name}},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{w.nsrv.Addr()}, UndeclaredTopics: routingv1alpha1.UndeclaredTopicsServe,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}}})
	reader := startCache(tb, 0, name)
	w.rt = producer.New(producer.Options{UndeclaredTopics: opts})
	tb.Cleanup(func() { _ = w.rt.Close() })
	resolver := newResolver(tb, reader, true)
	resolver.Routes = w.rt
	gs, err := grpcfront.New(grpcfront.Options{Addr: "127.0.0.1:0", Runtime: w.rt, Topics: resolver})
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Sender: w.rt, Topics: resolver, Clusters: resolver})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- gs.Start(ctx) }()
	go func() { done <- gw.Start(ctx) }()
	tb.Cleanup(func() { cancel(); <-done; <-done })
	w.gateway = gw.URL()
	w.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	tb.Cleanup(w.http.CloseIdleConnections)
	conn, err := grpc.NewClient(gs.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	w.grpc = rmqpb.NewMessagingServiceClient(conn)
	return w
}

// request is the SendMessage request of one message to topic, from a client naming no namespace
// (as RocketMQ's SDKs do).
func (w *undeclaredWorld) request(topic string, seq int) *rmqpb.SendMessageRequest {
	req := grpcRequest(&routingv1alpha1.Topic{Spec: routingv1alpha1.TopicSpec{TopicName: topic}}, seq)
	req.Messages[0].Topic.ResourceNamespace = ""
	return req
}

// gatewayURL is where the gateway takes one message to topic through the world's Cluster.
func (w *undeclaredWorld) gatewayURL(topic string) string {
	return w.gateway + "/v1/namespaces/" + w.ns + "/clusters/" + clusterName + "/topics/" + topic + "/messages"
}

// send sends one message to topic through the endpoint and fails unless it was stored.
func (w *undeclaredWorld) send(ctx context.Context, topic string, seq int) error {
	resp, err := w.grpc.SendMessage(ctx, w.request(topic, seq))
	if err != nil {
		return err
	}
	if resp.GetStatus().GetCode() != rmqpb.Code_OK {
		return fmt.Errorf("send to %s: %v", topic, resp.GetStatus())
	}
	return nil
}

// BenchmarkUndeclaredTopics measures what serving a whole cluster costs: clients using
// -scale.undeclared.used (1,000) of the -scale.undeclared.published (100,000) topics a name
// server publishes, none declared, against one declared Topic's world (BenchmarkDoorsAtScale's)
// and a world of as many declared Topics as undeclared topics used (so that what the number of
// topics costs shows apart from what being undeclared costs), paired request by request, every
// resolver remembering its answers as the manager's does:
//   - grpc/paired: ns per request on each side and the median ratio of each to the one Topic's;
//   - gateway/paired: the same through the send gateway, declared Topics by their Kubernetes
//     names, the undeclared topics by their Cluster;
//   - the name server's route queries a second while the undeclared topics are in use (their
//     routes asked once, then again on use once older than the refresh period, 30 s);
//   - heap/route: the runtime's heap per undeclared topic in use, at the used count and at
//     -scale.undeclared.published routes kept at once;
//   - hostile: a client naming random topics for -scale.undeclared.hostile, one request at a
//     time: the name server's queries a second and the heap after it, beside the bound.
func BenchmarkUndeclaredTopics(b *testing.B) {
	needsEnvtest(b)
	used := *undeclaredUsed
	one := newWorld(b, "undeclared-vs-1", layout{namespaces: []string{"scale-undeclared-vs"}, perNS: 1, remember: true})
	many := newWorld(b, fmt.Sprintf("undeclared-vs-%d", used), layout{namespaces: []string{"scale-undeclared-vs-many"}, perNS: used, remember: true})
	w := newUndeclaredWorld(b, "undeclared", producer.UndeclaredTopicOptions{})
	ctx, cancel := context.WithTimeout(grpcContext(context.Background()), time.Hour)
	b.Cleanup(cancel)
	warmStart := time.Now()
	for i, topic := range w.topics {
		if err := w.send(ctx, topic, i); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d undeclared topics first used in %v: %d name-server queries", len(w.topics), time.Since(warmStart).Round(time.Millisecond), w.nsrv.RouteQueries())

	oneReq, manyReqs := grpcRequest(&one.topics[0], 0), make([]*rmqpb.SendMessageRequest, len(many.topics))
	for i := range many.topics {
		manyReqs[i] = grpcRequest(&many.topics[i], i)
	}
	b.Run("grpc/paired", func(b *testing.B) {
		benchUndeclaredPaired(b, w, []func(int) error{
			func(int) error { return one.sendGRPC(ctx, oneReq) },
			func(i int) error { return many.sendGRPC(ctx, manyReqs[i%len(manyReqs)]) },
			func(i int) error { return w.send(ctx, w.topics[i%len(w.topics)], i) },
		})
	})
	body := bytes.Repeat([]byte("x"), 128)
	oneURL, manyURLs := one.gatewayURL(&one.topics[0]), make([]string, len(many.topics))
	for i := range many.topics {
		manyURLs[i] = many.gatewayURL(&many.topics[i])
	}
	b.Run("gateway/paired", func(b *testing.B) {
		benchUndeclaredPaired(b, w, []func(int) error{
			func(int) error { return one.sendGateway(oneURL, body) },
			func(i int) error { return many.sendGateway(manyURLs[i%len(manyURLs)], body) },
			func(i int) error { return one.sendGatewayWith(w.http, w.gatewayURL(w.topics[i%len(w.topics)]), body) },
		})
	})
	// The hostile client first: the heap it is measured against holds no other world's routes.
	b.Run("hostile", func(b *testing.B) { benchHostile(b, w) })
	b.Run("heap-per-route", benchRouteHeap)
}

// pairedSides are the sides benchUndeclaredPaired compares, in the order of its senders.
var pairedSides = []string{"declared-1", "declared-used", "undeclared"}

// benchUndeclaredPaired sends one request per side per iteration (one declared Topic, as many
// declared Topics as undeclared topics used, the undeclared topics), the sides' order rotating,
// and reports the median ns of each, the median ratio of each side's request to the one declared
// Topic's, and the undeclared world's name-server route queries a second meanwhile.
func benchUndeclaredPaired(b *testing.B, w *undeclaredWorld, sends []func(int) error) {
	spent := make([][]float64, len(sends))
	queries, start := w.nsrv.RouteQueries(), time.Now()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k := range sends {
			side := (i + k) % len(sends)
			t0 := time.Now()
			if err := sends[side](i); err != nil {
				b.Fatal(err)
			}
			spent[side] = append(spent[side], float64(time.Since(t0)))
		}
	}
	b.StopTimer()
	for side := range sends {
		b.ReportMetric(median(spent[side]), "ns/req@"+pairedSides[side])
		if side == 0 {
			continue
		}
		ratios := make([]float64, len(spent[side]))
		for i := range ratios {
			ratios[i] = spent[side][i] / spent[0][i]
		}
		b.ReportMetric(median(ratios), pairedSides[side]+"/declared-1")
	}
	b.ReportMetric(float64(w.nsrv.RouteQueries()-queries)/time.Since(start).Seconds(), "nsqueries/s")
}

// heapInUse is the process's live heap after a collection.
func heapInUse() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse)
}

// benchRouteHeap measures the runtime's heap per undeclared route kept: a runtime of its own
// keeps first -scale.undeclared.used, then -scale.undeclared.published routes (its bounds raised
// to hold them all).
// It is measured once, however many iterations the benchmark is given.
func benchRouteHeap(b *testing.B) {
	n := *undeclaredPublished
	w := newUndeclaredWorld(b, fmt.Sprintf("undeclared-heap-%d", time.Now().UnixNano()), producer.UndeclaredTopicOptions{MaxTopics: n, LoadsPerSecond: 1e9, LoadBurst: n})
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("U_%06d", i)
	}
	ctx := context.Background()
	before := heapInUse()
	for i := 0; b.Loop(); i++ {
		if i > 0 {
			continue
		}
		for j, topic := range all {
			spec := front.UndeclaredTarget(&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: clusterName},
				Spec: routingv1alpha1.ClusterSpec{NameServers: []string{w.nsrv.Addr()},
					FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}}, topic).Undeclared
			if err := w.rt.UseRoute(ctx, *spec); err != nil {
				b.Fatal(err)
			}
			if j+1 == *undeclaredUsed {
				b.ReportMetric((heapInUse()-before)/float64(j+1), fmt.Sprintf("B/route@%d", j+1))
			}
		}
	}
	b.ReportMetric((heapInUse()-before)/float64(n), fmt.Sprintf("B/route@%d", n))
}

// benchHostile names random topics, one request at a time, for -scale.undeclared.hostile, through
// w's endpoint: every answer must be TOPIC_NOT_FOUND or TOO_MANY_REQUESTS. It is measured once,
// however many iterations the benchmark is given.
func benchHostile(b *testing.B, w *undeclaredWorld) {
	ctx, cancel := context.WithTimeout(grpcContext(context.Background()), time.Hour)
	defer cancel()
	before, queries := heapInUse(), w.nsrv.RouteQueries()
	start := time.Now()
	requests, busy := 0, 0
	for i := 0; b.Loop(); i++ {
		for time.Since(start) < *undeclaredHostile {
			resp, err := w.grpc.SendMessage(ctx, w.request(fmt.Sprintf("Random_%d_%d", i, requests), requests))
			if err != nil {
				b.Fatal(err)
			}
			switch resp.GetStatus().GetCode() {
			case rmqpb.Code_TOO_MANY_REQUESTS:
				busy++
			case rmqpb.Code_TOPIC_NOT_FOUND:
			default:
				b.Fatalf("a random topic answered %v", resp.GetStatus())
			}
			requests++
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(requests)/elapsed.Seconds(), "requests/s")
	b.ReportMetric(float64(busy)/float64(requests), "busy-share")
	b.ReportMetric(float64(w.nsrv.RouteQueries()-queries)/elapsed.Seconds(), "nsqueries/s")
	b.ReportMetric(heapInUse()-before, "heap-growth-B")
}
