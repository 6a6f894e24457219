package producer

import (
	"context"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestHalfMessageStoredButNotOKIsNotSentAgain proves a half message a broker stored with a
// "stored but" status is returned as it is, even under a policy that sends such messages to
// another broker as well: a second half message would be a second transaction the client never
// ends.
func TestHalfMessageStoredButNotOKIsNotSentAgain(t *testing.T) {
	r, a, b := degradedPair(t, remoting.FlushDiskTimeout, true)
	res, err := r.SendTransactionRoute(context.Background(), "T", &Message{Topic: "T", Body: []byte("x")}, "T")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusFlushDiskTimeout || res.Attempts != 1 || a.count()+b.count() != 1 {
		t.Fatalf("status %q after %d attempts, brokers saw %d sends", res.Status, res.Attempts, a.count()+b.count())
	}
}

// TestHalfMessageCarriesItsGroupAndEndsOnlyOnItsRoute proves the half message's header and
// properties name its producer group, and that an end goes only to a broker of the route.
func TestHalfMessageCarriesItsGroupAndEndsOnlyOnItsRoute(t *testing.T) {
	sim, err := brokersim.StartBroker("a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	r := New(Options{ProducerGroup: "runtime-group"})
	defer r.Close()
	r.SetBroker(Broker{Name: "a", Addr: sim.Addr(), Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Brokers: []BrokerQueues{{Broker: "a", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.SendTransactionRoute(context.Background(), "T", &Message{Topic: "T", Body: []byte("x")}, "tx-group")
	if err != nil {
		t.Fatal(err)
	}
	half := sim.Messages(brokersim.HalfTopic, 0)
	if len(half) != 1 || half[0].ProducerGroup != "tx-group" || half[0].Properties[remoting.PropertyProducerGroup] != "tx-group" ||
		half[0].Properties[remoting.PropertyTransactionPrep] != "true" || res.TransactionID != res.MsgID {
		t.Fatalf("half messages %+v, result %+v", half, res)
	}
	if err := r.EndTransaction(context.Background(), "T", HalfMessage{Group: "tx-group", Broker: "elsewhere"}, Commit, false); err == nil {
		t.Fatal("an end to a broker outside the route was sent")
	}
}
