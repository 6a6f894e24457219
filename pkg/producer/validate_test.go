package producer

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/remoting"
)

func TestValidateMessageAppliesRocketMQRulesInOrder(t *testing.T) {
	long := strings.Repeat("a", MaxTopicLength+1)
	cases := []struct {
		name string
		msg  *Message
		rule error
		code int
		text string
	}{
		{"nil message", nil, ErrNilMessage, 13, "the message is null"},
		{"blank topic", &Message{Topic: "  ", Body: []byte("x")}, ErrBlankTopic, -1, "The specified topic is blank"},
		{"empty topic", &Message{Topic: "", Body: []byte("x")}, ErrBlankTopic, -1, "The specified topic is blank"},
		{"topic of 128 chars", &Message{Topic: long, Body: []byte("x")}, ErrTopicTooLong, -1,
			"The specified topic is longer than topic max length 127."},
		{"illegal characters", &Message{Topic: "TOPIC&*^", Body: []byte("x")}, ErrTopicIllegal, -1,
			"The specified topic[TOPIC&*^] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		{"dot is illegal", &Message{Topic: "a.b", Body: []byte("x")}, ErrTopicIllegal, -1,
			"The specified topic[a.b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		{"non-ascii is illegal", &Message{Topic: "tópico", Body: []byte("x")}, ErrTopicIllegal, -1,
			"The specified topic[tópico] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		{"forbidden topic", &Message{Topic: "SCHEDULE_TOPIC_XXXX", Body: []byte("x")}, ErrTopicForbidden, -1,
			"Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."},
		{"topic checked before body", &Message{Topic: "OFFSET_MOVED_EVENT"}, ErrTopicForbidden, -1,
			"Sending message to topic[OFFSET_MOVED_EVENT] is forbidden."},
		{"nil body", &Message{Topic: "T"}, ErrNilBody, 13, "the message body is null"},
		{"empty body", &Message{Topic: "T", Body: []byte{}}, ErrEmptyBody, 13, "the message body length is zero"},
		{"body over 4 MiB", &Message{Topic: "T", Body: make([]byte, MaxMessageSize+1)}, ErrBodyTooLarge, 13,
			"the message body size over max value, MAX: 4194304"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateMessage(tc.msg)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, tc.rule) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.rule)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code {
				t.Errorf("code: got %+v, want %d", ve, tc.code)
			}
			if err.Error() != tc.text {
				t.Errorf("text:\n got %q\nwant %q", err.Error(), tc.text)
			}
		})
	}
}

func TestValidateMessageAcceptsRocketMQValidTopics(t *testing.T) {
	for _, topic := range []string{"Hello", "%RETRY%Hello", "_%RETRY%Hello", "-%RETRY%Hello", "223-%RETRY%Hello",
		"a|b", strings.Repeat("x", MaxTopicLength), "TBW102", "RMQ_SYS_TRACE_TOPIC"} {
		for _, size := range []int{1, MaxMessageSize} {
			if err := ValidateMessage(&Message{Topic: topic, Body: make([]byte, size)}); err != nil {
				t.Errorf("topic %q body %d: %v", topic, size, err)
			}
		}
	}
}

func TestCheckCreateTopicRefusesSystemTopics(t *testing.T) {
	for _, topic := range []string{"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC",
		"CHECKPOINT_TOPIC", "rmq_sys_anything"} {
		err := CheckCreateTopic(topic)
		if !errors.Is(err, ErrSystemTopic) {
			t.Errorf("%s: got %v", topic, err)
			continue
		}
		if want := "The topic[" + topic + "] is conflict with system topic."; err.Error() != want {
			t.Errorf("%s: text %q", topic, err.Error())
		}
	}
	if err := CheckCreateTopic("Orders"); err != nil {
		t.Errorf("Orders: %v", err)
	}
	if err := CheckCreateTopic("bad topic"); !errors.Is(err, ErrTopicIllegal) {
		t.Errorf("bad topic: %v", err)
	}
}

func TestValidateMessageRefusesUnsafeStrings(t *testing.T) {
	msg := func(tags, keys string, props map[string]string) *Message {
		return &Message{Topic: "T", Body: []byte("x"), Tags: tags, Keys: keys, Properties: props}
	}
	cases := []struct {
		name string
		msg  *Message
		rule error
		text string
	}{
		{"reserved TRAN_MSG would store a half message", msg("", "", map[string]string{"TRAN_MSG": "true"}),
			ErrReservedProperty, "The Property<TRAN_MSG> is used by system, input another please"},
		{"reserved DELAY", msg("", "", map[string]string{"DELAY": "3"}),
			ErrReservedProperty, "The Property<DELAY> is used by system, input another please"},
		{"TAGS belongs in the Tags field", msg("", "", map[string]string{"TAGS": "a"}),
			ErrReservedProperty, "The Property<TAGS> is used by system, input another please"},
		{"KEYS belongs in the Keys field", msg("", "k", map[string]string{"KEYS": "k"}),
			ErrReservedProperty, "The Property<KEYS> is used by system, input another please"},
		{"reserved only in 5.x", msg("", "", map[string]string{"TIMER_DELIVER_MS": "1"}),
			ErrReservedProperty, "The Property<TIMER_DELIVER_MS> is used by system, input another please"},
		{"reserved name checked before a blank value, as Java does", msg("", "", map[string]string{"CLUSTER": ""}),
			ErrReservedProperty, "The Property<CLUSTER> is used by system"},
		{"empty value", msg("", "", map[string]string{"order": ""}),
			ErrBlankProperty, `The name or value of property can not be null or blank string! (property "order")`},
		{"blank value", msg("", "", map[string]string{"order": " \t "}),
			ErrBlankProperty, `The name or value of property can not be null or blank string! (property "order")`},
		{"empty name", msg("", "", map[string]string{"": "v"}),
			ErrBlankProperty, `(property "")`},
		{"blank name", msg("", "", map[string]string{"  ": "v"}),
			ErrBlankProperty, `(property "  ")`},
		{"separator 0x01 in a value", msg("", "", map[string]string{"a": "x\x01TRAN_MSG"}),
			ErrPropertySeparator, `the value of property "a" contains a property separator (0x01 or 0x02)`},
		{"separator 0x02 in a value injects a property", msg("", "", map[string]string{"a": "x\x02TRAN_MSG\x01true"}),
			ErrPropertySeparator, `the value of property "a" contains a property separator`},
		{"separator in a name", msg("", "", map[string]string{"a\x02b": "v"}),
			ErrPropertySeparator, `the name of property "a\x02b" contains a property separator`},
		{"separator in tags", msg("t\x02TRAN_MSG\x01true", "", nil),
			ErrPropertySeparator, "the tags contains a property separator"},
		{"separator in keys", msg("", "k\x01", nil),
			ErrPropertySeparator, "the keys contains a property separator"},
		{"invalid UTF-8 in a value", msg("", "", map[string]string{"a": "caf\xe9"}),
			ErrInvalidUTF8, `the value of property "a" is not valid UTF-8`},
		{"invalid UTF-8 in a name", msg("", "", map[string]string{"caf\xe9": "v"}),
			ErrInvalidUTF8, `the name of property "caf\xe9" is not valid UTF-8`},
		{"invalid UTF-8 in tags", msg("\xff", "", nil), ErrInvalidUTF8, "the tags is not valid UTF-8"},
		{"invalid UTF-8 in keys", msg("", "a \xc3", nil), ErrInvalidUTF8, "the keys is not valid UTF-8"},
		{"body rules come first", &Message{Topic: "T", Tags: "\xff"}, ErrNilBody, "the message body is null"},
		{"the first offence in name order is reported", msg("", "", map[string]string{"b": "", "a": "x\x01", "c": "\xff"}),
			ErrPropertySeparator, `the value of property "a"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateMessage(tc.msg)
			if !errors.Is(err, tc.rule) {
				t.Fatalf("got %v, want rule %v", err, tc.rule)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Code != CodeMessageIllegal {
				t.Errorf("code: got %+v, want %d", ve, CodeMessageIllegal)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("text:\n got %q\nwant it to contain %q", err.Error(), tc.text)
			}
		})
	}
}

func TestValidateMessageAcceptsWhatRocketMQCarries(t *testing.T) {
	for _, m := range []*Message{
		{Topic: "T", Body: []byte("x"), Tags: "TagA", Keys: "k1 k2", Properties: map[string]string{
			"order-id": "42", "note": "grüße, 世界", "emoji": "🚀", "tran_msg": "lower case is not reserved",
			"padded": " v ", "tab\tinside": "a\tb"}},
		{Topic: "T", Body: []byte("x"), Properties: map[string]string{"UNIQ_KEY": "CALLER-ID", "WAIT": "false"}},
		{Topic: "T", Body: []byte("x")},
	} {
		if err := ValidateMessage(m); err != nil {
			t.Errorf("%+v: %v", m.Properties, err)
		}
	}
}

func TestCheckUserPropertiesRefusesEveryReservedName(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(reservedProperties)) {
		err := CheckUserProperties(map[string]string{"ok": "v", name: "v"})
		if !errors.Is(err, ErrReservedProperty) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	// The runtime lets its callers set these two; a gateway caller may not.
	for _, name := range []string{"UNIQ_KEY", "WAIT"} {
		if err := ValidateMessage(&Message{Topic: "T", Body: []byte("x"), Properties: map[string]string{name: "v"}}); err != nil {
			t.Errorf("runtime refused %s: %v", name, err)
		}
	}
	if err := CheckUserProperties(map[string]string{"order-id": "42"}); err != nil {
		t.Errorf("user property refused: %v", err)
	}
	if err := CheckUserProperties(map[string]string{"a": ""}); !errors.Is(err, ErrBlankProperty) {
		t.Errorf("blank value: got %v", err)
	}
}

func TestReservedPropertiesAreRocketMQsUnion(t *testing.T) {
	// 31 names in 4.9.8's STRING_HASH_SET, 51 in 5.3.3's, which contains every 4.9.8 name.
	if len(reservedProperties) != 51 {
		t.Errorf("%d reserved names, want 51", len(reservedProperties))
	}
	for _, name := range []string{remoting.PropertyTags, remoting.PropertyKeys, remoting.PropertyUniqKey,
		remoting.PropertyTransactionPrep, remoting.PropertyDelayLevel, remoting.PropertyTimerDeliverMS,
		remoting.PropertyMsgRegion, remoting.PropertyTraceSwitch, remoting.PropertyInstanceID} {
		if !IsReservedProperty(name) {
			t.Errorf("%s is not reserved", name)
		}
	}
}

func TestValidateMessageDoesNotAllocate(t *testing.T) {
	m := &Message{Topic: "T", Body: []byte("x"), Tags: "TagA", Keys: "k1", Properties: map[string]string{
		"order-id": "42", "note": "grüße", "UNIQ_KEY": "ABC"}}
	if n := testing.AllocsPerRun(100, func() { _ = ValidateMessage(m) }); n != 0 {
		t.Errorf("%v allocations per valid message", n)
	}
}
