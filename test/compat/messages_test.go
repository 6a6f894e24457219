package compat_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// Request codes only these tests send.
const (
	codeGetBrokerRuntimeInfo int16 = 28
)

// storedRecord is a message as the broker's commit log holds it.
type storedRecord struct {
	sysFlag int32
	body    []byte
}

// viewStored asks the broker that stored res for the message's commit-log record
// (VIEW_MESSAGE_BY_ID, the request behind `mqadmin queryMsgById`) and returns its sysFlag and body
// exactly as stored, before any consumer inflates it.
func viewStored(t *testing.T, c *rmqtest.Cluster, res *producer.SendResult) storedRecord {
	t.Helper()
	// An offset message id is the store host (IPv4 and port, 8 bytes) then the commit-log offset.
	id, err := hex.DecodeString(res.OffsetMsgID)
	if err != nil || len(id) != 16 {
		t.Fatalf("offset message id %q is not an IPv4 store host and offset", res.OffsetMsgID)
	}
	offset := binary.BigEndian.Uint64(id[8:])
	b := c.Broker(res.Broker)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client().Invoke(ctx, b.Addr, remoting.NewRequest(remoting.ViewMessageByID,
		map[string]string{"offset": strconv.FormatUint(offset, 10), "topic": res.Topic}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("VIEW_MESSAGE_BY_ID %d on %s: %v %+v", offset, b.Name, err, resp)
	}
	// The record is the commit log's, read with detour's decoder of the records brokers send in
	// transaction checks: every real record it reads here is one more proof of it.
	m, err := remoting.DecodeStoredMessage(resp.Body)
	if err != nil {
		t.Fatalf("the record of %s on %s: %v", res.OffsetMsgID, b.Name, err)
	}
	if m.CommitLogOffset != int64(offset) || m.Properties[remoting.PropertyUniqKey] != res.MsgID {
		t.Fatalf("the record at offset %d holds offset %d and UNIQ_KEY %q, want %q", offset, m.CommitLogOffset, m.Properties[remoting.PropertyUniqKey], res.MsgID)
	}
	return storedRecord{sysFlag: m.SysFlag, body: m.Body}
}

// commitLogMaxOffset is how far the broker's commit log reaches: it moves with every message the
// broker stores, whatever the topic (half messages and delayed messages included).
func commitLogMaxOffset(t *testing.T, c *rmqtest.Cluster, b *rmqtest.Broker) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client().Invoke(ctx, b.Addr, remoting.NewRequest(codeGetBrokerRuntimeInfo, nil, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("GET_BROKER_RUNTIME_INFO on %s: %v %+v", b.Name, err, resp)
	}
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		t.Fatalf("runtime info of %s: %v", b.Name, err)
	}
	n, err := strconv.ParseInt(kv.Table["commitLogMaxOffset"], 10, 64)
	if err != nil {
		t.Fatalf("runtime info of %s has no commitLogMaxOffset: %v", b.Name, kv.Table)
	}
	return n
}

func inflateZlib(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("stored body is not a zlib stream: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("inflating the stored body: %v", err)
	}
	return out
}

// text returns n bytes of compressible text that differ per seed.
func text(seed string, n int) []byte {
	return bytes.Repeat([]byte(seed+": detour routes RocketMQ sends around slow and failing brokers. "), n/60+1)[:n]
}

// random returns n bytes no compressor shrinks.
func random(n int) []byte {
	r := rand.New(rand.NewPCG(11, 13))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// startGateway serves the send gateway in front of r, with Topic default/messages mapped to
// topic, and returns the URL to post messages to.
func startGateway(t *testing.T, r *producer.Runtime, topic string) string {
	t.Helper()
	gw, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Sender: r,
		Topics: front.NameResolverFunc(func(_ context.Context, ns, name string) (front.Target, error) {
			if ns == "default" && name == "messages" {
				return front.Target{Topic: topic}, nil
			}
			return front.Target{}, front.ErrTopicNotFound
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return gw.URL() + "/v1/namespaces/default/topics/messages/messages"
}

// TestSafeMessages proves on real 5.x and 4.9.x brokers what detour does to make messages safe:
// bodies from 4 KiB are stored zlib-compressed, as RocketMQ's Java producer sends them, and
// RocketMQ's own Java consumer reads them back identical; bodies that do not shrink are stored as
// they are; and every property a caller must not set is answered 400 by the send gateway with
// nothing written to the broker's commit log.
func TestSafeMessages(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{})
			t.Run("large bodies stored compressed", func(t *testing.T) { testCompressedBodies(t, c) })
			t.Run("unsafe properties refused by the gateway", func(t *testing.T) { testRefusedProperties(t, c) })
		})
	}
}

func testCompressedBodies(t *testing.T, c *rmqtest.Cluster) {
	const topic = "DetourCompressed"
	r := newRuntime(t, c, topic, 4, contentPolicy("compat"))
	ctx := context.Background()
	cases := []struct {
		name       string
		body       []byte
		compressed bool
	}{
		{"1 MiB of text", text("one-mebibyte", 1<<20), true},
		{"5000 bytes of text", text("five-thousand", 5000), true},
		{"exactly 4 KiB", text("four-kibibytes", 4096), true},
		{"one byte under 4 KiB", text("under", 4095), false},
		// RocketMQ's producer would send this compressed, a little over 4 MiB, which the broker
		// refuses; detour keeps a body that does not shrink as it is.
		{"random bytes just under 4 MiB", random(producer.MaxMessageSize - 1), false},
	}
	byID := map[string]int{}
	for i, tc := range cases {
		m := &producer.Message{Topic: topic, Tags: "TagZ", Body: tc.body, Properties: map[string]string{"case": tc.name}}
		orig := bytes.Clone(m.Body)
		res, err := r.Send(ctx, m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(m.Body, orig) {
			t.Fatalf("%s: the sent message's body was modified", tc.name)
		}
		byID[res.MsgID] = i
		rec := viewStored(t, c, res)
		t.Logf("%s: %d bytes stored as %d bytes with sysFlag %#x", tc.name, len(tc.body), len(rec.body), rec.sysFlag)
		switch {
		case tc.compressed:
			if rec.sysFlag&producer.SysFlagCompressed == 0 || rec.sysFlag&producer.SysFlagCompressionType != producer.SysFlagZlib {
				t.Errorf("%s: stored sysFlag %#x, want the compressed bit and the zlib type (0x301)", tc.name, rec.sysFlag)
			}
			if len(rec.body) >= len(tc.body) {
				t.Errorf("%s: stored %d bytes for a body of %d", tc.name, len(rec.body), len(tc.body))
			}
			if !bytes.Equal(inflateZlib(t, rec.body), tc.body) {
				t.Errorf("%s: the stored body does not inflate to the body sent", tc.name)
			}
		default:
			if rec.sysFlag != 0 || !bytes.Equal(rec.body, tc.body) {
				t.Errorf("%s: stored sysFlag %#x and %d bytes, want 0 and the body as sent", tc.name, rec.sysFlag, len(rec.body))
			}
		}
	}

	got := c.Consume(t, ctx, topic, len(cases), 60*time.Second)
	if len(got) != len(cases) {
		t.Errorf("consumer read %d messages, sent %d", len(got), len(cases))
	}
	for _, g := range got {
		i, ok := byID[g.MsgID]
		if !ok {
			t.Errorf("consumer read message %s, which was not sent", g.MsgID)
			continue
		}
		tc := cases[i]
		t.Logf("%s: the Java consumer reads %d bytes with sysFlag %#x", tc.name, len(g.Body), g.SysFlag)
		if !bytes.Equal(g.Body, tc.body) {
			t.Errorf("%s: consumer read %d bytes (or other bytes), sent %d", tc.name, len(g.Body), len(tc.body))
		}
		if g.Properties["case"] != tc.name || g.Tags != "TagZ" {
			t.Errorf("%s: consumer read tags %q and properties %v", tc.name, g.Tags, g.Properties)
		}
		// 5.x consumers clear the compressed bit once they inflated the body; 4.9.x ones keep it.
		// Either way the type bits say zlib, and only for compressed bodies.
		if wantType := map[bool]int{true: int(producer.SysFlagZlib), false: 0}[tc.compressed]; g.SysFlag&int(producer.SysFlagCompressionType) != wantType {
			t.Errorf("%s: consumer's sysFlag %#x, want compression type %#x", tc.name, g.SysFlag, wantType)
		}
	}
	if n, per := storedTotal(t, c, topic); n != int64(len(cases)) {
		t.Errorf("brokers hold %d messages (%v), sent %d", n, per, len(cases))
	}
}

func testRefusedProperties(t *testing.T, c *rmqtest.Cluster) {
	const topic = "DetourRefusedProperties"
	r := newRuntime(t, c, topic, 4, contentPolicy("compat"))
	url := startGateway(t, r, topic)
	withProps := func(props map[string]string) ([]byte, map[string]string) {
		b, err := json.Marshal(map[string]any{"bodyText": "must not be stored", "properties": props})
		if err != nil {
			t.Fatal(err)
		}
		return b, map[string]string{"Content-Type": "application/json"}
	}
	asJSON := func(v map[string]any) ([]byte, map[string]string) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b, map[string]string{"Content-Type": "application/json"}
	}
	raw := func(headers map[string]string) ([]byte, map[string]string) {
		return []byte("must not be stored"), headers
	}
	type request struct {
		body    []byte
		headers map[string]string
	}
	req := func(b []byte, h map[string]string) request { return request{b, h} }
	cases := []struct {
		name string
		req  request
		want string
	}{
		{"TRAN_MSG=true, which would store a half message", req(withProps(map[string]string{"TRAN_MSG": "true"})), "The Property<TRAN_MSG> is used by system"},
		{"DELAY, which would delay it", req(withProps(map[string]string{"DELAY": "3"})), "The Property<DELAY> is used by system"},
		{"TIMER_DELIVER_MS, 5.x's timer", req(withProps(map[string]string{"TIMER_DELIVER_MS": "4102444800000"})), "The Property<TIMER_DELIVER_MS> is used by system"},
		{"UNIQ_KEY", req(withProps(map[string]string{"UNIQ_KEY": "0A0B0C0D000000000000000000000001"})), "The Property<UNIQ_KEY> is used by system"},
		{"TAGS as a property", req(withProps(map[string]string{"TAGS": "TagX"})), "The Property<TAGS> is used by system"},
		{"0x02 and 0x01 injecting TRAN_MSG through a value", req(withProps(map[string]string{"note": "x\x02TRAN_MSG\x01true"})), "contains a property separator"},
		{"0x01 in a name", req(withProps(map[string]string{"no\x01te": "x"})), "contains a property separator"},
		{"0x02 in tags", req(asJSON(map[string]any{"bodyText": "x", "tags": "a\x02DELAY\x013"})), "the tags contains a property separator"},
		{"0x01 in keys", req(asJSON(map[string]any{"bodyText": "x", "keys": "k\x01"})), "the keys contains a property separator"},
		{"an empty value", req(withProps(map[string]string{"note": ""})), "can not be null or blank string"},
		{"a blank value", req(withProps(map[string]string{"note": "  "})), "can not be null or blank string"},
		{"an empty name", req(withProps(map[string]string{"": "x"})), "can not be null or blank string"},
		{"an empty property header", req(raw(map[string]string{gateway.HeaderPropertyPrefix + "Note": ""})), "can not be null or blank string"},
		{"a property header that is not UTF-8", req(raw(map[string]string{gateway.HeaderPropertyPrefix + "Note": "caf\xe9"})), "is not valid UTF-8"},
		{"a tags header that is not UTF-8", req(raw(map[string]string{gateway.HeaderTags: "\xff"})), "the tags is not valid UTF-8"},
		{"a JSON request that is not UTF-8", req([]byte("{\"bodyText\":\"x\",\"properties\":{\"note\":\"caf\xe9\"}}"),
			map[string]string{"Content-Type": "application/json"}), "not valid UTF-8"},
	}
	post := func(rq request) (int, gateway.ErrorResponse) {
		t.Helper()
		hr, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(rq.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range rq.headers {
			hr.Header[k] = []string{v} // as sent, without Go's canonicalisation touching the value
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var er gateway.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&er)
		return resp.StatusCode, er
	}

	b := c.Brokers()[0]
	before := commitLogMaxOffset(t, c, b)
	for _, tc := range cases {
		status, er := post(tc.req)
		if status != http.StatusBadRequest || er.Code != gateway.CodeInvalidMessage || !bytes.Contains([]byte(er.Error), []byte(tc.want)) {
			t.Errorf("%s: gateway answered %d %s %q; want 400 %s containing %q", tc.name, status, er.Code, er.Error,
				gateway.CodeInvalidMessage, tc.want)
		}
	}
	if after := commitLogMaxOffset(t, c, b); after != before {
		t.Errorf("the commit log grew from %d to %d bytes while every request was refused", before, after)
	}
	if n, per := storedTotal(t, c, topic); n != 0 {
		t.Errorf("brokers hold %d messages (%v) of refused requests", n, per)
	}

	// The same gateway stores a message whose properties are fine, so the refusals above were the
	// properties' doing.
	if status, er := post(req(withProps(map[string]string{"note": "fine", "tran_msg": "lower case is data"}))); status != http.StatusOK {
		t.Fatalf("a valid message was answered %d %+v", status, er)
	}
	if n, per := storedTotal(t, c, topic); n != 1 {
		t.Errorf("brokers hold %d messages (%v), want the one valid message", n, per)
	}
	// And the commit log does grow when a message is stored, so the check above can fail.
	if after := commitLogMaxOffset(t, c, b); after <= before {
		t.Errorf("the commit log stayed at %d bytes after a message was stored", after)
	}
}
