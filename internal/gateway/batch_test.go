package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/detourmq/detour/internal/front"
)

const ordersBatchPath = ordersPath + ":batch"

// TestBatchIsStoredTogetherInOrderAndAnsweredWithEachID proves a batch request reaches the broker
// as one batch send whose messages keep their bodies, tags, keys and properties, stored in order
// on one queue, and that the answer gives each message's ids and offset.
func TestBatchIsStoredTogetherInOrderAndAnsweredWithEachID(t *testing.T) {
	bed := newTestBed(t, nil)
	batch := map[string]any{"messages": []map[string]any{
		{"bodyText": "first", "tags": "TagA", "keys": "k1 k2", "properties": map[string]string{"orderId": "1"}},
		{"body": base64.StdEncoding.EncodeToString([]byte{0, 1, 255}), "keys": []string{"k3"}},
		{"bodyText": "third", "properties": map[string]string{"orderId": "3"}},
		{"bodyText": "line\n\"é\" <&>"},
	}}
	res, out := bed.do(t, post(ordersBatchPath, "application/json", jsonBody(t, batch), nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("answer %d %s", res.StatusCode, out)
	}
	var br BatchResponse
	if err := json.Unmarshal(out, &br); err != nil {
		t.Fatal(err)
	}
	if br.Topic != "Orders" || br.Broker != "broker-good" || br.Status != "SEND_OK" || br.Attempts != 1 || len(br.Messages) != 4 {
		t.Fatalf("answer %s", out)
	}
	if got := bed.good.Stats().SendsReceived; got != 1 {
		t.Fatalf("the broker received %d send requests for one batch", got)
	}
	stored := bed.good.Messages("Orders", br.QueueID)
	if len(stored) != 4 {
		t.Fatalf("%d messages on queue %d, want the batch's 4", len(stored), br.QueueID)
	}
	want := []struct{ body, tags, keys, orderID string }{
		{"first", "TagA", "k1 k2", "1"}, {"\x00\x01\xff", "", "k3", ""}, {"third", "", "", "3"}, {"line\n\"é\" <&>", "", "", ""},
	}
	for i, m := range stored {
		w, a := want[i], br.Messages[i]
		if !m.Batch || string(m.Body) != w.body || m.Tags != w.tags || m.Keys != w.keys || m.Properties["orderId"] != w.orderID {
			t.Fatalf("message %d stored as %+v", i, m)
		}
		if m.UniqKey != a.MsgID || m.MsgID != a.OffsetMsgID || m.QueueOffset != a.QueueOffset {
			t.Fatalf("message %d stored as %s/%s at %d, answered %+v", i, m.UniqKey, m.MsgID, m.QueueOffset, a)
		}
	}
}

// TestBatchesThatCannotBeSentAreRefusedBeforeTheBroker proves every refusal of a batch request
// is answered with its reason and sends nothing.
func TestBatchesThatCannotBeSentAreRefusedBeforeTheBroker(t *testing.T) {
	bed := newTestBed(t, nil)
	tooMany := make([]map[string]string, 4097)
	for i := range tooMany {
		tooMany[i] = map[string]string{"bodyText": "m"}
	}
	half := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 2<<20+1)))
	cases := []struct {
		name        string
		req         *http.Request
		status      int
		code, reply string
	}{
		{"not JSON", post(ordersBatchPath, "application/octet-stream", []byte("m"), nil),
			http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "a batch is sent as JSON"},
		{"no message", post(ordersBatchPath, "application/json", []byte(`{"messages":[]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "the batch holds no message"},
		{"unknown field", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m"}],"topic":"X"}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, `unknown field "topic"`},
		{"messages twice", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m"}],"messages":[{"bodyText":"n"}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, `repeated field "messages"`},
		{"not an object", post(ordersBatchPath, "application/json", []byte(`[{"bodyText":"m"}]`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "the batch must be a JSON object"},
		{"trailing value", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m"}]} {}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "more than one JSON value"},
		{"unknown field in a message", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m","bogus":1}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, `unknown field "bogus"`},
		{"messages not a list", post(ordersBatchPath, "application/json", []byte(`{"messages":{"bodyText":"m"}}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "messages must be a list"},
		{"a reserved property", post(ordersBatchPath, "application/json",
			[]byte(`{"messages":[{"bodyText":"m"},{"bodyText":"m","properties":{"DELAY":"3"}}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "batch message 1: The Property<DELAY> is used by system"},
		{"a timer property", post(ordersBatchPath, "application/json",
			[]byte(`{"messages":[{"bodyText":"m","properties":{"TIMER_DELIVER_MS":"1"}}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "batch message 0: The Property<TIMER_DELIVER_MS> is used by system"},
		{"no body", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"tags":"t"}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "batch message 0: the message body is null"},
		{"an empty base64 body", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"body":""}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "batch message 0: the message body length is zero"},
		{"body and bodyText", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"body":"eA==","bodyText":"x"}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "batch message 0: set either body (base64) or bodyText, not both"},
		{"bad base64", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"body":"!!"}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "illegal base64 data"},
		{"an empty body", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m"},{"bodyText":""}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "batch message 1: the message body length is zero"},
		{"over the count", post(ordersBatchPath, "application/json", jsonBody(t, map[string]any{"messages": tooMany}), nil),
			http.StatusBadRequest, CodeInvalidMessage, "the batch holds more than 4096 messages, the limit"},
		{"encoded over 4 MiB", post(ordersBatchPath, "application/json",
			[]byte(`{"messages":[{"body":"`+half+`"},{"body":"`+half+`"}]}`), nil),
			http.StatusRequestEntityTooLarge, CodeMessageTooLarge, "the message body size over max value, MAX: 4194304"},
		{"request over its bound", func() *http.Request {
			r := post(ordersBatchPath, "application/json", []byte(`{}`), nil)
			r.ContentLength = maxBatchRequest + 1
			return r
		}(), http.StatusRequestEntityTooLarge, CodeMessageTooLarge, "over max value"},
		{"not POST", func() *http.Request {
			r := post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m"}]}`), nil)
			r.Method = http.MethodPut
			return r
		}(), http.StatusMethodNotAllowed, CodeMethodNotAllowed, "send with POST"},
		{"unknown Topic", post("/v1/namespaces/shop/topics/nope/messages:batch", "application/json", []byte(`{"messages":[{"bodyText":"m"}]}`), nil),
			http.StatusNotFound, CodeTopicNotFound, `Topic "nope" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, out := bed.do(t, tc.req)
			var er ErrorResponse
			if err := json.Unmarshal(out, &er); err != nil {
				t.Fatalf("answer %d %.200s: %v", res.StatusCode, out, err)
			}
			if res.StatusCode != tc.status || er.Code != tc.code || !strings.Contains(er.Error, tc.reply) {
				t.Fatalf("answer %d %+v, want %d %s saying %q", res.StatusCode, er, tc.status, tc.code, tc.reply)
			}
		})
	}
	if got := bed.good.Stats().SendsReceived; got != 0 {
		t.Fatalf("the broker received %d sends", got)
	}
}

// TestBatchToAnUnreachableBrokerFailsAsASendDoes proves a batch whose every attempt fails is
// answered 503 with the attempts, as a single message is.
func TestBatchToAnUnreachableBrokerFailsAsASendDoes(t *testing.T) {
	bed := newTestBed(t, nil)
	res, out := bed.do(t, post("/v1/namespaces/shop/topics/doomed/messages:batch", "application/json",
		[]byte(`{"messages":[{"bodyText":"a"},{"bodyText":"b"}]}`), nil))
	var er ErrorResponse
	if err := json.Unmarshal(out, &er); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || er.Code != CodeSendFailed || er.Attempts == 0 || er.BrokersTried[0] != "broker-dead" {
		t.Fatalf("answer %d %s", res.StatusCode, out)
	}
}

// TestBatchThroughASenderWithoutBatchesIsNotImplemented proves a gateway whose Sender cannot send
// batches says so rather than sending the messages one by one.
func TestBatchThroughASenderWithoutBatchesIsNotImplemented(t *testing.T) {
	srv, err := New(Options{Addr: "127.0.0.1:0", Sender: nopSender{},
		Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) { return front.Target{Topic: "Orders"}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m"}]}`), nil))
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), CodeNotImplemented) {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
}

// TestABatchOfCountlessTinyMessagesIsRefusedWithoutDecodingThem is the hostile-peer trial of the
// batch endpoint: a request at its size bound holding about a million one-byte messages is
// refused having decoded no more than the limit, its cost bounded by what it sent.
func TestABatchOfCountlessTinyMessagesIsRefusedWithoutDecodingThem(t *testing.T) {
	bed := newTestBed(t, nil)
	var body bytes.Buffer
	body.WriteString(`{"messages":[`)
	const one = `{"bodyText":"x"},`
	for int64(body.Len()+len(one)+2) < maxBatchRequest {
		body.WriteString(one)
	}
	body.Truncate(body.Len() - 1)
	body.WriteString(`]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, out := bed.do(t, post(ordersBatchPath, "application/json", body.Bytes(), nil))
	runtime.ReadMemStats(&after)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "more than 4096 messages") {
		t.Fatalf("answer %d %.300s", res.StatusCode, out)
	}
	// The request's own bytes are read (about 10 MiB, twice: the body and the decoder's buffer);
	// decoding every one of its messages would allocate hundreds of MiB more.
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<20 {
		t.Fatalf("refusing a batch of %d bytes allocated %d MiB", body.Len(), allocated>>20)
	}
	if n := bed.good.Stats().SendsReceived; n != 0 {
		t.Fatalf("%d sends reached the broker", n)
	}
}
