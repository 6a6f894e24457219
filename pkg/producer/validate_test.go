package producer

import (
	"errors"
	"fmt"
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
			props, uniq := sendProperties(&tc.msg)
			got := remoting.DecodeProperties(props)
			if !strings.HasSuffix(props, "\x02") {
				t.Errorf("no trailing separator: %q", props)
			}
			if tc.want["UNIQ_KEY"] == "*" {
				if len(got["UNIQ_KEY"]) != 32 || got["UNIQ_KEY"] != uniq {
					t.Errorf("generated UNIQ_KEY %q, returned %q", got["UNIQ_KEY"], uniq)
				}
				tc.want["UNIQ_KEY"] = uniq
			} else if uniq != tc.want["UNIQ_KEY"] {
				t.Errorf("uniq %q", uniq)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("properties %v, want %v", got, tc.want)
			}
			if fmt.Sprint(tc.msg.Properties) != before {
				t.Errorf("message modified: %v", tc.msg.Properties)
			}
		})
	}
	_, a := sendProperties(&Message{})
	_, b := sendProperties(&Message{})
	if a == b {
		t.Fatal("two messages got the same UNIQ_KEY")
	}
}
