package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"google.golang.org/grpc/metadata"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestUndeclaredTopicServedThroughTheGRPCEndpoint proves a Cluster with undeclaredTopics: Serve
// end to end through the manager: a topic its name server publishes and no Topic declares is
// routed and sent through the gRPC endpoint, stored on the Cluster's broker; a topic the name
// server does not know is TOPIC_NOT_FOUND; and the Cluster's status counts the topic in use and
// lists the refused one with its reason. A Cluster serving declared topics only refuses the same
// topic, as before.
func TestUndeclaredTopicServedThroughTheGRPCEndpoint(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	topic := "Undeclared-" + ns
	broker, err := brokersim.StartBroker("undeclared-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	broker.CreateTopic(topic, 2)
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", broker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsrv.Close() })
	cluster := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "whole"},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, UndeclaredTopics: routingv1alpha1.UndeclaredTopicsServe,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}}
	for _, o := range []client.Object{cluster,
		&routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}} {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	op := startOperator(t, adminConfig, testOptions(t, ns))
	c := dialGRPC(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "undeclared-test@1")

	// The manager's cache may not hold the Cluster yet: the answer settles once it does.
	eventually(t, "the undeclared topic's route", func() error {
		r, err := c.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}})
		if err != nil {
			return err
		}
		if r.GetStatus().GetCode() != rmqpb.Code_OK || len(r.MessageQueues) != 2 || r.MessageQueues[0].Broker.Name != "undeclared-a" {
			return fmt.Errorf("route %v", r)
		}
		return nil
	})
	id := "01C0FFEE0000000000000000000000AB"
	resp, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
		Topic: &rmqpb.Resource{Name: topic}, Body: []byte("undeclared 1"),
		SystemProperties: &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL},
	}}})
	if err != nil || resp.Status.Code != rmqpb.Code_OK {
		t.Fatalf("send to the undeclared topic: %v %v", resp, err)
	}
	if n := storedCounts(broker)[id]; n != 1 {
		t.Fatalf("message stored %d times", n)
	}
	r, err := c.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "Nowhere"}})
	if err != nil || r.Status.Code != rmqpb.Code_TOPIC_NOT_FOUND || !strings.Contains(r.Status.Message, "do not publish topic Nowhere") {
		t.Fatalf("route of a topic the name server does not know: %v %v", r, err)
	}

	eventually(t, "the Cluster's status to count the topic in use and the refused one", func() error {
		var got routingv1alpha1.Cluster
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), &got); err != nil {
			return err
		}
		u := got.Status.UndeclaredTopics
		if u == nil || u.InUse == nil || *u.InUse != 1 || u.RefusedCount != 1 || len(u.Refused) != 1 ||
			u.Refused[0].Topic != "Nowhere" || u.Refused[0].Reason != routingv1alpha1.ReasonTopicNotPublished {
			return fmt.Errorf("status.undeclaredTopics %+v", u)
		}
		return nil
	})

	// Serving declared topics only, the same Cluster refuses the topic again.
	var cur routingv1alpha1.Cluster
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cluster), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.UndeclaredTopics = routingv1alpha1.UndeclaredTopicsRefuse
	if err := k8sClient.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the topic refused once the Cluster serves declared topics only", func() error {
		r, err := c.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}})
		if err != nil {
			return err
		}
		if r.GetStatus().GetCode() != rmqpb.Code_TOPIC_NOT_FOUND {
			return fmt.Errorf("route %v", r)
		}
		return nil
	})
	eventually(t, "the runtime to let the Cluster's undeclared routes go", func() error {
		if u := op.rt.UndeclaredInUse(ns+"/whole/", 0); u.Topics != 0 {
			return fmt.Errorf("%d undeclared routes kept", u.Topics)
		}
		return nil
	})
}
