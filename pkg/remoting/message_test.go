package remoting

import (
	"encoding/hex"
	"errors"
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
		s := EncodeProperties(m)
		if len(m) > 0 && !strings.HasSuffix(s, "\x02") {
			t.Fatalf("EncodeProperties(%v) = %q lacks the trailing separator", m, s)
		}
		if got := DecodeProperties(s); !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %v gave %v", m, got)
		}
	}
	if got := EncodeProperties(map[string]string{"k": ""}); got != "" {
		t.Fatalf("empty values must be skipped, got %q", got)
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

func TestBatchRoundTrip(t *testing.T) {
	msgs := []*Message{
		{Tags: "A", Body: []byte("first"), Flag: 3, Properties: map[string]string{PropertyUniqKey: "U1", PropertyWaitStoreMsgOK: "true"}},
		{Keys: "k", Body: []byte{}, Properties: map[string]string{PropertyUniqKey: "U2"}},
		{Body: []byte(strings.Repeat("x", 5000))},
	}
	body, err := AppendBatch(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatch(body)
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
		if want := DecodeProperties(m.EncodeProperties()); !reflect.DeepEqual(got[i].Properties, want) {
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
	good, _ := AppendBatch(nil, []*Message{{Body: []byte("abc"), Tags: "t"}})
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
		{"properties length not matching the total", mutate(func(b []byte) { b[len(b)-len("TAGS\x01t\x02")-1]++ })},
		{"trailing partial message", append(append([]byte(nil), good...), 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeBatch(tt.body); !errors.Is(err, ErrFrame) {
				t.Fatalf("err = %v, want ErrFrame", err)
			}
		})
	}
	if _, err := AppendBatch(nil, []*Message{{Properties: map[string]string{"k": strings.Repeat("v", 1<<15)}}}); !errors.Is(err, ErrFrame) {
		t.Fatalf("oversized properties: err = %v, want ErrFrame", err)
	}
}
