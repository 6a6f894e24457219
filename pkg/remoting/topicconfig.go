package remoting

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// GetTopicConfig is RocketMQ 5's GET_TOPIC_CONFIG request code: a broker answers one topic's
// configuration, its attributes included. RocketMQ 4.x brokers do not serve it.
const GetTopicConfig int16 = 351

// MaxTopicConfigBody bounds a GET_TOPIC_CONFIG answer's body: a topic's configuration is a few
// hundred bytes of JSON, more only with a static topic's queue mapping, which detour does not read.
const MaxTopicConfigBody = 64 << 10

// AttributeMessageType is the topic attribute that names the message type a topic takes (NORMAL,
// FIFO, DELAY, TRANSACTION or MIXED); a topic without it takes NORMAL messages.
const AttributeMessageType = "message.type"

// ConfigMaxMessageSize is maxMessageSize of a broker's store configuration: the largest body it
// stores, checked on the body as it arrives (after any compression by the sender).
const ConfigMaxMessageSize = "maxMessageSize"

// NewGetTopicConfigRequest builds GET_TOPIC_CONFIG for topic, without the static-topic mapping.
func NewGetTopicConfigRequest(topic string) *Command {
	return NewRequest(GetTopicConfig, map[string]string{"topic": topic, "lo": "false"}, nil)
}

// TopicConfig is what detour reads of a broker's topic configuration.
type TopicConfig struct {
	// Attributes are the topic's attributes by name (message.type, queue.type, ...).
	Attributes map[string]string `json:"attributes"`
}

// ParseTopicConfig reads a GET_TOPIC_CONFIG answer: the topic's configuration as the broker's
// JSON, of which only the attributes are kept. An answer other than SUCCESS is a *ResponseError.
func ParseTopicConfig(resp *Command) (TopicConfig, error) {
	if resp.Code != Success {
		return TopicConfig{}, &ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	if len(resp.Body) > MaxTopicConfigBody {
		return TopicConfig{}, overLimit(nil, "topic config body of %d bytes is over the limit of %d", len(resp.Body), MaxTopicConfigBody)
	}
	var tc TopicConfig
	if err := json.Unmarshal(resp.Body, &tc); err != nil {
		return TopicConfig{}, fmt.Errorf("%w: topic config: %w", ErrBadResponse, err)
	}
	return tc, nil
}

// MessageType is the topic's message.type attribute; "NORMAL" when unset, as brokers read it.
func (tc TopicConfig) MessageType() string {
	if v, ok := tc.Attributes[AttributeMessageType]; ok {
		return v
	}
	return "NORMAL"
}

// MaxMessageSizeOf is a broker configuration's maxMessageSize, or -1 when it lacks the key or
// its value is not a positive number.
func MaxMessageSizeOf(c BrokerConfig) int {
	v, err := strconv.Atoi(c.Entries[ConfigMaxMessageSize])
	if err != nil || v <= 0 {
		return -1
	}
	return v
}
