package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// hedgeWins counts the runtime's won hedges and discards every other measurement.
type hedgeWins struct {
	producer.NopMetrics
	won atomic.Int64
}

// Hedged implements producer.Metrics.
func (h *hedgeWins) Hedged(_ string, e producer.HedgeEvent) {
	if e == producer.HedgeWon {
		h.won.Add(1)
	}
}

// TestGatewaySendsAreHedgedByThePolicy proves the gateway's sends get hedging from their Topic's
// policy alone: with one of two brokers turned slow, a send through the gateway is answered by
// its hedge on the other broker.
func TestGatewaySendsAreHedgedByThePolicy(t *testing.T) {
	metrics := &hedgeWins{}
	rt := producer.New(producer.Options{Metrics: metrics})
	t.Cleanup(func() { rt.Close() })
	pol := producer.DefaultPolicy("hedged")
	pol.Hedge = producer.HedgePolicy{Enabled: true, BudgetPercent: producer.MaxHedgeBudgetPercent}
	if err := rt.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	route := producer.Route{Topic: "Orders", Policy: "hedged"}
	brokers := map[string]*brokersim.Broker{}
	for _, name := range []string{"broker-a", "broker-b"} {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers[name] = b
		rt.SetBroker(producer.Broker{Name: name, Addr: b.Addr(), Ready: true})
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: name, WriteQueues: 2})
	}
	if err := rt.SetRoute(route); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Addr: "127.0.0.1:0", Sender: rt,
		Topics: front.NameResolverFunc(func(_ context.Context, ns, name string) (front.Target, error) {
			return front.Target{Topic: "Orders"}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	bed := &testBed{srv: srv, handler: srv.Handler(), rt: rt}
	send := func() {
		t.Helper()
		if res, body := bed.do(t, post(ordersPath, "", []byte("m"), nil)); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d, body %s", res.StatusCode, body)
		}
	}
	for range 20 {
		send()
	}
	brokers["broker-a"].SetFault(brokersim.Fault{Delay: 150 * time.Millisecond})
	for i := 0; i < 10 && metrics.won.Load() == 0; i++ {
		send()
	}
	if metrics.won.Load() == 0 {
		t.Fatal("no send through the gateway was answered by its hedge")
	}
}
