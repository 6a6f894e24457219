package grpcfront

import (
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// newTransactional is a transactional message for topic.
func newTransactional(topic, body string) *rmqpb.Message {
	m := newMessage(topic, body)
	m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
	return m
}

// end sends EndTransaction for the message a send answered entry for.
func (bed *testBed) end(t *testing.T, topic string, entry *rmqpb.SendResultEntry, how rmqpb.TransactionResolution, src rmqpb.TransactionSource) *rmqpb.Status {
	t.Helper()
	resp, err := bed.client.EndTransaction(asClient(t), &rmqpb.EndTransactionRequest{
		Topic: &rmqpb.Resource{Name: topic}, MessageId: entry.GetMessageId(), TransactionId: entry.GetTransactionId(),
		Resolution: how, Source: src,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetStatus()
}

// halfOf finds the half message with UNIQ_KEY uniq on either broker.
func (bed *testBed) halfOf(uniq string) (string, brokersim.StoredMessage, bool) {
	for _, b := range []*brokersim.Broker{bed.a, bed.b} {
		for _, m := range b.Messages(brokersim.HalfTopic, 0) {
			if m.UniqKey == uniq {
				return b.Name(), m, true
			}
		}
	}
	return "", brokersim.StoredMessage{}, false
}

// TestTransactionalMessageIsVisibleOnlyOnceCommitted proves a transactional message is stored
// as RocketMQ's half message (hidden in the half topic, TRAN_MSG and the topic as producer
// group, the prepared sysFlag) on a broker detour picked, that its transaction id ends it there,
// and that only a commit, from the client or from a check-back, makes it visible in the topic.
func TestTransactionalMessageIsVisibleOnlyOnceCommitted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		how     rmqpb.TransactionResolution
		src     rmqpb.TransactionSource
		visible bool
	}{
		{"commit by the client", rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_CLIENT, true},
		{"commit after a check-back", rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_SERVER_CHECK, true},
		{"rollback by the client", rmqpb.TransactionResolution_ROLLBACK, rmqpb.TransactionSource_SOURCE_CLIENT, false},
		{"rollback after a check-back", rmqpb.TransactionResolution_ROLLBACK, rmqpb.TransactionSource_SOURCE_SERVER_CHECK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bed := newTestBed(t, nil)
			msg := newTransactional("Orders", "pay")
			msg.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(30e9)
			resp := bed.send(t, msg)
			entry := resp.Entries[0]
			if entry.Status.Code != rmqpb.Code_OK || !strings.HasPrefix(entry.TransactionId, txIDPrefix) {
				t.Fatalf("send answered %v", resp)
			}
			uniq := msg.SystemProperties.MessageId
			broker, half, ok := bed.halfOf(uniq)
			if !ok {
				t.Fatal("no broker holds the half message")
			}
			if _, _, visible := bed.stored("Orders", uniq); visible {
				t.Fatal("the half message is visible before its end")
			}
			wantProps := map[string]string{"TRAN_MSG": "true", "PGROUP": "Orders", "REAL_TOPIC": "Orders",
				remoting.PropertyCheckImmunitySeconds: "30"}
			for k, v := range wantProps {
				if half.Properties[k] != v {
					t.Errorf("half message property %s=%q, want %q", k, half.Properties[k], v)
				}
			}
			if half.ProducerGroup != "Orders" {
				t.Errorf("half message sent by group %q, want the topic", half.ProducerGroup)
			}
			ref, err := decodeTransactionID(entry.TransactionId)
			if err != nil || ref.Broker != "shop/"+broker || ref.TransactionID != uniq || ref.TranStateTableOffset != half.QueueOffset {
				t.Fatalf("transaction id reads %+v (%v); the half message is on %s at %d", ref, err, broker, half.QueueOffset)
			}

			if st := bed.end(t, "Orders", entry, tc.how, tc.src); st.Code != rmqpb.Code_OK {
				t.Fatalf("end answered %v", st)
			}
			at, m, visible := bed.stored("Orders", uniq)
			if visible != tc.visible {
				t.Fatalf("visible after the end: %t, want %t", visible, tc.visible)
			}
			if visible {
				if at != broker || string(m.Body) != "pay" || m.Properties["TRAN_MSG"] != "" || m.SysFlag&remoting.TransactionTypeMask != remoting.TransactionCommit {
					t.Fatalf("committed message on %s: %+v", at, m)
				}
			}
		})
	}
}

// TestEndTransactionRefusesIDsDetourDidNotMake proves that a malformed, forged or misdirected
// transaction id is answered with a status naming what is wrong, and that no such end makes a
// half message visible.
func TestEndTransactionRefusesIDsDetourDidNotMake(t *testing.T) {
	bed := newTestBed(t, nil)
	// The half message must be on broker-a, which Mixed routes to as well, so that ending it as
	// Mixed's reaches the broker's own producer-group check: broker-b's pod is marked not ready.
	bed.rt.SetBroker(producer.Broker{Name: "shop/broker-b", Addr: bed.b.Addr(), Ready: false})
	msg := newTransactional("Orders", "held")
	entry := bed.send(t, msg).Entries[0]
	if entry.Status.Code != rmqpb.Code_OK {
		t.Fatalf("send answered %v", entry.Status)
	}
	good, err := decodeTransactionID(entry.TransactionId)
	if err != nil {
		t.Fatal(err)
	}
	if good.Broker != "shop/broker-a" {
		t.Fatalf("the half message is on %s, want shop/broker-a", good.Broker)
	}
	raw := func(s string) string { return txIDPrefix + base64.RawURLEncoding.EncodeToString([]byte(s)) }
	forge := func(mut func(*txRef)) string {
		ref := good
		mut(&ref)
		id, err := encodeTransactionID(ref)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, tc := range []struct {
		name, id, topic string
		code            rmqpb.Code
		says            string
	}{
		{"empty", "", "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "empty"},
		{"the broker's own id", msg.SystemProperties.MessageId, "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "does not start"},
		{"not base64", txIDPrefix + "!!!", "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "base64"},
		{"padded base64", txIDPrefix + base64.URLEncoding.EncodeToString([]byte("a\n1\n2\nx")), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "base64"},
		{"three fields", raw("shop/broker-a\n1\n2"), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "3 fields"},
		{"negative offset", raw("shop/broker-a\n-1\n2\nx"), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "non-negative"},
		{"offset with a plus sign", raw("shop/broker-a\n+1\n2\nx"), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "non-negative"},
		{"offset over int64", raw("shop/broker-a\n99999999999999999999\n2\nx"), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "non-negative"},
		{"no broker", raw("\n1\n2\nx"), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "no broker name"},
		{"control character", raw("shop/broker-a\n1\n2\nx\x00y"), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "control"},
		{"overlong", txIDPrefix + strings.Repeat("A", maxTransactionIDLength), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "over the limit"},
		{"broker outside the topic's route", forge(func(r *txRef) { r.Broker = "shop/broker-bad" }), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "does not serve this topic"},
		{"unknown broker", forge(func(r *txRef) { r.Broker = "elsewhere" }), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, "does not serve this topic"},
		{"commit-log offset holding nothing", forge(func(r *txRef) { r.CommitLogOffset += 7 }), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, remoting.RemarkHalfNotFound},
		{"wrong half-queue offset", forge(func(r *txRef) { r.TranStateTableOffset++ }), "Orders", rmqpb.Code_INVALID_TRANSACTION_ID, remoting.RemarkWrongQueueOffset},
		{"another topic's end", entry.TransactionId, "Mixed", rmqpb.Code_INVALID_TRANSACTION_ID, remoting.RemarkWrongGroup},
		{"unknown topic", entry.TransactionId, "Nowhere", rmqpb.Code_TOPIC_NOT_FOUND, "Nowhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := bed.end(t, tc.topic, &rmqpb.SendResultEntry{MessageId: entry.MessageId, TransactionId: tc.id}, rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_CLIENT)
			if st.Code != tc.code || !strings.Contains(st.Message, tc.says) {
				t.Fatalf("answered %v %q, want %v saying %q", st.Code, st.Message, tc.code, tc.says)
			}
		})
	}
	if _, _, visible := bed.stored("Orders", msg.SystemProperties.MessageId); visible {
		t.Fatal("a refused end made the half message visible")
	}
	// The genuine id still commits it.
	if st := bed.end(t, "Orders", entry, rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_CLIENT); st.Code != rmqpb.Code_OK {
		t.Fatalf("the genuine end answered %v", st)
	}
	if _, _, visible := bed.stored("Orders", msg.SystemProperties.MessageId); !visible {
		t.Fatal("the genuine commit did not make the message visible")
	}
}

// TestTransactionalMessagesAreNeverBatched proves a request holding a transactional message and
// another is refused whole: a batch is stored at once on one queue and has no half message.
func TestTransactionalMessagesAreNeverBatched(t *testing.T) {
	bed := newTestBed(t, nil)
	resp := bed.send(t, newMessage("Orders", "n"), newTransactional("Orders", "t"))
	if resp.Status.Code != rmqpb.Code_BAD_REQUEST || !strings.Contains(resp.Status.Message, "transactional") {
		t.Fatalf("answered %v", resp.Status)
	}
	if got := bed.a.Stats().MessagesStored + bed.b.Stats().MessagesStored; got != 0 {
		t.Fatalf("%d messages stored", got)
	}
}

// TestTransactionIDRoundTrips proves every id detour makes decodes to what it encodes.
func TestTransactionIDRoundTrips(t *testing.T) {
	for _, ref := range []txRef{
		{Broker: "shop/broker-a", CommitLogOffset: 0, TranStateTableOffset: 0, TransactionID: "7F0000010001"},
		{Broker: "ns/broker-é", CommitLogOffset: 1<<63 - 1, TranStateTableOffset: 12345, TransactionID: strings.Repeat("A", maxTxRocketMQIDLength)},
	} {
		id, err := encodeTransactionID(ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeTransactionID(id)
		if err != nil || got != ref {
			t.Fatalf("%q decodes to %+v, %v; want %+v", id, got, err, ref)
		}
	}
}

// FuzzDecodeTransactionID feeds arbitrary ids to the decoder: nothing panics, and every id it
// accepts is exactly the id its fields encode to, so one transaction has one id.
func FuzzDecodeTransactionID(f *testing.F) {
	for _, s := range []string{"", txIDPrefix, txIDPrefix + "YQoxCjIKeA", "DTX1.!!", strings.Repeat("A", 2000)} {
		f.Add(s)
	}
	if id, err := encodeTransactionID(txRef{Broker: "shop/broker-a", CommitLogOffset: 42, TranStateTableOffset: 7, TransactionID: "ID"}); err == nil {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ref, err := decodeTransactionID(id)
		if err != nil {
			return
		}
		again, err := encodeTransactionID(ref)
		if err != nil || again != id {
			t.Fatalf("%q decodes to %+v, which encodes to %q (%v)", id, ref, again, err)
		}
	})
}
