package producer

import (
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

func TestHeartbeatsKeepConnectionsOpenPastTheBrokersIdleTimeout(t *testing.T) {
	cases := []struct {
		name      string
		heartbeat time.Duration
		wantOpen  bool
	}{
		{"heartbeats every 100 ms keep the connection", 100 * time.Millisecond, true},
		{"without heartbeats the broker closes it", -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := brokersim.StartBrokerWith("broker-a", "127.0.0.1:0", brokersim.Options{IdleTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			b.CreateTopic(testTopic, 1)
			r := New(Options{HeartbeatInterval: tc.heartbeat})
			t.Cleanup(func() { r.Close() })
			r.SetBroker(Broker{Name: "broker-a", Addr: b.Addr(), Ready: true})
			if err := r.SetRoute(Route{Topic: testTopic, Brokers: []BrokerQueues{{Broker: "broker-a", WriteQueues: 1}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
			// Wait until the idle timeout has passed three times over, then look.
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && (tc.wantOpen || r.client.Connected(b.Addr())) {
				time.Sleep(20 * time.Millisecond)
			}
			if open := r.client.Connected(b.Addr()); open != tc.wantOpen {
				t.Fatalf("connection open = %v, want %v (broker closed %d idle connections, saw %d heartbeats)",
					open, tc.wantOpen, b.Stats().IdleClosed, b.Stats().Heartbeats)
			}
			if tc.wantOpen && b.Stats().Heartbeats == 0 {
				t.Fatal("no heartbeat reached the broker")
			}
			// Either way the next send succeeds at its first attempt.
			res, err := r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")})
			if err != nil || res.Attempts != 1 {
				t.Fatalf("send after the idle period: %+v, %v", res, err)
			}
		})
	}
}
