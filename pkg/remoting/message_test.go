package remoting

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
)

func TestDecodePropertiesFollowsRocketMQ(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty string", "", map[string]string{}},
		{"blank", " ", map[string]string{}},
		{"no separator", "aaa", map[string]string{}},
		{"empty value", "k1\x01", map[string]string{}},
		{"empty name", "\x01v1", map[string]string{}},
		{"no trailing separator", "k1\x01v1", map[string]string{"k1": "v1"}},
		{"Java output with trailing separator", "TAGS\x01TAG\x02WAIT\x01true\x02KEYS\x01ffff\x02", map[string]string{"TAGS": "TAG", "WAIT": "true", "KEYS": "ffff"}},
		{"bad segments are skipped, good ones kept", "a\x01\x02\x01b\x02c\x01d\x02\x02", map[string]string{"c": "d"}},
		{"value containing the name separator", "k\x01v\x01w\x02", map[string]string{"k": "v\x01w"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecodeProperties(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DecodeProperties(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		b := make([]byte, 1+r.IntN(10))
		for i := range b {
			b[i] = byte(0x20 + r.IntN(95)) // printable, never a separator
		}
		return string(b)
	}
	for i := 0; i < 2000; i++ {
		m := map[string]string{}
		for j := r.IntN(8); j > 0; j-- {
			m[word()] = word()
		}
		s := (&Message{Properties: m}).EncodeProperties()
		if len(m) > 0 && !strings.HasSuffix(s, "\x02") {
			t.Fatalf("EncodeProperties(%v) = %q lacks the trailing separator", m, s)
		}
		if got := DecodeProperties(s); !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %v gave %v", m, got)
		}
	}
	if got := (&Message{Properties: map[string]string{"k": ""}}).EncodeProperties(); got != "" {
		t.Fatalf("empty values must be skipped, got %q", got)
	}
}

func TestSendPropertiesAddUniqKeyAndWaitWithoutTouchingTheMessage(t *testing.T) {
	cases := []struct {
		name string
		msg  Message
		want map[string]string // UNIQ_KEY "*" means generated
	}{
		{"bare", Message{}, map[string]string{"UNIQ_KEY": "*", "WAIT": "true"}},
		{"tags and keys win over properties", Message{Tags: "t", Keys: "k1 k2", Properties: map[string]string{"TAGS": "x", "KEYS": "y", "u": "v"}},
			map[string]string{"TAGS": "t", "KEYS": "k1 k2", "u": "v", "UNIQ_KEY": "*", "WAIT": "true"}},
		{"caller's UNIQ_KEY and WAIT kept", Message{Properties: map[string]string{"UNIQ_KEY": "ABC", "WAIT": "false", "empty": ""}},
			map[string]string{"UNIQ_KEY": "ABC", "WAIT": "false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.msg.Properties)
			props, uniq := EncodeSendProperties(&tc.msg)
			got := DecodeProperties(props)
			if want := PropertyUniqKey + "\x01" + uniq + "\x02"; !strings.HasSuffix(props, want) {
				t.Errorf("%q does not end with the UNIQ_KEY it returned, %q", props, want)
			}
			if tc.want["UNIQ_KEY"] == "*" {
				if len(uniq) != UniqIDLength {
					t.Errorf("generated UNIQ_KEY %q", uniq)
				}
				tc.want["UNIQ_KEY"] = uniq
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("properties %v, want %v", got, tc.want)
			}
			if fmt.Sprint(tc.msg.Properties) != before {
				t.Errorf("message modified: %v", tc.msg.Properties)
			}
		})
	}
	_, a := EncodeSendProperties(&Message{})
	_, b := EncodeSendProperties(&Message{})
	if a == b {
		t.Fatal("two messages got the same UNIQ_KEY")
	}
}

// TestPropertiesSizeIsExact proves that the sizes callers size their buffers by are the lengths
// written, in both forms, so that encoding never grows a buffer.
func TestPropertiesSizeIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	for i := 0; i < 2000; i++ {
		m := &Message{Tags: pick("", "t", "TagA"), Keys: pick("", "k1 k2"), Properties: map[string]string{}}
		for j := r.IntN(6); j > 0; j-- {
			m.Properties[pick("a", "bb", "TAGS", "KEYS", "WAIT", "UNIQ_KEY", "empty")] = pick("", "v", "true", "0123456789")
		}
		if n, got := SendPropertiesSize(m), len(appendOnly(m)); n != got {
			t.Fatalf("%+v: SendPropertiesSize %d, AppendSendProperties wrote %d", m, n, got)
		}
		if n, got := propertiesSize(m, additionsOf(m, false)), len(m.EncodeProperties()); n != got {
			t.Fatalf("%+v: propertiesSize %d, EncodeProperties wrote %d", m, n, got)
		}
	}
}

func appendOnly(m *Message) []byte {
	out, _, _ := AppendSendProperties(nil, m)
	return out
}

// TestEncodersDoNotAllocatePerProperty pins the cost the producer's hot path relies on: the
// string form is one allocation, and appending into a buffer sized by SendPropertiesSize or
// BatchEntryFixedSize none.
func TestEncodersDoNotAllocatePerProperty(t *testing.T) {
	m := &Message{Tags: "TagA", Keys: "k", Body: []byte("body"), Properties: map[string]string{"a": "1", "b": "2", "c": "3"}}
	if n := testing.AllocsPerRun(100, func() { EncodeSendProperties(m) }); n != 1 {
		t.Errorf("EncodeSendProperties: %v allocations, want 1", n)
	}
	buf := make([]byte, 0, SendPropertiesSize(m))
	if n := testing.AllocsPerRun(100, func() { AppendSendProperties(buf, m) }); n != 0 {
		t.Errorf("AppendSendProperties: %v allocations, want 0", n)
	}
	msgs := []*Message{m, m, m}
	body := make([]byte, 0, 3*(BatchEntryFixedSize+len(m.Body)+SendPropertiesSize(m)))
	spans := make([]int, 0, 2*len(msgs))
	if n := testing.AllocsPerRun(100, func() { _, _, _ = AppendBatch(body, msgs, spans) }); n != 0 {
		t.Errorf("AppendBatch: %v allocations, want 0", n)
	}
}

func TestMessagePropertiesCarryTagsAndKeys(t *testing.T) {
	m := &Message{Tags: "TagA", Keys: "k1 k2", Properties: map[string]string{"TAGS": "ignored", "UNIQ_KEY": "ID", "WAIT": "true", "empty": ""}}
	got := DecodeProperties(m.EncodeProperties())
	want := map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ID", "WAIT": "true"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("properties %v, want %v", got, want)
	}
	if m.Property(PropertyTags) != "TagA" || m.Property(PropertyUniqKey) != "ID" {
		t.Fatal("Property does not consult Tags or Properties")
	}
	var empty Message
	empty.SetProperty("a", "b")
	if empty.Properties["a"] != "b" {
		t.Fatal("SetProperty on a nil map")
	}
}

func TestUniqIDLayout(t *testing.T) {
	before := time.Now()
	a, b := NewUniqID(), NewUniqID()
	for _, id := range []string{a, b} {
		if len(id) != 32 || strings.ToUpper(id) != id {
			t.Fatalf("id %q is not 32 upper-case hex digits", id)
		}
		if _, err := hex.DecodeString(id); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
	}
	if a[:20] != b[:20] {
		t.Fatalf("ids %s and %s differ in the host prefix", a, b)
	}
	ca, _ := strconv.ParseUint(a[28:], 16, 16)
	cb, _ := strconv.ParseUint(b[28:], 16, 16)
	if uint16(cb-ca) != 1 {
		t.Fatalf("consecutive counters %04X and %04X do not differ by one", ca, cb)
	}
	ms, _ := strconv.ParseUint(a[20:28], 16, 32)
	monthStart := time.Date(before.Year(), before.Month(), 1, 0, 0, 0, 0, time.Local)
	stamp := monthStart.Add(time.Duration(ms) * time.Millisecond)
	if d := stamp.Sub(before); d < -time.Second || d > time.Minute {
		t.Fatalf("id time %v is not the current time %v (ms since month start)", stamp, before)
	}
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		id := NewUniqID()
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

// TestBatchRoundTrip proves that DecodeBatch reads what AppendBatch writes: bodies, flags and
// the send form of every message's properties, whose UNIQ_KEYs lie where the spans say.
func TestBatchRoundTrip(t *testing.T) {
	msgs := []*Message{
		{Tags: "A", Body: []byte("first"), Flag: 3, Properties: map[string]string{PropertyUniqKey: "U1", PropertyWaitStoreMsgOK: "true"}},
		{Keys: "k", Body: []byte{}, Properties: map[string]string{PropertyUniqKey: "U2", PropertyWaitStoreMsgOK: "false"}},
		{Body: []byte(strings.Repeat("x", 5000))},
	}
	body, spans, err := AppendBatch([]byte("kept"), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(body[:4]) != "kept" || len(spans) != 2*len(msgs) {
		t.Fatalf("AppendBatch lost dst or gave %d spans", len(spans))
	}
	got, err := DecodeBatch(body[4:])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("decoded %d messages, want %d", len(got), len(msgs))
	}
	for i, m := range msgs {
		if string(got[i].Body) != string(m.Body) || got[i].Flag != m.Flag {
			t.Errorf("message %d: body %q flag %d", i, got[i].Body, got[i].Flag)
		}
		id := string(body[spans[2*i]:spans[2*i+1]])
		if given := m.Properties[PropertyUniqKey]; given != "" && id != given || len(id) == 0 {
			t.Errorf("message %d: span names UNIQ_KEY %q", i, id)
		}
		want := DecodeProperties(m.EncodeProperties())
		want[PropertyUniqKey] = id
		if want[PropertyWaitStoreMsgOK] == "" {
			want[PropertyWaitStoreMsgOK] = "true"
		}
		if !reflect.DeepEqual(got[i].Properties, want) {
			t.Errorf("message %d: properties %v, want %v", i, got[i].Properties, want)
		}
	}
}

// TestDecodeBatchReadsRocketMQClientGoBatches decodes the batch body rocketmq-client-go builds.
func TestDecodeBatchReadsRocketMQClientGoBatches(t *testing.T) {
	var in []*primitive.Message
	for i := 0; i < 3; i++ {
		m := primitive.NewMessage("TopicTest", []byte("body-"+strconv.Itoa(i)))
		m.WithTag("T" + strconv.Itoa(i))
		m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, "ID"+strconv.Itoa(i))
		in = append(in, m)
	}
	got, err := DecodeBatch(rmqproducer.MarshalMessageBatch(in...))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("decoded %d messages", len(got))
	}
	for i, m := range got {
		if string(m.Body) != "body-"+strconv.Itoa(i) || m.Properties["TAGS"] != "T"+strconv.Itoa(i) || m.Properties["UNIQ_KEY"] != "ID"+strconv.Itoa(i) {
			t.Errorf("message %d: %q %v", i, m.Body, m.Properties)
		}
	}
}

func TestDecodeBatchRejectsMalformedBodies(t *testing.T) {
	good, _, _ := AppendBatch(nil, []*Message{{Body: []byte("abc"), Tags: "t"}}, nil)
	propsLenLow := BatchEntryFixedSize - 2 + len("abc") + 1
	mutate := func(f func([]byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		body []byte
	}{
		{"truncated fixed part", good[:10]},
		{"total size beyond the body", mutate(func(b []byte) { b[3] = 200 })},
		{"total size below the fixed part", mutate(func(b []byte) { b[0], b[1], b[2], b[3] = 0, 0, 0, 5 })},
		{"body length beyond the message", mutate(func(b []byte) { b[19] = 100 })},
		{"properties length not matching the total", mutate(func(b []byte) { b[propsLenLow]++ })},
		{"trailing partial message", append(append([]byte(nil), good...), 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeBatch(tt.body); !errors.Is(err, ErrFrame) {
				t.Fatalf("err = %v, want ErrFrame", err)
			}
		})
	}
	fits := strings.Repeat("v", 1<<15-1-SendPropertiesSize(&Message{Properties: map[string]string{"k": "v"}})+1)
	for _, tt := range []struct {
		name  string
		value string
		ok    bool
	}{
		{"properties of exactly 32767 bytes", fits, true},
		{"properties of 32768 bytes", fits + "v", false},
	} {
		m := &Message{Properties: map[string]string{"k": tt.value}}
		out, _, err := AppendBatch([]byte("kept"), []*Message{m}, nil)
		if tt.ok != (err == nil) || !tt.ok && (!errors.Is(err, ErrFrame) || string(out) != "kept") {
			t.Errorf("%s: err = %v, out of %d bytes", tt.name, err, len(out))
		}
	}
}
