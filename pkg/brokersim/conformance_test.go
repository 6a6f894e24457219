package brokersim_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/detourmq/detour/pkg/brokersim"
)

func init() { rlog.SetLogLevel("error") }

// cluster is two brokers and a name server on loopback.
type cluster struct {
	a, b *brokersim.Broker
	ns   *brokersim.NameServer
}

func startCluster(t testing.TB, opts brokersim.Options, topics map[string]int) *cluster {
	t.Helper()
	a, err := brokersim.StartBrokerWith("broker-a", "127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := brokersim.StartBrokerWith("broker-b", "127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for topic, queues := range topics {
		a.CreateTopic(topic, queues)
		b.CreateTopic(topic, queues)
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", a, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return &cluster{a: a, b: b, ns: ns}
}

var instanceSeq atomic.Int64

// clientGoProducer is the part of rocketmq-client-go's producer the tests use.
type clientGoProducer interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
	Shutdown() error
}

// newClientGoProducer starts a rocketmq-client-go producer pointed at the name server. Each gets
// its own instance name: the library keeps a process-wide client table keyed by it.
func newClientGoProducer(t testing.TB, nameServer string, timeout time.Duration, retries int) clientGoProducer {
	t.Helper()
	n := instanceSeq.Add(1)
	p, err := rmqproducer.NewDefaultProducer(
		rmqproducer.WithNameServer([]string{nameServer}),
		rmqproducer.WithGroupName(fmt.Sprintf("conformance-%d", n)),
		rmqproducer.WithInstanceName(fmt.Sprintf("brokersim-test-%d", n)),
		rmqproducer.WithSendMsgTimeout(timeout),
		rmqproducer.WithRetry(retries),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// sendAll sends n messages from workers goroutines and returns every result by UNIQ_KEY.
func sendAll(t *testing.T, p clientGoProducer, topic string, n, workers int) map[string]*primitive.SendResult {
	t.Helper()
	var (
		mu      sync.Mutex
		results = make(map[string]*primitive.SendResult, n)
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	send := func(i int64) bool {
		msg := primitive.NewMessage(topic, []byte("message-"+strconv.FormatInt(i, 10)))
		msg.WithTag("TagA")
		res, err := p.SendSync(context.Background(), msg)
		if err != nil {
			t.Errorf("message %d: %v", i, err)
			return false
		}
		if res.Status != primitive.SendOK {
			t.Errorf("message %d: status %v", i, res.Status)
			return false
		}
		mu.Lock()
		results[res.MsgID] = res
		mu.Unlock()
		return true
	}
	// The first send goes alone. Concurrent first sends of one rocketmq-client-go producer can
	// fail with "route info not found" before the client has built the topic's publish info (seen
	// on a loaded machine): that is the client's cold start, not what these tests are about.
	if n == 0 || !send(next.Add(1)-1) {
		return results
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || !send(i) {
					return
				}
			}
		}()
	}
	wg.Wait()
	return results
}

// checkStoredExactlyOnce proves that every result's message is stored exactly once, at the
// broker, queue and offset the result names, and that nothing else was stored.
func checkStoredExactlyOnce(t *testing.T, c *cluster, topic string, results map[string]*primitive.SendResult, before int) {
	t.Helper()
	brokers := map[string]*brokersim.Broker{"broker-a": c.a, "broker-b": c.b}
	stored := map[string]int{}
	for _, b := range brokers {
		for key, n := range b.StoredByUniqKey() {
			stored[key] += n
		}
	}
	total := 0
	for _, n := range stored {
		total += n
	}
	if total-before != len(results) {
		t.Fatalf("brokers stored %d new messages for %d successful sends", total-before, len(results))
	}
	for key, res := range results {
		if stored[key] != 1 {
			t.Fatalf("message %s stored %d times", key, stored[key])
		}
		b := brokers[res.MessageQueue.BrokerName]
		msgs := b.Messages(topic, res.MessageQueue.QueueId)
		if res.QueueOffset < 0 || res.QueueOffset >= int64(len(msgs)) {
			t.Fatalf("message %s: offset %d outside queue %d of %s (%d messages)", key, res.QueueOffset, res.MessageQueue.QueueId, b.Name(), len(msgs))
		}
		m := msgs[res.QueueOffset]
		if m.UniqKey != key || m.MsgID != res.OffsetMsgID || m.Tags != "TagA" || !strings.HasPrefix(string(m.Body), "message-") {
			t.Fatalf("message %s: broker has %+v at %s/%d/%d, result says offset id %s", key, m, b.Name(), res.MessageQueue.QueueId, res.QueueOffset, res.OffsetMsgID)
		}
	}
}

// TestRocketMQClientGoProducerConformance drives brokersim with the real rocketmq-client-go v2
// producer: routes come from the name server (in the legacy JSON form that client reads), sends
// go to both brokers, and with one broker black-holed the client's own retries still deliver
// every message exactly once.
func TestRocketMQClientGoProducerConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("sends thousands of messages")
	}
	const topic = "TopicTest"
	c := startCluster(t, brokersim.Options{}, map[string]int{topic: 4})
	p := newClientGoProducer(t, c.ns.Addr(), time.Second, 2)

	t.Run("1000 sends are all SEND_OK and stored exactly once", func(t *testing.T) {
		results := sendAll(t, p, topic, 1000, 8)
		if len(results) != 1000 {
			t.Fatalf("%d distinct successful sends, want 1000", len(results))
		}
		checkStoredExactlyOnce(t, c, topic, results, 0)
		for _, b := range []*brokersim.Broker{c.a, c.b} {
			if s := b.Stats().Topics[topic]; s.Stored == 0 {
				t.Fatalf("%s stored nothing: the client did not spread sends over the route", b.Name())
			}
		}
		if c.ns.RouteQueries() == 0 {
			t.Fatal("the client never asked the name server")
		}
	})

	t.Run("with broker-b black-holed every message is still delivered once", func(t *testing.T) {
		before := len(c.a.StoredByUniqKey()) + len(c.b.StoredByUniqKey())
		storedOnB := c.b.Stats().MessagesStored
		c.b.SetFault(brokersim.Fault{BlackHole: true})
		// Each send that tries broker-b first waits out the 1s timeout; many senders keep the
		// test short.
		results := sendAll(t, p, topic, 1000, 100)
		if len(results) != 1000 {
			t.Fatalf("%d distinct successful sends, want 1000", len(results))
		}
		checkStoredExactlyOnce(t, c, topic, results, before)
		for key, res := range results {
			if res.MessageQueue.BrokerName != "broker-a" {
				t.Fatalf("message %s reported stored on %s, which is black-holed", key, res.MessageQueue.BrokerName)
			}
		}
		sb := c.b.Stats()
		if sb.MessagesStored != storedOnB {
			t.Fatalf("black-holed broker stored %d messages", sb.MessagesStored-storedOnB)
		}
		if sb.Dropped == 0 {
			t.Fatal("no send reached the black-holed broker, so nothing was routed around")
		}
		c.b.SetFault(brokersim.Fault{})
	})

	t.Run("batches go as SEND_BATCH_MESSAGE and are stored message by message", func(t *testing.T) {
		before := c.a.Stats().MessagesStored + c.b.Stats().MessagesStored
		var msgs []*primitive.Message
		for i := 0; i < 10; i++ {
			m := primitive.NewMessage(topic, []byte("batch-"+strconv.Itoa(i)))
			msgs = append(msgs, m)
		}
		res, err := p.SendSync(context.Background(), msgs...)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("batch: %v %v", res, err)
		}
		after := c.a.Stats().MessagesStored + c.b.Stats().MessagesStored
		if after-before != 10 {
			t.Fatalf("batch stored %d messages, want 10", after-before)
		}
		b := map[string]*brokersim.Broker{"broker-a": c.a, "broker-b": c.b}[res.MessageQueue.BrokerName]
		stored := b.Messages(topic, res.MessageQueue.QueueId)
		for i := 0; i < 10; i++ {
			m := stored[res.QueueOffset+int64(i)]
			if string(m.Body) != "batch-"+strconv.Itoa(i) || !m.Batch {
				t.Fatalf("batch message %d stored as %+v", i, m)
			}
		}
	})

	t.Run("an unknown topic is created from TBW102 on first send", func(t *testing.T) {
		res, err := p.SendSync(context.Background(), primitive.NewMessage("AutoCreated", []byte("x")))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", res, err)
		}
		b := map[string]*brokersim.Broker{"broker-a": c.a, "broker-b": c.b}[res.MessageQueue.BrokerName]
		if got := len(b.Stats().Topics["AutoCreated"].Queues); got != 4 {
			t.Fatalf("auto-created topic has %d queues, want 4", got)
		}
	})
}

func TestRocketMQClientGoFailsForUnknownTopicsWithoutAutoCreate(t *testing.T) {
	c := startCluster(t, brokersim.Options{NoAutoCreate: true}, map[string]int{"Known": 2})
	p := newClientGoProducer(t, c.ns.Addr(), time.Second, 0)
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("Unknown", []byte("x"))); err == nil {
		t.Fatal("send to a topic no broker has succeeded")
	}
	res, err := p.SendSync(context.Background(), primitive.NewMessage("Known", []byte("x")))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send to a known topic: %v %v", res, err)
	}
}
