package producer

import (
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
)

// restartCase is one moment of a broker's restart in a new pod, at a new address, seen by a
// runtime whose route comes from name servers that are asked only when something calls for it
// (the refresh period is far beyond the test).
type restartCase struct {
	name string
	// others are brokers that answer throughout, beside broker-a.
	others []string
	// registered: the name servers already publish broker-a's new address when the old one
	// starts refusing connections (the new broker registered as it started).
	registered bool
	// podMoved: broker-a's pod was pushed at its old address, then at its new one, Ready.
	podMoved bool
}

// TestABrokerRestartedAtANewAddressCostsNoSend proves that under the Detour preset a broker
// restarted in a new pod at a new address costs no send, even when the route's only broker is the
// restarted one: a connection refused at the route's address asks the name servers at once and
// the send's retry goes to the address they publish now; a pod seen at a new address is sent to
// there while the name servers still publish the old one.
func TestABrokerRestartedAtANewAddressCostsNoSend(t *testing.T) {
	cases := []restartCase{
		{name: "the route's only broker, registered at its new address", registered: true},
		{name: "beside an answering broker, registered at its new address", others: []string{"broker-b"}, registered: true},
		{name: "the route's only broker, its pod moved before it registered", podMoved: true},
		{name: "beside an answering broker, its pod moved before it registered", others: []string{"broker-b"}, podMoved: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startNameServerCluster(t, append([]string{"broker-a"}, tc.others...)...)
			old := c.brokers["broker-a"]
			if tc.podMoved {
				c.r.SetBroker(Broker{Name: "broker-a", Addr: old.Addr(), Ready: true})
			}
			if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Hour}); err != nil {
				t.Fatal(err)
			}
			restarted := restartBroker(t, old)
			if tc.registered {
				c.ns.AddBroker(restarted)
			}
			if tc.podMoved {
				c.r.SetBroker(Broker{Name: "broker-a", Addr: restarted.Addr(), Ready: true})
			}
			const n = 40
			sent := map[string]int{}
			for i := range n {
				res, err := c.r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")})
				if err != nil {
					t.Fatalf("send %d of %d failed: %v", i+1, n, err)
				}
				sent[res.Broker]++
			}
			stored := restarted.Stats().MessagesStored
			for _, o := range tc.others {
				stored += c.brokers[o].Stats().MessagesStored
			}
			if stored != n {
				t.Errorf("%d of %d messages stored by the restarted broker and the others (%v)", stored, n, sent)
			}
			if len(tc.others) == 0 && restarted.Stats().MessagesStored != n {
				t.Errorf("the restarted broker stored %d of %d messages", restarted.Stats().MessagesStored, n)
			}
		})
	}
}

// TestANameServerAddressNoPodHadIsNeverReplaced: a broker that registers an address its pod never
// had (a host port, a Service) keeps it in the route whatever its pod's address does.
func TestANameServerAddressNoPodHadIsNeverReplaced(t *testing.T) {
	c := startNameServerCluster(t, "broker-a")
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	published := c.brokers["broker-a"].Addr()
	c.r.SetBroker(Broker{Name: "broker-a", Addr: "10.0.0.1:10911", Ready: true})
	c.r.SetBroker(Broker{Name: "broker-a", Addr: "10.0.0.2:10911", Ready: true})
	info, _ := c.r.RouteInfo(testTopic)
	if len(info.Brokers) != 1 || info.Brokers[0].Addr != published {
		t.Fatalf("route brokers %+v, want broker-a at the published %s", info.Brokers, published)
	}
	sendSpread(t, c.r, 4)
}

// TestARefusedConnectionAsksTheNameServersOnce: sends that meet a refusing broker ask the name
// servers again, spaced, not once per send.
func TestARefusedConnectionAsksTheNameServersOnce(t *testing.T) {
	c := startNameServerCluster(t, "broker-a", "broker-b")
	if err := c.r.SetNameServerRoute(NameServerRoute{Topic: testTopic, NameServers: []string{c.ns.Addr()}, Refresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	before := c.ns.RouteQueries()
	c.brokers["broker-a"].SetFault(brokersim.Fault{Refuse: true})
	poll.Until(t, 5*time.Second, 10*time.Millisecond, "broker-a's listener closed",
		poll.True(func() bool { return !c.brokers["broker-a"].Listening() }))
	const n = 200
	for i := range n {
		if _, err := c.r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte("m")}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	poll.Until(t, 5*time.Second, 10*time.Millisecond, "a route query after the refusal",
		poll.True(func() bool { return c.ns.RouteQueries() > before }))
	if asked := c.ns.RouteQueries() - before; asked > n/4 {
		t.Errorf("%d sends asked the name servers %d times: refusals must not ask once each", n, asked)
	}
}

// restartBroker closes b, as its old pod's broker exits, and starts a broker of the same name and
// topics at a new address, as its new pod's does.
func restartBroker(t *testing.T, b *brokersim.Broker) *brokersim.Broker {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	nb, err := brokersim.StartBroker(b.Name(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nb.Close() })
	nb.CreateTopic(testTopic, 4)
	return nb
}
