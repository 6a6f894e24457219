package scale

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/controllers"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
	"github.com/detourmq/detour/pkg/scope"
)

// clusterName is the one Cluster of every namespace of a world.
const clusterName = "prod"

// world is one manager's view of one size: namespaces each holding a Cluster and its Topics, a
// cache over them with the spec.topicName index, a runtime routing every Topic to a brokersim
// broker, and the three doors in front of it, as the manager wires them.
type world struct {
	name   string
	topics []routingv1alpha1.Topic
	// fronted are the Topics of the Cluster the facade fronts (the first namespace's).
	fronted []routingv1alpha1.Topic

	grpc    rmqpb.MessagingServiceClient
	gateway string // the gateway's base URL
	http    *http.Client
	facade  string // the facade's address
	// sole is the address of a facade whose view names no Cluster ("the only Cluster there is",
	// the process-wide facade without --namesrv-facade-cluster); "" for a world of several.
	sole  string
	names *remoting.Client
}

// layout is how many Topics each namespace of a world holds.
type layout struct {
	namespaces []string
	perNS      int
	// remember has the doors' resolver remember its answers, as the manager's does
	// (front.Resolver.Remember); without it every request is resolved from the cache.
	remember bool
}

// newWorld builds the world name of l: the API objects, an informer cache holding them all, one
// brokersim broker (counting, not storing) behind a brokersim name server, holding every topic,
// and the runtime and doors in front of them.
func newWorld(tb testing.TB, name string, l layout) *world {
	tb.Helper()
	start := time.Now()
	w := &world{name: name}
	broker, err := brokersim.StartBrokerWith("broker-a", "127.0.0.1:0", brokersim.Options{CountOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = broker.Close() })
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", broker)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = nsrv.Close() })
	var objs []client.Object
	for _, ns := range l.namespaces {
		createNamespace(tb, ns)
		objs = append(objs, &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName,
			Labels: map[string]string{worldLabel: name}},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}}})
		for i := range l.perNS {
			t := clusterTopic(ns, fmt.Sprintf("t%05d", i), fmt.Sprintf("T_%s_%05d", ns, i), clusterName)
			t.Labels = map[string]string{worldLabel: name}
			broker.CreateTopic(t.Spec.TopicName, 4)
			w.topics = append(w.topics, *t)
		}
	}
	w.fronted = w.topics[:l.perNS]
	for i := range w.topics {
		objs = append(objs, &w.topics[i])
	}
	createAll(tb, objs)
	reader := startCache(tb, len(w.topics), name)
	rt := routedRuntime(tb, w.topics, broker.Addr())
	w.startDoors(tb, newResolver(tb, reader, l.remember), rt, types.NamespacedName{Namespace: l.namespaces[0], Name: clusterName}, l.namespaces)
	tb.Logf("world %s: %d Topics created, cached and routed in %v", name, len(w.topics), time.Since(start).Round(time.Millisecond))
	return w
}

// worldLabel labels every object of a world with its name.
const worldLabel = "scale.detour.dev/world"

// startCache runs an informer cache over every namespace, as the manager's (without --namespace)
// is, with front.TopicNameField indexed, until the test ends, and returns it once it holds want
// Topics. It selects the world's objects by their label, so that every world's cache holds its
// own Topics alone, however many the API server holds.
func startCache(tb testing.TB, want int, world string) client.Reader {
	tb.Helper()
	opts := cache.Options{Scheme: testScheme, DefaultLabelSelector: labels.SelectorFromSet(labels.Set{worldLabel: world})}
	c, err := cache.New(restConfig, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.IndexField(ctx, &routingv1alpha1.Topic{}, front.TopicNameField, front.TopicNameValues); err != nil {
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
	// Start the Cluster informer too, as the manager's controllers do before any request.
	var clusters routingv1alpha1.ClusterList
	if err := c.List(ctx, &clusters); err != nil {
		tb.Fatal(err)
	}
	poll.Until(tb, 2*time.Minute, 50*time.Millisecond, "the cache holds every Topic", func() error {
		var list routingv1alpha1.TopicList
		if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
		if len(list.Items) != want {
			return fmt.Errorf("%d of %d Topics cached", len(list.Items), want)
		}
		return nil
	})
	return c
}

// routedRuntime is a runtime routing every Topic, by its route key, to the 4 queues of the broker
// at addr, known in each Topic's Cluster scope as broker-a.
func routedRuntime(tb testing.TB, topics []routingv1alpha1.Topic, addr string) *producer.Runtime {
	tb.Helper()
	rt := producer.New(producer.Options{})
	tb.Cleanup(func() { _ = rt.Close() })
	known := map[string]bool{}
	for i := range topics {
		t := &topics[i]
		id := front.TopicScope(t).Broker("broker-a").String()
		if !known[id] {
			known[id] = true
			rt.SetBroker(producer.Broker{Name: id, Addr: addr, Ready: true})
		}
		err := rt.SetRoute(producer.Route{Key: scope.TopicRoute(t.Namespace, t.Name), Topic: t.Spec.TopicName,
			Brokers: []producer.BrokerQueues{{Broker: id, WriteQueues: 4}}})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return rt
}

// newResolver is the doors' resolver over the cache reader, remembering its answers when asked.
func newResolver(tb testing.TB, reader client.Reader, remember bool) *front.Resolver {
	tb.Helper()
	r := &front.Resolver{Reader: reader}
	if remember {
		ctx, cancel := context.WithCancel(context.Background())
		tb.Cleanup(cancel)
		if err := r.Remember(ctx, reader.(front.Informers)); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// startDoors serves the gRPC endpoint, the HTTP gateway and the facade of the Cluster fronted in
// front of rt, resolving through reader as the manager does, and connects a client to each.
func (w *world) startDoors(tb testing.TB, resolver *front.Resolver, rt *producer.Runtime, fronted types.NamespacedName, namespaces []string) {
	tb.Helper()
	reader := resolver.Reader
	ctx, cancel := context.WithCancel(context.Background())
	var running []chan error
	serve := func(start func(context.Context) error) {
		done := make(chan error, 1)
		go func() { done <- start(ctx) }()
		running = append(running, done)
	}
	tb.Cleanup(func() {
		cancel()
		for _, done := range running {
			<-done
		}
	})
	gs, err := grpcfront.New(grpcfront.Options{Addr: "127.0.0.1:0", Runtime: rt, Topics: resolver})
	if err != nil {
		tb.Fatal(err)
	}
	serve(gs.Start)
	conn, err := grpc.NewClient(gs.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	w.grpc = rmqpb.NewMessagingServiceClient(conn)

	gw, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Sender: rt, Topics: resolver})
	if err != nil {
		tb.Fatal(err)
	}
	serve(gw.Start)
	w.gateway = gw.URL()
	w.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	tb.Cleanup(w.http.CloseIdleConnections)

	fs, err := facade.Start(facade.Options{Addr: "127.0.0.1:0",
		View: &controllers.FacadeView{Reader: reader, Runtime: rt, Cluster: fronted}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = fs.Close() })
	w.facade = fs.Addr()
	if len(namespaces) == 1 {
		sole, err := facade.Start(facade.Options{Addr: "127.0.0.1:0", View: &controllers.FacadeView{Reader: reader, Runtime: rt}})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = sole.Close() })
		w.sole = sole.Addr()
	}
	w.names = remoting.NewClient(remoting.ClientOptions{})
	tb.Cleanup(func() { _ = w.names.Close() })
}

// grpcContext is a call's context as a RocketMQ SDK sends it: its client id and language.
func grpcContext(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "scale-client@1", "x-mq-language", "JAVA")
}

// grpcRequest is the SendMessage request of one message to t's topic, from a client in t's
// namespace.
func grpcRequest(t *routingv1alpha1.Topic, seq int) *rmqpb.SendMessageRequest {
	return &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
		Topic: &rmqpb.Resource{Name: t.Spec.TopicName, ResourceNamespace: t.Namespace},
		Body:  bytes.Repeat([]byte("x"), 128),
		SystemProperties: &rmqpb.SystemProperties{MessageId: fmt.Sprintf("01A0B0C0D0E0F0%018d", seq),
			MessageType: rmqpb.MessageType_NORMAL},
	}}}
}

// sendGRPC sends req through the endpoint and fails unless every entry was stored.
func (w *world) sendGRPC(ctx context.Context, req *rmqpb.SendMessageRequest) error {
	resp, err := w.grpc.SendMessage(ctx, req)
	if err != nil {
		return err
	}
	if resp.GetStatus().GetCode() != rmqpb.Code_OK {
		return fmt.Errorf("send to %s: %v", req.Messages[0].Topic.Name, resp.GetStatus())
	}
	return nil
}

// gatewayURL is where the gateway takes one message for t.
func (w *world) gatewayURL(t *routingv1alpha1.Topic) string {
	return w.gateway + "/v1/namespaces/" + t.Namespace + "/topics/" + t.Name + "/messages"
}

// sendGateway posts body to url and fails unless the gateway answers 200.
func (w *world) sendGateway(url string, body []byte) error {
	return w.sendGatewayWith(w.http, url, body)
}

// sendGatewayWith is sendGateway through client c.
func (w *world) sendGatewayWith(c *http.Client, url string, body []byte) error {
	res, err := c.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var sink bytes.Buffer
	_, _ = sink.ReadFrom(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("gateway %s: %d %s", url, res.StatusCode, sink.String())
	}
	return nil
}

// askRoute asks the facade at addr for req's route and fails unless it answers with one.
func (w *world) askRoute(ctx context.Context, addr string, req *remoting.Command) error {
	resp, err := w.names.Invoke(ctx, addr, req)
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("route: code %d %s", resp.Code, resp.Remark)
	}
	return nil
}
