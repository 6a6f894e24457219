package producer

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// batchOf returns n messages to topic with bodies "m0".."m<n-1>", a tag and a key each.
func batchOf(topic string, n int) []*Message {
	msgs := make([]*Message, n)
	for i := range msgs {
		msgs[i] = &Message{Topic: topic, Tags: "t" + strconv.Itoa(i), Keys: "k" + strconv.Itoa(i), Body: []byte("m" + strconv.Itoa(i)),
			Properties: map[string]string{"seq": strconv.Itoa(i)}}
	}
	return msgs
}

func TestBatchIsStoredOnOneQueueInOrderWithEachMessagesID(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"})
	msgs := batchOf(testTopic, 5)
	msgs[3].Properties[remoting.PropertyUniqKey] = "CALLER0000000000000000000000000A" // kept, as Send keeps it
	res, err := c.r.SendBatch(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.MsgIDs) != 5 || res.MsgID != strings.Join(res.MsgIDs, ",") || res.MsgIDs[3] != msgs[3].Properties[remoting.PropertyUniqKey] {
		t.Fatalf("ids %q, joined %q", res.MsgIDs, res.MsgID)
	}
	if len(res.OffsetMsgIDs) != 5 || res.OffsetMsgID != strings.Join(res.OffsetMsgIDs, ",") || res.Status != StatusSendOK || res.Attempts != 1 {
		t.Fatalf("result %+v", res)
	}
	stored := c.brokers[res.Broker].Messages(testTopic, res.QueueID)
	if len(stored) != 5 || c.stored() != 5 {
		t.Fatalf("stored %d on the answered queue, %d in all; want the 5 of the batch on one queue", len(stored), c.stored())
	}
	for i, m := range stored {
		want := msgs[i]
		if !m.Batch || string(m.Body) != string(want.Body) || m.Tags != want.Tags || m.Keys != want.Keys ||
			m.Properties["seq"] != strconv.Itoa(i) || m.UniqKey != res.MsgIDs[i] || m.MsgID != res.OffsetMsgIDs[i] ||
			m.QueueOffset != res.QueueOffset+int64(i) || m.Properties[remoting.PropertyWaitStoreMsgOK] != "true" {
			t.Fatalf("message %d stored as %+v; result %+v", i, m, res)
		}
	}
	if msgs[0].Properties[remoting.PropertyUniqKey] != "" {
		t.Fatal("SendBatch modified a caller's message")
	}
}

func TestBatchRetriesOnAnotherBrokerWithTheSameIDs(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"})
	c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.SystemBusy})
	for i := 0; i < 4; i++ {
		res, err := c.r.SendBatch(context.Background(), batchOf(testTopic, 3))
		if err != nil {
			t.Fatal(err)
		}
		if res.Broker != "broker-b" {
			t.Fatalf("batch %d stored on %s (tried %v); broker-a refuses everything", i, res.Broker, res.BrokersTried)
		}
		if res.Attempts == 2 && !slices.Equal(res.BrokersTried, []string{"broker-a", "broker-b"}) {
			t.Fatalf("tried %v", res.BrokersTried)
		}
	}
	if got := c.brokers["broker-a"].Stats().SendsReceived; got == 0 {
		t.Fatal("no batch went to broker-a first: the test proves no retry")
	}
	byUniq := c.storedByUniq()
	if len(byUniq) != 12 {
		t.Fatalf("%d distinct messages stored, want 12", len(byUniq))
	}
	for id, where := range byUniq {
		if len(where) != 1 || where[0] != "broker-b" {
			t.Fatalf("message %s stored on %v", id, where)
		}
	}
}

func TestBatchFailureIsolatesTheBrokerAsASendDoes(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withManualClock())
	c.brokers["broker-a"].SetFault(brokersim.Fault{Refuse: true})
	var sawA bool
	for i := 0; i < 6 && !sawA; i++ {
		res, err := c.r.SendBatch(context.Background(), batchOf(testTopic, 2))
		if err != nil {
			t.Fatal(err)
		}
		sawA = res.BrokersTried[0] == "broker-a"
	}
	if !sawA {
		t.Fatal("no batch tried broker-a")
	}
	isolated := false
	for _, it := range c.r.Isolated("test") {
		isolated = isolated || it.Broker == "broker-a"
	}
	if !isolated {
		t.Fatalf("broker-a refused a connection and is not isolated: %+v", c.r.Isolated("test"))
	}
}

func TestBatchesRocketMQRefusesAreRefusedBeforeAnyIO(t *testing.T) {
	big := make([]byte, MaxMessageSize/2)
	for i := range big {
		big[i] = 'x'
	}
	cases := []struct {
		name string
		msgs func() []*Message
		rule error
		text string
	}{
		{"empty", func() []*Message { return nil }, ErrEmptyBatch, "no message"},
		{"over the count", func() []*Message { return batchOf(testTopic, MaxBatchMessages+1) }, ErrBatchTooLarge, "4097 messages"},
		{"mixed topics", func() []*Message {
			m := batchOf(testTopic, 3)
			m[2].Topic = "Other"
			return m
		}, ErrBatchMixedTopics, "The topic of the messages in one batch should be the same"},
		{"retry topic", func() []*Message { return batchOf("%RETRY%group", 2) }, ErrBatchRetryTopic, "Retry Group is not supported for batching"},
		{"mixed WAIT", func() []*Message {
			m := batchOf(testTopic, 2)
			m[1].Properties[remoting.PropertyWaitStoreMsgOK] = "false"
			return m
		}, ErrBatchMixedWait, "The waitStoreMsgOK of the messages in one batch should the same"},
		{"delay level", func() []*Message {
			m := batchOf(testTopic, 2)
			m[1].Properties[remoting.PropertyDelayLevel] = "3"
			return m
		}, ErrReservedProperty, "batch message 1: The Property<DELAY> is used by system"},
		{"timer", func() []*Message {
			m := batchOf(testTopic, 2)
			m[0].Properties[remoting.PropertyTimerDeliverMS] = "1"
			return m
		}, ErrReservedProperty, "batch message 0: The Property<TIMER_DELIVER_MS> is used by system"},
		{"empty body", func() []*Message {
			m := batchOf(testTopic, 2)
			m[1].Body = []byte{}
			return m
		}, ErrEmptyBody, "batch message 1: the message body length is zero"},
		{"encoded size over 4 MiB", func() []*Message {
			m := batchOf(testTopic, 2)
			m[0].Body, m[1].Body = big, big
			return m
		}, ErrBodyTooLarge, "the message body size over max value, MAX: 4194304"},
		{"properties over 32767 bytes", func() []*Message {
			m := batchOf(testTopic, 2)
			m[1].Properties["long"] = strings.Repeat("v", MaxPropertiesSize)
			return m
		}, ErrPropertiesTooLarge, "batch message 1: the message properties length"},
	}
	c := startCluster(t, 1, []string{"broker-a"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.r.SendBatch(context.Background(), tc.msgs())
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, tc.rule) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want a validation error %v saying %q", err, tc.rule, tc.text)
			}
		})
	}
	if got := c.brokers["broker-a"].Stats().SendsReceived; got != 0 {
		t.Fatalf("the broker received %d sends", got)
	}
}

func TestBatchByRouteKeepsToItsTopic(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"})
	_, err := c.r.SendBatchRoute(context.Background(), testTopic, batchOf("Elsewhere", 2))
	if !errors.Is(err, ErrNoRoute) {
		t.Fatalf("a batch to another topic than its route's: %v", err)
	}
}

// The batch path allocates per batch, not per message: encoding 1024 messages costs as many
// allocations as encoding 32 (the messages themselves are the caller's). (Tiny batches may cost
// one fewer: the compiler keeps their small scratch buffers on the stack.)
func TestEncodingABatchAllocatesNothingPerMessage(t *testing.T) {
	allocs := func(n int) float64 {
		msgs := batchOf(testTopic, n)
		return testing.AllocsPerRun(20, func() {
			if _, err := encodeBatch(msgs); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(32), allocs(1024)
	if large != small {
		t.Fatalf("encoding 32 messages takes %.0f allocations, 1024 take %.0f", small, large)
	}
}

func TestEncodedBatchDecodesAsRocketMQsBatchBody(t *testing.T) {
	msgs := batchOf(testTopic, 3)
	msgs[1].Flag = 7
	eb, err := encodeBatch(msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remoting.DecodeBatch(eb.body)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if string(m.Body) != string(msgs[i].Body) || m.Flag != msgs[i].Flag || m.Properties[remoting.PropertyTags] != msgs[i].Tags ||
			m.Properties[remoting.PropertyUniqKey] != eb.ids[i] || m.Properties["seq"] != strconv.Itoa(i) {
			t.Fatalf("message %d decodes as %+v", i, m)
		}
	}
	props := remoting.DecodeProperties(eb.props)
	if props[remoting.PropertyWaitStoreMsgOK] != "true" || len(props) != 1 {
		t.Fatalf("batch properties %q", props)
	}
}
