package rmqtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestProxyForwardsGRPCSDKSendsToARealBroker starts the real RocketMQ 5 Proxy in cluster mode in
// front of a real broker and runs RocketMQ 5's gRPC SDK (defaults but the endpoint: TLS on)
// against it: every send has a receipt, and the broker stores exactly the messages sent, which the
// remoting consumer reads back under their receipts' message ids. The canary: a topic the name
// server does not know is not found through the Proxy, so the route the SDK used is the name
// server's. The Proxy's logged configuration shows the harness's options under its field names.
func TestProxyForwardsGRPCSDKSendsToARealBroker(t *testing.T) {
	const topic, sends = "DetourProxyGRPC", 10
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Brokers()[0].CreateTopic(ctx, topic, 2); err != nil {
		t.Fatal(err)
	}
	px := c.StartProxy(rmqtest.ProxyOptions{NameServer: c.NameServer(), RouteRefresh: 5 * time.Second})
	// The Proxy logs the configuration it runs with: the options reached it under its field names.
	for _, want := range []string{`"proxyMode":"cluster"`, `"namesrvAddr":"` + c.NameServer() + `"`, `"topicRouteServiceCacheRefreshSeconds":5,`} {
		if !px.LogContains(want) {
			t.Errorf("the proxy's logged configuration lacks %s", want)
		}
	}

	route, err := px.QueryRoute(ctx, topic)
	if err != nil || route.GetStatus().GetCode() != rmqpb.Code_OK || len(route.GetMessageQueues()) == 0 {
		t.Fatalf("route of %s through the proxy: %v, status %v, %d queues", topic, err, route.GetStatus(), len(route.GetMessageQueues()))
	}
	missing, err := px.QueryRoute(ctx, "DetourProxyNoSuchTopic")
	if err != nil || missing.GetStatus().GetCode() != rmqpb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("route of an unknown topic through the proxy: %v, status %v, want TOPIC_NOT_FOUND", err, missing.GetStatus())
	}

	run := rmqtest.SendGRPC(t, t.TempDir(), rmqtest.GRPCSendOptions{Endpoint: px.Addr, Topic: topic, Normal: sends, Timeout: 2 * time.Minute})
	ids := map[string]string{}
	for _, s := range run.Sends {
		if !s.OK {
			t.Errorf("send %d through the proxy failed: %s", s.Index, s.Error)
			continue
		}
		ids[s.MsgID] = s.Body
	}
	if len(run.Sends) != sends || len(ids) != sends {
		t.Fatalf("%d sends, %d distinct receipts, want %d of each; SDK log:\n%s", len(run.Sends), len(ids), sends, run.Log)
	}
	got := c.Consume(t, context.Background(), topic, sends, 90*time.Second)
	for _, m := range got {
		body, ok := ids[m.MsgID]
		if !ok || string(m.Body) != body {
			t.Errorf("stored message %s (%q) is not one the SDK has a receipt for", m.MsgID, m.Body)
		}
		delete(ids, m.MsgID)
	}
	for id, body := range ids {
		t.Errorf("receipt %s (%s) not stored", id, body)
	}
	t.Logf("%d sends through proxy %s stored on %s", sends, px.Addr, c.Brokers()[0].Name)
}
