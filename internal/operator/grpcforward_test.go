package operator

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// ackingProxy is a gRPC server in a RocketMQ Proxy's seat that answers acks naming the client
// that sent them.
type ackingProxy struct {
	rmqpb.UnimplementedMessagingServiceServer
}

func (ackingProxy) AckMessage(ctx context.Context, _ *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return &rmqpb.AckMessageResponse{Status: &rmqpb.Status{Code: rmqpb.Code_OK, Message: "acked for " + strings.Join(md.Get("x-mq-client-id"), ",")}}, nil
}

func startAckingProxy(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rmqpb.RegisterMessagingServiceServer(srv, ackingProxy{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestGRPCEndpointForwardsConsumersToTheClustersProxy proves the manager hands a Cluster's
// spec.proxy to the gRPC endpoint: a consumer's call on a Topic of that Cluster reaches the
// Proxy, and one on a Cluster without a Proxy is answered UNSUPPORTED naming spec.proxy.
func TestGRPCEndpointForwardsConsumersToTheClustersProxy(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	broker, err := brokersim.StartBroker("fwd-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", broker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsrv.Close() })
	proxy := startAckingProxy(t)
	objs := []client.Object{
		&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxied"},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, Proxy: &routingv1alpha1.ClusterProxy{Address: proxy}}},
		&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}}},
		&routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxied"},
			Spec: routingv1alpha1.TopicSpec{TopicName: "Proxied-" + ns, ClusterRef: &routingv1alpha1.ClusterReference{Name: "proxied"}}},
		&routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"},
			Spec: routingv1alpha1.TopicSpec{TopicName: "Bare-" + ns, ClusterRef: &routingv1alpha1.ClusterReference{Name: "bare"}}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	op := startOperator(t, adminConfig, testOptions(t, ns))
	c := dialGRPC(t, op)
	for _, tc := range []struct {
		name     string
		topic    string
		wantCode rmqpb.Code
		wantText string
	}{
		{"a Cluster with a Proxy forwards", "Proxied-" + ns, rmqpb.Code_OK, "acked for reader-1"},
		{"a Cluster without one answers UNSUPPORTED", "Bare-" + ns, rmqpb.Code_UNSUPPORTED, "spec.proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientID := "reader-1"
			if tc.wantCode != rmqpb.Code_OK {
				clientID = "reader-2"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", clientID)
			// The manager's cache may not hold the new objects yet: the answer settles once it does.
			eventually(t, "the consumer's ack to be answered as wanted", func() error {
				r, err := c.AckMessage(ctx, &rmqpb.AckMessageRequest{Topic: &rmqpb.Resource{Name: tc.topic}})
				if err != nil {
					return err
				}
				if r.GetStatus().GetCode() != tc.wantCode || !strings.Contains(r.GetStatus().GetMessage(), tc.wantText) {
					return &answerErr{r.GetStatus()}
				}
				return nil
			})
		})
	}
}

type answerErr struct{ st *rmqpb.Status }

func (e *answerErr) Error() string { return "answered " + e.st.String() }
