package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

// TestSendRouteAsSendsEachKindAsItsOwnEntryPoint proves the doors' one entry point sends a plain
// message, a message group's and a timed one as SendRoute, SendOrderedRoute and SendTimedRoute
// do, and refuses a group with a delivery time before any I/O.
func TestSendRouteAsSendsEachKindAsItsOwnEntryPoint(t *testing.T) {
	r, brokers := timedCluster(t, "V5_5_0")
	ctx := context.Background()
	msg := func() *Message { return &Message{Topic: testTopic, Body: []byte("m")} }
	if _, err := r.SendRouteAs(ctx, testTopic, msg(), Delivery{Group: "g", At: time.Now().Add(time.Minute)}); !errors.Is(err, ErrGroupWithDeliveryTime) {
		t.Fatalf("a group with a time: %v", err)
	}
	if n := brokers[0].Stats().SendsReceived; n != 0 {
		t.Fatalf("a refused delivery reached the broker: %d sends", n)
	}
	if _, err := r.SendRouteAs(ctx, testTopic, msg(), Delivery{}); err != nil {
		t.Fatal(err)
	}
	res, err := r.SendRouteAs(ctx, testTopic, msg(), Delivery{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	stored := brokers[0].Messages(testTopic, res.QueueID)
	if got := stored[len(stored)-1].Properties["__SHARDINGKEY"]; got != "g" {
		t.Fatalf("a group's message carries __SHARDINGKEY %q", got)
	}
	if _, err := r.SendRouteAs(ctx, testTopic, msg(), Delivery{At: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if len(brokers[0].Messages(brokersim.TimerTopic, 0)) != 1 {
		t.Fatal("a timed message is not on the timer topic")
	}
}
