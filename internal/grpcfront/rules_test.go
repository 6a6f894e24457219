package grpcfront

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// ruleMessage is a NORMAL message on topic T with a body and an id, changed by edit.
func ruleMessage(edit func(m *rmqpb.Message)) *rmqpb.Message {
	m := &rmqpb.Message{Topic: &rmqpb.Resource{Name: "T"}, Body: []byte("x"),
		SystemProperties: &rmqpb.SystemProperties{MessageId: "01A0B0C0D0E0F0000000000000000001", MessageType: rmqpb.MessageType_NORMAL}}
	if edit != nil {
		edit(m)
	}
	return m
}

func tagged(tag string) func(*rmqpb.Message) {
	return func(m *rmqpb.Message) { m.SystemProperties.Tag = &tag }
}
func keyed(keys ...string) func(*rmqpb.Message) {
	return func(m *rmqpb.Message) { m.SystemProperties.Keys = keys }
}
func grouped(g string) func(*rmqpb.Message) {
	return func(m *rmqpb.Message) { m.SystemProperties.MessageGroup = &g }
}
func withProps(kv map[string]string) func(*rmqpb.Message) {
	return func(m *rmqpb.Message) { m.UserProperties = kv }
}
func deliverIn(d time.Duration) func(*rmqpb.Message) {
	return func(m *rmqpb.Message) { m.SystemProperties.DeliveryTimestamp = timestamppb.New(time.Now().Add(d)) }
}

// TestTheProxysRulesRefuseWithItsCodes proves each of the Proxy's SendMessage rules, as detour
// applies them before any broker is asked: the code the Proxy answers, and a message naming the
// rule.
func TestTheProxysRulesRefuseWithItsCodes(t *testing.T) {
	props := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			out["p"+strconv.Itoa(i)] = "v"
		}
		return out
	}
	cases := []struct {
		name string
		msgs []*rmqpb.Message
		want rmqpb.Code
		says string
	}{
		{"no message is a corrupted request", nil, rmqpb.Code_MESSAGE_CORRUPTED, "no message"},
		{"a batch over two topics is corrupted", []*rmqpb.Message{ruleMessage(nil), ruleMessage(func(m *rmqpb.Message) { m.Topic.Name = "U" })},
			rmqpb.Code_MESSAGE_CORRUPTED, "one topic"},
		{"a topic with a space and a slash is illegal", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.Topic.Name = "Gs Bad/Topic" })},
			rmqpb.Code_ILLEGAL_TOPIC, "illegal characters"},
		{"a blank topic is illegal", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.Topic.Name = "" })}, rmqpb.Code_ILLEGAL_TOPIC, "blank"},
		{"a system topic is illegal", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.Topic.Name = "rmq_sys_x" })}, rmqpb.Code_ILLEGAL_TOPIC, "system"},
		{"an empty body", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.Body = nil })}, rmqpb.Code_MESSAGE_BODY_EMPTY, "empty"},
		{"a tag with the expression separator", []*rmqpb.Message{ruleMessage(tagged("a|b"))}, rmqpb.Code_ILLEGAL_MESSAGE_TAG, "'|'"},
		{"a blank tag", []*rmqpb.Message{ruleMessage(tagged(" "))}, rmqpb.Code_ILLEGAL_MESSAGE_TAG, "whitespace"},
		{"a tab is a blank tag", []*rmqpb.Message{ruleMessage(tagged("\t"))}, rmqpb.Code_ILLEGAL_MESSAGE_TAG, "whitespace"},
		{"a control character in a tag", []*rmqpb.Message{ruleMessage(tagged("a\x7fb"))}, rmqpb.Code_ILLEGAL_MESSAGE_TAG, "control"},
		{"a C1 control character in a tag", []*rmqpb.Message{ruleMessage(tagged("a\u0085b"))}, rmqpb.Code_ILLEGAL_MESSAGE_TAG, "control"},
		{"a blank key", []*rmqpb.Message{ruleMessage(keyed(" "))}, rmqpb.Code_ILLEGAL_MESSAGE_KEY, "whitespace"},
		{"a control character in a key", []*rmqpb.Message{ruleMessage(keyed("k\x00"))}, rmqpb.Code_ILLEGAL_MESSAGE_KEY, "control"},
		{"a message group of 64 bytes", []*rmqpb.Message{ruleMessage(grouped(strings.Repeat("g", 64)))}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "under 64"},
		{"a blank message group", []*rmqpb.Message{ruleMessage(grouped(" "))}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "whitespace"},
		{"a control character in a message group", []*rmqpb.Message{ruleMessage(grouped("g\nh"))}, rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "control"},
		{"a reserved property name", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"TRAN_MSG": "true"}))}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "reserved"},
		{"the message id as a property", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"UNIQ_KEY": "x"}))}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "reserved"},
		{"a control character in a property name", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"a\x02": "v"}))}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "name"},
		{"a control character in a property value", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"a": "v\x1f"}))}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "value"},
		{"an empty property value a broker would drop", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"a": ""}))}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "drops"},
		{"an empty property name a broker would drop", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"": "v"}))}, rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "drops"},
		{"129 user properties", []*rmqpb.Message{ruleMessage(withProps(props(129)))}, rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "129"},
		{"user properties over 16 KiB", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"big": strings.Repeat("v", 16<<10)}))},
			rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "16384"},
		{"tag and keys count towards the 16 KiB", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) {
			tagged(strings.Repeat("t", 9<<10))(m)
			keyed(strings.Repeat("k", 8<<10))(m)
		})}, rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "tag and keys"},
		{"a blank message id", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.SystemProperties.MessageId = "  " })}, rmqpb.Code_ILLEGAL_MESSAGE_ID, "message_id"},
		{"no system properties is no message id", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.SystemProperties = nil })}, rmqpb.Code_ILLEGAL_MESSAGE_ID, "message_id"},
		{"a delivery time 25 h ahead", []*rmqpb.Message{ruleMessage(deliverIn(25 * time.Hour))}, rmqpb.Code_ILLEGAL_DELIVERY_TIME, "one day"},
		{"a recovery time over an hour", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) {
			m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(2 * time.Hour)
		})}, rmqpb.Code_BAD_REQUEST, "recovery"},
		{"a group and a delivery time", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { grouped("g")(m); deliverIn(time.Hour)(m) })},
			rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "not both"},
		{"the topic is checked before the messages", []*rmqpb.Message{ruleMessage(func(m *rmqpb.Message) { m.Topic.Name = "a b"; m.Body = nil })},
			rmqpb.Code_ILLEGAL_TOPIC, "illegal"},
	}
	s := &Server{opts: Options{MaxBodySize: producer.MaxMessageSize}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, st := s.decodeRequest(tc.msgs)
			if st == nil || st.Code != tc.want || !strings.Contains(st.Message, tc.says) {
				t.Fatalf("answer %v, want %s saying %q", st, tc.want, tc.says)
			}
		})
	}
}

// TestWhatTheProxyTakesDetourTakes proves requests the Proxy stores pass detour's rules too.
func TestWhatTheProxyTakesDetourTakes(t *testing.T) {
	cases := []struct {
		name string
		msgs []*rmqpb.Message
	}{
		{"a plain message", []*rmqpb.Message{ruleMessage(nil)}},
		{"a tag with a space inside", []*rmqpb.Message{ruleMessage(tagged("a b"))}},
		{"a tag in Chinese", []*rmqpb.Message{ruleMessage(tagged("标签"))}},
		{"an empty key beside one", []*rmqpb.Message{ruleMessage(keyed("", "k"))}},
		{"a message group of 63 bytes", []*rmqpb.Message{ruleMessage(grouped(strings.Repeat("g", 63)))}},
		{"a property value of one space", []*rmqpb.Message{ruleMessage(withProps(map[string]string{"a": " "}))}},
		{"128 user properties", []*rmqpb.Message{ruleMessage(withProps(func() map[string]string {
			out := map[string]string{}
			for i := range 128 {
				out["p"+strconv.Itoa(i)] = "v"
			}
			return out
		}()))}},
		{"a delivery time past", []*rmqpb.Message{ruleMessage(deliverIn(-time.Minute))}},
		{"a delivery time 23 h ahead", []*rmqpb.Message{ruleMessage(deliverIn(23 * time.Hour))}},
		{"a batch of two", []*rmqpb.Message{ruleMessage(nil), ruleMessage(nil)}},
	}
	s := &Server{opts: Options{MaxBodySize: producer.MaxMessageSize}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, st := s.decodeRequest(tc.msgs); st != nil {
				t.Fatalf("refused: %v", st)
			}
		})
	}
}

// TestAMessageMustBeOfItsTopicsType proves the message-type rule: a MIXED topic takes every
// type, any other only its own, the type read off the message as the Proxy reads it.
func TestAMessageMustBeOfItsTopicsType(t *testing.T) {
	normal := outgoing{}
	fifo := outgoing{group: "g"}
	delay := outgoing{deliverAt: time.Now().Add(time.Hour)}
	tx := outgoing{transactional: true}
	cases := []struct {
		name  string
		topic string
		o     outgoing
		ok    bool
	}{
		{"NORMAL on NORMAL", "NORMAL", normal, true},
		{"FIFO on NORMAL", "NORMAL", fifo, false},
		{"DELAY on NORMAL", "NORMAL", delay, false},
		{"TRANSACTION on NORMAL", "NORMAL", tx, false},
		{"NORMAL on FIFO", "FIFO", normal, false},
		{"FIFO on FIFO", "FIFO", fifo, true},
		{"DELAY on DELAY", "DELAY", delay, true},
		{"TRANSACTION on TRANSACTION", "TRANSACTION", tx, true},
		{"FIFO on MIXED", "MIXED", fifo, true},
		{"TRANSACTION on MIXED", "MIXED", tx, true},
		{"NORMAL on a type detour does not know", "UNSPECIFIED", normal, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := checkMessageType(tc.topic, tc.o)
			if (st == nil) != tc.ok {
				t.Fatalf("answer %v, want ok %v", st, tc.ok)
			}
			if st != nil && (st.Code != rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE || !strings.Contains(st.Message, tc.topic)) {
				t.Fatalf("answer %v", st)
			}
		})
	}
}

// TestRoutesAdvertiseTheTopicsType proves a route's accept_message_types, as the Proxy lists them.
func TestRoutesAdvertiseTheTopicsType(t *testing.T) {
	cases := []struct {
		topic string
		known bool
		want  []rmqpb.MessageType
	}{
		{"NORMAL", true, []rmqpb.MessageType{rmqpb.MessageType_NORMAL}},
		{"FIFO", true, []rmqpb.MessageType{rmqpb.MessageType_FIFO}},
		{"DELAY", true, []rmqpb.MessageType{rmqpb.MessageType_DELAY}},
		{"TRANSACTION", true, []rmqpb.MessageType{rmqpb.MessageType_TRANSACTION}},
		{"MIXED", true, acceptedTypes},
		{"UNSPECIFIED", true, []rmqpb.MessageType{rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED}},
		{"", false, acceptedTypes},
	}
	for _, tc := range cases {
		t.Run(tc.topic, func(t *testing.T) {
			got := acceptedTypesOf(tc.topic, tc.known)
			if len(got) != len(tc.want) {
				t.Fatalf("%v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("%v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestABodyOverTheBrokersLimitIsRefusedBeforeCompression proves the brokers' maxMessageSize is
// held against the body as the client sent it.
func TestABodyOverTheBrokersLimitIsRefusedBeforeCompression(t *testing.T) {
	body := []byte(strings.Repeat("a", 1<<20+1)) // compresses to a few KiB
	out := []outgoing{{msg: &producer.Message{Body: []byte("x")}}, {msg: &producer.Message{Body: body}}}
	st := checkBodyFits(out, 1<<20)
	if st == nil || st.Code != rmqpb.Code_MESSAGE_BODY_TOO_LARGE || !strings.Contains(st.Message, "message 1") {
		t.Fatalf("answer %v", st)
	}
	if st := checkBodyFits(out[:1], 1<<20); st != nil {
		t.Fatalf("a small body refused: %v", st)
	}
}

// TestTopicFactsAreReadOnceAndRefreshedInTheBackground proves the cache: a topic's first call
// waits for the reading, later calls use what was read without asking the brokers, a due
// refresh runs beside the call, and a failed reading is not retried on every call.
func TestTopicFactsAreReadOnceAndRefreshedInTheBackground(t *testing.T) {
	var reads atomic.Int32
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	typ := "FIFO"
	c := newTopicFacts(func(context.Context, string) (producer.TopicFacts, error) {
		reads.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return producer.TopicFacts{MessageType: typ, MaxMessageSize: 1 << 20}, nil
	}, clock)
	ctx := context.Background()
	for range 5 {
		if f, ok := c.get(ctx, "r"); !ok || f.MessageType != "FIFO" {
			t.Fatalf("facts %+v %v", f, ok)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d readings for five calls", n)
	}
	mu.Lock()
	typ = "MIXED"
	mu.Unlock()
	advance(factsTTL)
	if f, _ := c.get(ctx, "r"); f.MessageType != "FIFO" {
		t.Fatalf("a due refresh made the call wait: %+v", f)
	}
	poll.Until(t, 5*time.Second, time.Millisecond, "the background refresh", poll.True(func() bool {
		f, _ := c.get(ctx, "r")
		return f.MessageType == "MIXED"
	}))

	var failed atomic.Int32
	bad := newTopicFacts(func(context.Context, string) (producer.TopicFacts, error) {
		failed.Add(1)
		return producer.TopicFacts{}, errors.New("no broker answered")
	}, clock)
	for range 5 {
		if f, ok := bad.get(ctx, "r"); ok && (f.MessageType != "" || f.MaxMessageSize != -1) {
			t.Fatalf("unknown facts read as %+v", f)
		}
	}
	if n := failed.Load(); n != 1 {
		t.Fatalf("a failed reading was tried %d times within its retry delay", n)
	}
}

// TestTopicFactsAreBounded proves the cache holds at most maxFactsEntries topics.
func TestTopicFactsAreBounded(t *testing.T) {
	c := newTopicFacts(func(context.Context, string) (producer.TopicFacts, error) {
		return producer.TopicFacts{MessageType: "NORMAL"}, nil
	}, time.Now)
	for i := range maxFactsEntries + 100 {
		c.get(context.Background(), "r"+strconv.Itoa(i))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > maxFactsEntries {
		t.Fatalf("%d entries, the bound is %d", len(c.entries), maxFactsEntries)
	}
}

// TestSettingsPublishingAnIllegalTopicEndTheStream proves a producer's Settings are held to the
// topic rules as the Proxy holds them: a stream publishing an illegal or system topic ends with
// INVALID_ARGUMENT naming the rule.
func TestSettingsPublishingAnIllegalTopicEndTheStream(t *testing.T) {
	cases := []struct {
		name   string
		topics []string
		ok     bool
	}{
		{"legal topics", []string{"Orders", "T-1"}, true},
		{"an illegal name", []string{"Orders", "Gs Bad/Topic"}, false},
		{"a system topic", []string{"rmq_sys_x"}, false},
		{"a blank name", []string{""}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pub := &rmqpb.Publishing{}
			for _, n := range tc.topics {
				pub.Topics = append(pub.Topics, &rmqpb.Resource{Name: n})
			}
			err := checkPublishedTopics(&rmqpb.Settings{PubSub: &rmqpb.Settings_Publishing{Publishing: pub}})
			if (err == nil) != tc.ok {
				t.Fatalf("error %v, want ok %v", err, tc.ok)
			}
			if err != nil && status.Code(err) != codes.InvalidArgument {
				t.Fatalf("error %v, want INVALID_ARGUMENT", err)
			}
		})
	}
}
