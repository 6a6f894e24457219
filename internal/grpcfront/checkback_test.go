package grpcfront

import (
	"bytes"
	"compress/zlib"
	"crypto/md5"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestABrokersCheckBackIsAskedOfAProducerOfTheTopicAndItsVerdictEndsIt proves the check-back
// from end to end against brokersim: a producer's Telemetry Settings publishing Orders make the
// runtime heartbeat the group Orders, the broker holding the producer's unended half message
// checks back, the producer's stream gets a RecoverOrphanedTransactionCommand with the message
// as sent (id, body, property, type) and a transaction id, and the EndTransaction it answers
// with (source SERVER_CHECK) commits the message into Orders once, after which the broker checks
// no more. A half message of a topic no stream publishes is not checked at all: no connection
// heartbeats its group.
func TestABrokersCheckBackIsAskedOfAProducerOfTheTopicAndItsVerdictEndsIt(t *testing.T) {
	bed, reg := newCountedTestBed(t)
	stream, err := bed.client.Telemetry(asClient(t))
	if err != nil {
		t.Fatal(err)
	}
	producerType := rmqpb.ClientType_PRODUCER
	if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: &producerType,
		PubSub:     &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: "Orders"}}}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := stream.Recv(); err != nil || got.GetSettings() == nil {
		t.Fatalf("settings answer %v, %v", got, err)
	}
	m := newTransactional("Orders", "order 9")
	m.UserProperties = map[string]string{"kind": "orphan"}
	entry := bed.send(t, m).GetEntries()[0]
	other := bed.send(t, newTransactional("Mixed", "nobody publishes me")).GetEntries()[0]
	if entry.GetStatus().GetCode() != rmqpb.Code_OK || other.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("half messages answered %v and %v", entry.GetStatus(), other.GetStatus())
	}
	name, _, ok := bed.halfOf(entry.GetMessageId())
	if !ok {
		t.Fatal("no half message stored")
	}
	sim := map[string]*brokersim.Broker{"broker-a": bed.a, "broker-b": bed.b}[name]
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the broker checking back with the runtime", func() error {
		if sim.CheckTransactions() == 0 {
			return poll.ErrNotYet
		}
		return nil
	})
	got, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	cmd := got.GetRecoverOrphanedTransactionCommand()
	checked := cmd.GetMessage()
	sum := md5.Sum([]byte("order 9"))
	if checked.GetSystemProperties().GetMessageId() != entry.GetMessageId() || string(checked.GetBody()) != "order 9" ||
		checked.GetTopic().GetName() != "Orders" || checked.GetUserProperties()["kind"] != "orphan" ||
		checked.GetSystemProperties().GetMessageType() != rmqpb.MessageType_TRANSACTION ||
		checked.GetSystemProperties().GetBodyDigest().GetChecksum() != strings.ToUpper(hex.EncodeToString(sum[:])) ||
		!strings.HasPrefix(cmd.GetTransactionId(), txIDPrefix) {
		t.Fatalf("recovery command %v", got)
	}
	if _, ok := checked.GetUserProperties()[remoting.PropertyProducerGroup]; ok {
		t.Errorf("a reserved property reached the client as a user property: %v", checked.GetUserProperties())
	}
	st := bed.end(t, "Orders", &rmqpb.SendResultEntry{MessageId: entry.GetMessageId(), TransactionId: cmd.GetTransactionId()},
		rmqpb.TransactionResolution_COMMIT, rmqpb.TransactionSource_SOURCE_SERVER_CHECK)
	if st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("the checked end answered %v", st)
	}
	copies := 0
	for q := range 2 {
		for _, sm := range sim.Messages("Orders", q) {
			if sm.UniqKey == entry.GetMessageId() {
				copies++
			}
		}
	}
	if copies != 1 {
		t.Fatalf("%d copies of the checked message in Orders, want 1", copies)
	}
	for _, b := range []*brokersim.Broker{bed.a, bed.b} {
		if n := b.CheckTransactions(); n != 0 {
			t.Errorf("%s checked back %d more times: on a settled transaction, or on a group nobody heartbeats", b.Name(), n)
		}
	}
	if got := metricstest.Gathered(t, reg)["detour_grpc_transaction_checks_total{outcome=asked}"]; got != 1 {
		t.Errorf("%v check-backs counted as asked, want the one", got)
	}
}

// TestAnOrphanIsHandedOverAsItWasSent proves the body a producer reads in a check is the one it
// sent: a body stored zlib-compressed is inflated (and its digest is the inflated body's), a body
// of another compression is passed on as stored, and a plain one as it is.
func TestAnOrphanIsHandedOverAsItWasSent(t *testing.T) {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write([]byte("sent body"))
	_ = zw.Close()
	tests := []struct {
		name    string
		sysFlag int32
		body    []byte
		want    string
	}{
		{"plain", 0, []byte("sent body"), "sent body"},
		{"zlib of the runtime", producer.SysFlagCompressed | producer.SysFlagZlib, z.Bytes(), "sent body"},
		{"zlib before compression types", producer.SysFlagCompressed, z.Bytes(), "sent body"},
		{"lz4, not inflated", producer.SysFlagCompressed | 1<<8, []byte("lz4 frame"), "lz4 frame"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := orphanMessage(&remoting.StoredMessage{SysFlag: tt.sysFlag, Body: tt.body, Topic: "Orders",
				BornHost: netip.MustParseAddrPort("10.0.0.9:41000"), StoreHost: netip.MustParseAddrPort("10.0.0.1:10911"),
				Properties: map[string]string{remoting.PropertyUniqKey: "01A0", "TAGS": "paid", "kind": "x"}})
			sum := md5.Sum([]byte(tt.want))
			if string(m.GetBody()) != tt.want || m.GetSystemProperties().GetBodyDigest().GetChecksum() != strings.ToUpper(hex.EncodeToString(sum[:])) ||
				m.GetSystemProperties().GetBodyEncoding() != rmqpb.Encoding_IDENTITY || m.GetSystemProperties().GetTag() != "paid" ||
				m.GetSystemProperties().GetBornHost() != "10.0.0.9:41000" || len(m.GetUserProperties()) != 1 {
				t.Fatalf("handed over as %v", m)
			}
		})
	}
}
