package remoting

import (
	"errors"
	"strings"
	"testing"
)

// TestParseTopicConfigReadsTheMessageType proves a GET_TOPIC_CONFIG answer's message.type is
// read as a 5.x broker writes it, NORMAL when the topic has none, and that broken or oversized
// answers are errors.
func TestParseTopicConfigReadsTheMessageType(t *testing.T) {
	answer := func(code int16, body string) *Command {
		return &Command{Code: code, Body: []byte(body)}
	}
	cases := []struct {
		name    string
		resp    *Command
		want    string
		wantErr bool
	}{
		{"a FIFO topic", answer(Success, `{"attributes":{"message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":2,"topicName":"T","writeQueueNums":2}`), "FIFO", false},
		{"a topic without attributes", answer(Success, `{"attributes":{},"perm":6,"topicName":"T"}`), "NORMAL", false},
		{"attributes left out", answer(Success, `{"perm":6,"topicName":"T"}`), "NORMAL", false},
		{"a MIXED topic beside another attribute", answer(Success, `{"attributes":{"queue.type":"BatchCQ","message.type":"MIXED"}}`), "MIXED", false},
		{"not JSON", answer(Success, `perm=6`), "", true},
		{"a refusal", answer(TopicNotExist, ""), "", true},
		{"an answer over the bound", answer(Success, `{"topicName":"`+strings.Repeat("x", MaxTopicConfigBody)+`"}`), "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc2, err := ParseTopicConfig(tc.resp)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && tc2.MessageType() != tc.want {
				t.Fatalf("type %q, want %q", tc2.MessageType(), tc.want)
			}
		})
	}
	var re *ResponseError
	if _, err := ParseTopicConfig(answer(TopicNotExist, "")); !errors.As(err, &re) {
		t.Fatalf("a refusal is %T, want *ResponseError", err)
	}
}

// TestMaxMessageSizeOfReadsTheBrokersLimit proves maxMessageSize is read from a broker's
// configuration, and unknown when missing or not a positive number.
func TestMaxMessageSizeOfReadsTheBrokersLimit(t *testing.T) {
	cases := []struct {
		value string
		set   bool
		want  int
	}{{"4194304", true, 4194304}, {"1048576", true, 1048576}, {"", false, -1}, {"big", true, -1}, {"0", true, -1}, {"-5", true, -1}}
	for _, tc := range cases {
		cfg := BrokerConfig{Entries: map[string]string{}}
		if tc.set {
			cfg.Entries[ConfigMaxMessageSize] = tc.value
		}
		if got := MaxMessageSizeOf(cfg); got != tc.want {
			t.Errorf("maxMessageSize %q: %d, want %d", tc.value, got, tc.want)
		}
	}
}
