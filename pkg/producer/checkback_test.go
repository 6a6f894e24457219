package producer

import (
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// checkBed is a runtime routing topic T to one brokersim broker named "a" in scope "ns/prod/",
// heartbeating every 50 ms.
func checkBed(t *testing.T) (*Runtime, *brokersim.Broker) {
	t.Helper()
	sim, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	r := New(Options{HeartbeatInterval: 50 * time.Millisecond})
	t.Cleanup(func() { r.Close() })
	r.SetBroker(Broker{Name: "ns/prod/broker-a", Addr: sim.Addr(), Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Brokers: []BrokerQueues{{Broker: "ns/prod/broker-a", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	return r, sim
}

// TestABrokersCheckBackReachesTheCheckerOfItsGroupAndItsEndSettlesIt proves the whole round:
// the runtime heartbeats a checker's group, the broker's CHECK_TRANSACTION_STATE for a half
// message of that group reaches the checker with the runtime's name of the broker, the real
// topic and the body, and an end built from the check's header commits the message into its
// topic, after which the broker checks it no more. The first checker declines the check and the
// second takes it. Before any checker names the group, the broker has no one to ask.
func TestABrokersCheckBackReachesTheCheckerOfItsGroupAndItsEndSettlesIt(t *testing.T) {
	r, sim := checkBed(t)
	res, err := r.SendTransactionRoute(context.Background(), "T", &Message{Topic: "T", Body: []byte("order 7"),
		Properties: map[string]string{"kind": "orphan"}}, "T")
	if err != nil || res.Status != StatusSendOK {
		t.Fatalf("half message: %+v, %v", res, err)
	}
	if n := sim.CheckTransactions(); n != 0 {
		t.Fatalf("the broker checked back %d times before any connection heartbeat the group", n)
	}
	checks := make(chan TransactionCheck, 4)
	declined := 0
	r.AddTransactionChecker(func(TransactionCheck) bool { declined++; return false })
	c := r.AddTransactionChecker(func(tc TransactionCheck) bool { checks <- tc; return true })
	c.SetProducerGroups([]string{"T"})
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the broker checking back with the runtime", func() error {
		if sim.CheckTransactions() == 0 {
			return poll.ErrNotYet
		}
		return nil
	})
	var tc TransactionCheck
	select {
	case tc = <-checks:
	case <-time.After(10 * time.Second):
		t.Fatal("no check reached the checker")
	}
	if tc.Broker != "ns/prod/broker-a" || tc.Message.Topic != "T" || string(tc.Message.Body) != "order 7" ||
		tc.Message.Properties["kind"] != "orphan" || tc.Header.MsgID != res.MsgID || tc.Header.BrokerName != "broker-a" || declined != 1 {
		t.Fatalf("check %+v of message %+v (declined %d times)", tc, tc.Message, declined)
	}
	err = r.EndTransaction(context.Background(), "T", tc.Broker, &remoting.EndTransactionHeader{
		Topic: "T", ProducerGroup: "T", TranStateTableOffset: tc.Header.TranStateTableOffset,
		CommitLogOffset: tc.Header.CommitLogOffset, CommitOrRollback: remoting.TransactionCommit,
		FromTransactionCheck: true, MsgID: tc.Header.MsgID, TransactionID: tc.Header.TransactionID})
	if err != nil {
		t.Fatal(err)
	}
	if got := sim.Messages("T", 0); len(got) != 1 || string(got[0].Body) != "order 7" {
		t.Fatalf("topic T holds %+v after the checked commit, want the message", got)
	}
	if n := sim.CheckTransactions(); n != 0 {
		t.Errorf("the broker checked back %d more times on a settled transaction", n)
	}
}

// TestChecksBeyondTheQueueAreDroppedNotHeld proves a broker flooding the runtime with checks
// while its checker is stuck costs at most maxPendingChecks queued checks: the rest are dropped.
func TestChecksBeyondTheQueueAreDroppedNotHeld(t *testing.T) {
	r := New(Options{HeartbeatInterval: -1})
	defer r.Close()
	release := make(chan struct{})
	defer close(release)
	r.AddTransactionChecker(func(TransactionCheck) bool { <-release; return true })
	req := remoting.NewCheckTransactionStateRequest(&remoting.CheckTransactionStateHeader{}, nil)
	for range 3 * maxPendingChecks {
		if resp := r.serveBrokerRequest("127.0.0.1:1", req); resp != nil {
			t.Fatalf("a oneway check was answered: %+v", resp)
		}
	}
	if n := len(r.checks.pending); n > maxPendingChecks {
		t.Fatalf("%d checks queued, over the bound of %d", n, maxPendingChecks)
	}
}
