package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
)

// Under RocketMQ4, when every broker of the route is isolated, pickOneAtLeast's broker is used
// even if the route names it without an address: RocketMQ 4.9.x's producer then fails the attempt
// ("The broker[...] not exist"), isolates the broker for 10 minutes and retries. The healthy but
// isolated broker with an address is not used in its stead.
func TestRocketMQ4FailsAnAttemptOnABrokerWithoutAddress(t *testing.T) {
	b, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.CreateTopic("T", 2)
	clk := fault.NewManualClock(time.Unix(1_700_000_000, 0))
	r := New(Options{Clock: clk, ExpiryInterval: time.Hour})
	t.Cleanup(func() { r.Close() })
	if err := r.SetPolicy(mustPresetPolicy(t, "p", PresetRocketMQ4)); err != nil {
		t.Fatal(err)
	}
	r.SetBroker(Broker{Name: "broker-a", Addr: b.Addr(), Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Policy: "p", Brokers: []BrokerQueues{
		{Broker: "broker-a", WriteQueues: 2}, {Broker: "broker-z", WriteQueues: 2}}}); err != nil {
		t.Fatal(err)
	}
	tol := r.tolerance("p")
	tol.Update("broker-a", 0, fault.TransportError) // isolated for 10 minutes, latency 30 s
	tol.Update("broker-z", 0, fault.Success)        // known and better: pickOneAtLeast's choice

	_, err = r.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")})
	var se *SendError
	var nb *BrokerNotExistError
	if !errors.As(err, &se) || !errors.As(err, &nb) || nb.Broker != "broker-z" {
		t.Fatalf("send ended with %v, want a SendError caused by broker-z's missing address", err)
	}
	for i, tried := range se.BrokersTried {
		if tried != "broker-z" {
			t.Errorf("attempt %d went to %s, want broker-z (pickOneAtLeast's choice every time)", i+1, tried)
		}
	}
	if se.Attempts != 3 || se.Timeout {
		t.Errorf("%d attempts (timeout %v), want 3 retried client errors", se.Attempts, se.Timeout)
	}
	if got := b.Stats().SendsReceived; got != 0 {
		t.Errorf("broker-a received %d sends, want none", got)
	}
	it, _ := tol.Lookup("broker-z")
	if want := clk.Now().Add(10 * time.Minute); tol.Available("broker-z") || !it.Until.Equal(want) {
		t.Errorf("broker-z %+v, want isolated until %v", it, want)
	}
}
