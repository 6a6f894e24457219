package grpcfront

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// FuzzSendMessageRequest feeds arbitrary bytes as a SendMessage request through decoding and the
// mapping to the runtime's messages and to status codes: nothing panics, a refusal has a code
// that is no success, and an accepted message carries its id as UNIQ_KEY within the body limit.
func FuzzSendMessageRequest(f *testing.F) {
	group := "g"
	tag := "t"
	seed := func(msgs ...*rmqpb.Message) {
		b, err := proto.Marshal(&rmqpb.SendMessageRequest{Messages: msgs})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	plain := newMessage("Orders", "body")
	plain.SystemProperties.Tag = &tag
	plain.SystemProperties.Keys = []string{"a", "b"}
	plain.UserProperties = map[string]string{"k": "v"}
	fifo := newMessage("Orders", "fifo")
	fifo.SystemProperties.MessageGroup = &group
	delayed := newMessage("Orders", "later")
	delayed.SystemProperties.DeliveryTimestamp = timestamppb.Now()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(bytes.Repeat([]byte("z"), 1000))
	_ = zw.Close()
	gz := newMessage("Orders", "")
	gz.Body, gz.SystemProperties.BodyEncoding = zipped.Bytes(), rmqpb.Encoding_GZIP
	seed(plain)
	seed(fifo)
	seed(delayed)
	seed(gz)
	seed(plain, newMessage("Orders", "second"))
	seed(plain, fifo)
	f.Add([]byte{0x0a, 0x03, 0x1a, 0x01, 0x00})

	s := &Server{opts: Options{MaxBodySize: producer.MaxMessageSize}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rmqpb.SendMessageRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		out, st := s.decodeRequest(req.GetMessages())
		if st != nil {
			if st.Code == rmqpb.Code_OK || st.Message == "" {
				t.Fatalf("refusal %v", st)
			}
			return
		}
		total := 0
		for i, o := range out {
			total += len(o.msg.Body)
			if o.msg.Properties[remoting.PropertyUniqKey] != o.id || o.id != req.Messages[i].GetSystemProperties().GetMessageId() {
				t.Fatalf("message %d: UNIQ_KEY %q, id %q", i, o.msg.Properties[remoting.PropertyUniqKey], o.id)
			}
			if len(out) > 1 && (o.group != "" || !o.deliverAt.IsZero()) {
				t.Fatalf("message %d of a batch has a group or a time", i)
			}
			o.msg.Topic = "Orders"
			if err := producer.ValidateMessage(o.msg); err != nil {
				if code := s.sendStatus(err).Code; code == rmqpb.Code_OK || code == rmqpb.Code_INTERNAL_SERVER_ERROR {
					t.Fatalf("validation error %v mapped to %v", err, code)
				}
			}
		}
		if total > producer.MaxMessageSize {
			t.Fatalf("bodies of %d bytes accepted", total)
		}
	})
}

// FuzzAuthorizationHeader feeds arbitrary authorization headers to the parser: nothing panics,
// a header over the bound is refused whatever it holds, and an accepted one names an access key
// without its scope and a signature of SHA-1's size.
func FuzzAuthorizationHeader(f *testing.F) {
	sig := strings.Repeat("0A", 20)
	for _, seed := range []string{
		"MQv2-HMAC-SHA1 Credential=ak,SignedHeaders=x-mq-date-time,Signature=" + sig,
		"MQv2-HMAC-SHA1 Credential=ak/20260301/region, SignedHeaders=x-mq-date-time, Signature=" + strings.ToLower(sig),
		"MQv2-HMAC-SHA1 Credential=ak,Signature=" + sig + ",Extra=1",
		"MQv2-HMAC-SHA1 Credential=ak,Credential=bk,Signature=" + sig,
		"MQv2-HMAC-SHA1 Credential=,Signature=" + sig,
		"MQv2-HMAC-SHA1 Credential==,Signature==",
		"MQv2-HMAC-SHA1 ,,,",
		"MQv2-HMAC-SHA1",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		call, err := parseAuthorization(header)
		if len(header) > maxAuthorizationLen && err == nil {
			t.Fatalf("a header of %d bytes was accepted", len(header))
		}
		if err != nil {
			return
		}
		if call.accessKey == "" || strings.Contains(call.accessKey, "/") || len(call.signature) != sha1.Size {
			t.Fatalf("accepted %q as key %q, signature of %d bytes", header, call.accessKey, len(call.signature))
		}
	})
}
