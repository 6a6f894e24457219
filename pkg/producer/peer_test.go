package producer

import (
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/fault"
)

// TestPeerClaimsApplyOnceTheRouteBringsTheBroker proves that another replica's claim on a
// broker this runtime does not know yet is kept and applied as soon as a route brings the broker,
// that it holds the broker out of selection, and that it is not this runtime's own isolation.
func TestPeerClaimsApplyOnceTheRouteBringsTheBroker(t *testing.T) {
	rt := New(Options{HeartbeatInterval: -1})
	defer rt.Close()
	if err := rt.SetPolicy(DefaultPolicy("p")); err != nil {
		t.Fatal(err)
	}
	rt.SetPeerClaims("p", map[string]fault.PeerClaim{"b1": {Reason: fault.ReasonSendFailed, Since: time.Now()}})
	if items := rt.Isolated("p"); len(items) != 0 {
		t.Fatalf("a claim on an unknown broker isolates %+v", items)
	}
	if err := rt.SetRoute(Route{Topic: "T", Policy: "p", Brokers: []BrokerQueues{
		{Broker: "b1", Addr: "127.0.0.1:1", WriteQueues: 1}, {Broker: "b2", Addr: "127.0.0.1:2", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	items := rt.Isolated("p")
	if len(items) != 1 || items[0].Broker != "b1" || !items[0].Peer {
		t.Fatalf("Isolated = %+v, want b1 held by a peer's claim", items)
	}
	if own := rt.OwnIsolated("p"); len(own) != 0 {
		t.Fatalf("OwnIsolated = %+v, want nothing of this runtime's own", own)
	}
	for range 20 {
		if q, ok := rt.SelectQueue("T", ""); !ok || q.Broker != "b2" {
			t.Fatalf("selected %+v, want b2 only", q)
		}
	}
	rt.SetPeerClaims("p", nil)
	if items := rt.Isolated("p"); len(items) != 0 {
		t.Fatalf("the withdrawn claim still isolates %+v", items)
	}
}
