package compat_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// grpcConsumeTopic is the topic of the consumer run; serveGRPCForwarding serves it.
const grpcConsumeTopic = "DetourGRPCConsume"

// TestGRPCJavaSimpleConsumerReceivesThroughTheEndpoint runs RocketMQ 5's gRPC SDK
// (rocketmq-client-java 5.2.0, its defaults but the endpoint: TLS on) against detour's endpoint
// over TLS, in front of two real 5.5.0 brokers and the real 5.5.0 Proxy in cluster mode: a
// producer sends through detour (which picks the broker), and a SimpleConsumer, its calls
// forwarded to the Proxy over TLS with the Proxy's self-signed certificate, receives every message
// the producer has a receipt for, once, with its body, and acks each. The canary is the same
// consumer against an endpoint without a Proxy, which must receive nothing.
func TestGRPCJavaSimpleConsumerReceivesThroughTheEndpoint(t *testing.T) {
	const sends = 20
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
	rt := grpcRuntime(t, c, grpcConsumeTopic)
	px := c.StartProxy(rmqtest.ProxyOptions{})
	tlsCfg := selfSignedTLS(t)
	addr := serveGRPCForwarding(t, rt, tlsCfg, &front.Upstream{Addr: px.Addr, TLS: &front.UpstreamTLS{InsecureSkipVerify: true}})
	dir := t.TempDir()

	// The consumer runs from before the first send, so its group exists before the messages do.
	consumed := make(chan rmqtest.GRPCConsumeRun, 1)
	go func() {
		consumed <- rmqtest.ConsumeGRPC(t, dir, rmqtest.GRPCConsumeOptions{Endpoint: addr, Topic: grpcConsumeTopic,
			Group: "detour_compat_grpc_simple", Count: sends, Timeout: 150 * time.Second})
	}()
	acked := ackedSends(t, rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: addr, Topic: grpcConsumeTopic, Normal: sends}), sends)
	run := <-consumed

	want := map[string]string{}
	for _, s := range acked {
		want[s.MsgID] = s.Body
	}
	seen := map[string]bool{}
	var failures []string
	for _, r := range run.Received {
		switch {
		case r.Kind != "received":
			failures = append(failures, r.Kind+": "+r.Error)
		case seen[r.MsgID]:
			t.Errorf("message %s received twice", r.MsgID)
		case want[r.MsgID] != r.Body:
			t.Errorf("received %s with body %q, want %q", r.MsgID, r.Body, want[r.MsgID])
		case !r.Acked:
			t.Errorf("ack of %s failed: %s", r.MsgID, r.Error)
		}
		seen[r.MsgID] = true
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("message %s (%s) was sent but never received", id, want[id])
		}
	}
	if t.Failed() {
		t.Logf("failed receives: %q\nthe consumer's log ends:\n%s", failures, run.Log)
		return
	}
	t.Logf("%d messages sent through detour, received and acked through detour's forwarding to the Proxy %s; %d failed receives along the way: %q",
		len(acked), px.Version, len(failures), failures)

	t.Run("canary: without a Proxy the consumer receives nothing", func(t *testing.T) {
		bare := serveGRPC(t, rt, tlsCfg, nil)
		run := rmqtest.ConsumeGRPC(t, dir, rmqtest.GRPCConsumeOptions{Endpoint: bare, Topic: grpcConsumeTopic,
			Group: "detour_compat_grpc_canary", Count: 1, Timeout: 20 * time.Second})
		for _, r := range run.Received {
			if r.Kind == "received" {
				t.Fatalf("received %s through an endpoint without a Proxy", r.MsgID)
			}
		}
		if len(run.Received) == 0 {
			t.Fatalf("the consumer reported neither a message nor a failure; its log ends:\n%s", run.Log)
		}
		t.Logf("without a Proxy the consumer's first outcome: %s: %s", run.Received[0].Kind, run.Received[0].Error)
	})
}

// serveGRPCForwarding is serveGRPC (TLS only with cfg) whose topics forward consumers to up.
func serveGRPCForwarding(t *testing.T, rt *producer.Runtime, cfg *tls.Config, up *front.Upstream) string {
	t.Helper()
	return serveGRPCWith(t, rt, grpcfront.Options{TLS: cfg}, up)
}
