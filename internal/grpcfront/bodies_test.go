package grpcfront

import (
	"bytes"
	"compress/gzip"
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// compressibleBody is n bytes of text that zlib shrinks well, so the runtime's default would
// compress it.
func compressibleBody(n int) []byte {
	return bytes.Repeat([]byte("a body every consumer can read, "), n/32+1)[:n]
}

// gzipped is b as a client sends it with body_encoding GZIP.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// storedAnywhere finds a message by its UNIQ_KEY in topic or held in the brokers' timer topic.
func (bed *testBed) storedAnywhere(topic, uniq string) (brokersim.StoredMessage, bool) {
	if _, m, ok := bed.stored(topic, uniq); ok {
		return m, true
	}
	for _, b := range []*brokersim.Broker{bed.a, bed.b} {
		for _, m := range b.Messages(brokersim.TimerTopic, 0) {
			if m.UniqKey == uniq {
				return m, true
			}
		}
	}
	return brokersim.StoredMessage{}, false
}

// TestTheEndpointStoresEveryBodyAsSentNeverCompressed proves a body sent through the endpoint is
// stored as the client sent it (plain, a GZIP body inflated), with no compressed flag, at any
// size and for every kind of send: the Proxy stores a gRPC SDK's body so, and hands a compressed
// stored body to gRPC consumers as zlib bytes marked GZIP, which not every SDK reads. The canary
// is the same runtime sending the same body without the endpoint: it compresses, so the check
// that finds no compression here can see one.
func TestTheEndpointStoresEveryBodyAsSentNeverCompressed(t *testing.T) {
	group := "customer-7"
	cases := []struct {
		name  string
		body  []byte
		shape func(m *rmqpb.Message)
	}{
		{"one byte under the runtime's threshold", compressibleBody(producer.DefaultCompressThreshold - 1), nil},
		{"exactly the runtime's threshold", compressibleBody(producer.DefaultCompressThreshold), nil},
		{"1 MiB", compressibleBody(1 << 20), nil},
		{"a FIFO message", compressibleBody(64 << 10), func(m *rmqpb.Message) {
			m.SystemProperties.MessageGroup = &group
			m.SystemProperties.MessageType = rmqpb.MessageType_FIFO
		}},
		{"a delayed message", compressibleBody(64 << 10), func(m *rmqpb.Message) {
			m.SystemProperties.MessageType = rmqpb.MessageType_DELAY
			m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(time.Minute))
		}},
		{"a body the client sent gzipped is stored inflated", compressibleBody(64 << 10), func(m *rmqpb.Message) {
			m.Body = gzipped(t, m.Body)
			m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
		}},
	}
	bed := newTestBed(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMessage("Orders", "")
			m.Body = bytes.Clone(tc.body)
			if tc.shape != nil {
				tc.shape(m)
			}
			if resp := bed.send(t, m); resp.Status.Code != rmqpb.Code_OK {
				t.Fatalf("answer %v", resp)
			}
			got, ok := bed.storedAnywhere("Orders", m.SystemProperties.MessageId)
			if !ok {
				t.Fatal("message not stored under its message id")
			}
			if got.SysFlag&(producer.SysFlagCompressed|producer.SysFlagCompressionType) != 0 {
				t.Fatalf("stored with sysFlag %#x: compressed", got.SysFlag)
			}
			if !bytes.Equal(got.Body, tc.body) {
				t.Fatalf("stored %d bytes, want the %d sent", len(got.Body), len(tc.body))
			}
		})
	}

	t.Run("canary: the runtime's own default compresses the same body", func(t *testing.T) {
		res, err := bed.rt.SendRoute(context.Background(), "shop/orders", &producer.Message{Topic: "Orders", Body: compressibleBody(1 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := bed.storedAnywhere("Orders", res.MsgID)
		if !ok {
			t.Fatal("message not stored")
		}
		if got.SysFlag&producer.SysFlagCompressed == 0 {
			t.Fatalf("stored with sysFlag %#x: the runtime's default did not compress, so the check above proves nothing", got.SysFlag)
		}
	})
}
