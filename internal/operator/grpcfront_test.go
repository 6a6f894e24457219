package operator

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestGRPCEndpointServesTopicsByTheirRocketMQName proves the manager's gRPC endpoint (TLS by
// default, trusted as the SDKs trust it) finds a Topic by its RocketMQ topic name, answers its
// route with the brokers' own names, and stores a send on one of the Topic's brokers under the
// client's message id.
func TestGRPCEndpointServesTopicsByTheirRocketMQName(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	brokers := []*brokersim.Broker{
		startBroker(t, ns, "grpc-a", map[string]string{"app": "grpc-orders"}),
		startBroker(t, ns, "grpc-b", map[string]string{"app": "grpc-orders"}),
	}
	createTopic(t, ns, "orders", "GrpcOrders", "grpc-orders")
	op := startOperator(t, adminConfig, testOptions(t, ns))
	op.waitForRoute(t, "GrpcOrders", 2)

	c := dialGRPC(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "manager-test@1")

	route, err := c.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "GrpcOrders"}})
	if err != nil {
		t.Fatal(err)
	}
	if route.Status.Code != rmqpb.Code_OK || len(route.MessageQueues) != 4 {
		t.Fatalf("route %v", route)
	}
	for _, q := range route.MessageQueues {
		if !strings.HasPrefix(q.Broker.Name, "grpc-") || q.Permission != rmqpb.Permission_READ_WRITE {
			t.Fatalf("queue %v", q)
		}
	}
	for _, tc := range []struct{ namespace, topic string }{{"", "Refunds"}, {"default", "GrpcOrders"}} {
		r, err := c.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{ResourceNamespace: tc.namespace, Name: tc.topic}})
		if err != nil || r.Status.Code != rmqpb.Code_TOPIC_NOT_FOUND {
			t.Fatalf("route of %s in %q: %v %v", tc.topic, tc.namespace, r, err)
		}
	}

	id := "01C0FFEE00000000000000000000000A"
	resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
		Topic: &rmqpb.Resource{Name: "GrpcOrders"}, Body: []byte("order 1"),
		SystemProperties: &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.Code != rmqpb.Code_OK || resp.Entries[0].MessageId != id {
		t.Fatalf("answer %v", resp)
	}
	if n := storedCounts(brokers...)[id]; n != 1 {
		t.Fatalf("message stored %d times", n)
	}
}

// dialGRPC connects to the operator's gRPC endpoint over TLS, trusting any certificate as the
// SDKs do, closed when the test ends.
func dialGRPC(t *testing.T, op *runningOperator) rmqpb.MessagingServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(op.grpc.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // as the SDKs do
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rmqpb.NewMessagingServiceClient(conn)
}
