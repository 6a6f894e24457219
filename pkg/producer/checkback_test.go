package producer

import (
	"context"
	"maps"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
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
	err = r.EndTransaction(context.Background(), "T", HalfMessage{
		Topic: "T", Group: "T", Broker: tc.Broker, TranStateTableOffset: tc.Header.TranStateTableOffset,
		CommitLogOffset: tc.Header.CommitLogOffset, MsgID: tc.Header.MsgID, TransactionID: tc.Header.TransactionID},
		Commit, true)
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

// checkCounts counts the checks a runtime drops, by reason.
type checkCounts struct {
	NopMetrics
	mu      sync.Mutex
	dropped map[string]int
}

// TransactionCheckDropped implements TransactionCheckMetrics.
func (c *checkCounts) TransactionCheckDropped(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropped[reason]++
}

// of reads the count of one reason.
func (c *checkCounts) of(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped[reason]
}

// droppedBed is a runtime that heartbeats nobody and routes topic T to broker "ns/prod/broker-a"
// at 127.0.0.1:10911 (no broker listens: checks are handed to serveBrokerRequest as a connection's
// reader would), counting the checks it drops.
func droppedBed(t *testing.T) (*Runtime, *checkCounts) {
	t.Helper()
	counts := &checkCounts{dropped: map[string]int{}}
	r := New(Options{HeartbeatInterval: -1, Metrics: counts})
	t.Cleanup(func() { r.Close() })
	r.SetBroker(Broker{Name: "ns/prod/broker-a", Addr: "127.0.0.1:10911", Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Brokers: []BrokerQueues{{Broker: "ns/prod/broker-a", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	return r, counts
}

// aCheck is a well-formed check of a half message of T, as broker-a sends it.
func aCheck(t *testing.T) *remoting.Command {
	t.Helper()
	record, err := remoting.EncodeStoredMessage(&remoting.StoredMessage{Topic: "T", Body: []byte("order 7"),
		BornHost: netip.MustParseAddrPort("127.0.0.1:50000"), StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"),
		Properties: map[string]string{"UNIQ_KEY": "7F00000100002A9F0000000000000007"}})
	if err != nil {
		t.Fatal(err)
	}
	return remoting.NewCheckTransactionStateRequest(&remoting.CheckTransactionStateHeader{Topic: "RMQ_SYS_TRANS_HALF_TOPIC",
		MsgID: "7F00000100002A9F0000000000000007", BrokerName: "broker-a"}, record)
}

// TestChecksBeyondTheQueueAreDroppedNotHeld proves a broker flooding the runtime with checks
// while its checker is stuck costs at most maxPendingChecks queued checks: the rest are dropped
// and counted as queue_full, one each.
func TestChecksBeyondTheQueueAreDroppedNotHeld(t *testing.T) {
	r, counts := droppedBed(t)
	release, holding := make(chan struct{}), make(chan struct{}, 1)
	defer close(release)
	r.AddTransactionChecker(func(TransactionCheck) bool {
		select {
		case holding <- struct{}{}:
		default:
		}
		<-release
		return true
	})
	req := aCheck(t)
	r.serveBrokerRequest("127.0.0.1:10911", req)
	select {
	case <-holding: // the worker is stuck in the checker with the first check
	case <-time.After(10 * time.Second):
		t.Fatal("the first check never reached the checker")
	}
	const flood = 3 * maxPendingChecks
	for range flood {
		if resp := r.serveBrokerRequest("127.0.0.1:10911", req); resp != nil {
			t.Fatalf("a oneway check was answered: %+v", resp)
		}
	}
	if n := len(r.checks.pending); n != maxPendingChecks {
		t.Fatalf("%d checks queued, want the bound of %d", n, maxPendingChecks)
	}
	if got := counts.of(CheckDroppedQueueFull); got != flood-maxPendingChecks {
		t.Fatalf("%d checks counted as dropped for a full queue, want %d", got, flood-maxPendingChecks)
	}
}

// TestADroppedCheckIsCountedByWhyItWasDropped proves each check the runtime cannot hand to a
// checker is counted once, by its reason; a check a checker takes counts nothing.
func TestADroppedCheckIsCountedByWhyItWasDropped(t *testing.T) {
	broken := aCheck(t)
	broken.Body = broken.Body[:len(broken.Body)/2]
	noOffsets := aCheck(t)
	delete(noOffsets.ExtFields, "commitLogOffset")
	tests := []struct {
		name     string
		from     string
		req      *remoting.Command
		checkers []bool // whether each checker added takes the check
		want     string // "" when the check is taken
	}{
		{"taken", "127.0.0.1:10911", aCheck(t), []bool{false, true}, ""},
		{"no checker takes it", "127.0.0.1:10911", aCheck(t), []bool{false, false}, CheckDroppedNotTaken},
		{"no checker at all", "127.0.0.1:10911", aCheck(t), nil, CheckDroppedNotTaken},
		{"a broker no route names", "127.0.0.1:10999", aCheck(t), []bool{true}, CheckDroppedUnknownBroker},
		{"a record cut short", "127.0.0.1:10911", broken, []bool{true}, CheckDroppedMalformed},
		{"a header without its offsets", "127.0.0.1:10911", noOffsets, []bool{true}, CheckDroppedMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, counts := droppedBed(t)
			offered := make(chan bool, len(tt.checkers))
			for _, takes := range tt.checkers {
				r.AddTransactionChecker(func(TransactionCheck) bool { offered <- takes; return takes })
			}
			r.serveBrokerRequest(tt.from, tt.req)
			poll.Until(t, 10*time.Second, 5*time.Millisecond, "the check handled", func() error {
				if tt.want != "" && counts.of(tt.want) == 0 {
					return poll.ErrNotYet
				}
				if tt.want == "" && len(offered) < len(tt.checkers) {
					return poll.ErrNotYet
				}
				return nil
			})
			counts.mu.Lock()
			defer counts.mu.Unlock()
			want := map[string]int{}
			if tt.want != "" {
				want[tt.want] = 1
			}
			if !maps.Equal(counts.dropped, want) {
				t.Fatalf("dropped checks counted %v, want %v", counts.dropped, want)
			}
		})
	}
}
