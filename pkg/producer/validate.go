package producer

import (
	"errors"
	"fmt"
	"strings"
)

// Limits and codes that RocketMQ's client applies before a message leaves the process.
const (
	// MaxTopicLength is the longest topic name RocketMQ accepts on send.
	MaxTopicLength = 127
	// MaxMessageSize is RocketMQ's default client-side body limit (4 MiB), checked before compression.
	MaxMessageSize = 4 * 1024 * 1024

	// MaxPropertiesSize is the longest encoded properties a broker stores (a Java short). The broker
	// adds CLUSTER (and UNIQ_KEY when missing) before it checks, so a message just under the limit
	// can still be refused there.
	MaxPropertiesSize = 32767

	// CodeMessageIllegal is RocketMQ's MESSAGE_ILLEGAL response code, which its validator uses for
	// message and body rules.
	CodeMessageIllegal = 13
	// CodeClientRule is the code (-1) RocketMQ's validator attaches to topic-rule violations.
	CodeClientRule = -1
)

// Sentinel errors for errors.Is on a *ValidationError; each names one of RocketMQ's client rules.
var (
	ErrNilMessage     = errors.New("nil message")
	ErrBlankTopic     = errors.New("blank topic")
	ErrTopicTooLong   = errors.New("topic too long")
	ErrTopicIllegal   = errors.New("topic contains illegal characters")
	ErrTopicForbidden = errors.New("topic is forbidden")
	ErrSystemTopic    = errors.New("topic conflicts with a system topic")
	ErrNilBody        = errors.New("nil body")
	ErrEmptyBody      = errors.New("empty body")
	ErrBodyTooLarge   = errors.New("body too large")
	// ErrPropertiesTooLarge is detour's own rule: RocketMQ's client lets such a message go and the
	// broker refuses it (MESSAGE_ILLEGAL), which would cost an attempt and a fault mark on a healthy
	// broker.
	ErrPropertiesTooLarge = errors.New("properties too large")
)

// ValidationError is a message or topic refused before any I/O. Its text is RocketMQ's own
// message for the rule, so operators can match it against Java client logs.
type ValidationError struct {
	// Code is the code RocketMQ attaches to the rule: CodeClientRule for topic rules,
	// CodeMessageIllegal for message and body rules.
	Code int
	// Rule is one of the Err* sentinels above.
	Rule error
	// Message is RocketMQ's text for the violation.
	Message string
}

// Error returns RocketMQ's message for the broken rule.
func (e *ValidationError) Error() string { return e.Message }

// Is reports whether target is the rule this error broke, so errors.Is(err, ErrEmptyBody) works.
func (e *ValidationError) Is(target error) bool { return target == e.Rule }

// legalTopicChar marks the ASCII characters RocketMQ allows in topic names: ^[%|a-zA-Z0-9_-]+$.
// Anything at or above 128 is illegal, as in RocketMQ's bitmap.
var legalTopicChar = func() (t [128]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "%|_-" {
		t[c] = true
	}
	return t
}()

// notAllowedSendTopics are the topics RocketMQ's producer refuses to send to.
var notAllowedSendTopics = map[string]bool{
	"SCHEDULE_TOPIC_XXXX":         true,
	"RMQ_SYS_TRANS_HALF_TOPIC":    true,
	"RMQ_SYS_TRANS_OP_HALF_TOPIC": true,
	"TRANS_CHECK_MAX_TIME_TOPIC":  true,
	"SELF_TEST_TOPIC":             true,
	"OFFSET_MOVED_EVENT":          true,
}

// systemTopics is RocketMQ's wider system-topic set. It is not checked on send (RocketMQ does not
// either) but a topic in it cannot be created through CreateTopic.
var systemTopics = map[string]bool{
	"TBW102":                      true,
	"SCHEDULE_TOPIC_XXXX":         true,
	"BenchmarkTest":               true,
	"RMQ_SYS_TRANS_HALF_TOPIC":    true,
	"RMQ_SYS_TRACE_TOPIC":         true,
	"RMQ_SYS_TRANS_OP_HALF_TOPIC": true,
	"TRANS_CHECK_MAX_TIME_TOPIC":  true,
	"SELF_TEST_TOPIC":             true,
	"OFFSET_MOVED_EVENT":          true,
	"CHECKPOINT_TOPIC":            true,
}

const systemTopicPrefix = "rmq_sys_"

// IsSystemTopic reports whether topic is one of RocketMQ's system topics (including the rmq_sys_
// prefix), which user resources must not claim.
func IsSystemTopic(topic string) bool {
	return systemTopics[topic] || strings.HasPrefix(topic, systemTopicPrefix)
}

// CheckTopic applies RocketMQ's topic-name rules (blank, length, character set) in RocketMQ's order.
func CheckTopic(topic string) error {
	if strings.TrimSpace(topic) == "" {
		return &ValidationError{Code: CodeClientRule, Rule: ErrBlankTopic, Message: "The specified topic is blank"}
	}
	// RocketMQ measures Java chars; for the legal set (ASCII) bytes and chars agree, and any
	// non-ASCII byte is illegal anyway, so a byte count only differs for topics refused below.
	if len(topic) > MaxTopicLength {
		return &ValidationError{Code: CodeClientRule, Rule: ErrTopicTooLong,
			Message: fmt.Sprintf("The specified topic is longer than topic max length %d.", MaxTopicLength)}
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if c >= 128 || !legalTopicChar[c] {
			return &ValidationError{Code: CodeClientRule, Rule: ErrTopicIllegal,
				Message: fmt.Sprintf("The specified topic[%s] contains illegal characters, allowing only ^[%%|a-zA-Z0-9_-]+$", topic)}
		}
	}
	return nil
}

// CheckSendTopic is CheckTopic plus RocketMQ's list of topics that cannot be sent to.
func CheckSendTopic(topic string) error {
	if err := CheckTopic(topic); err != nil {
		return err
	}
	if notAllowedSendTopics[topic] {
		return &ValidationError{Code: CodeClientRule, Rule: ErrTopicForbidden,
			Message: fmt.Sprintf("Sending message to topic[%s] is forbidden.", topic)}
	}
	return nil
}

// CheckCreateTopic is CheckTopic plus RocketMQ's system-topic conflict rule used by admin paths.
func CheckCreateTopic(topic string) error {
	if err := CheckTopic(topic); err != nil {
		return err
	}
	if IsSystemTopic(topic) {
		return &ValidationError{Code: CodeClientRule, Rule: ErrSystemTopic,
			Message: fmt.Sprintf("The topic[%s] is conflict with system topic.", topic)}
	}
	return nil
}

// ValidateMessage applies RocketMQ's client-side message checks, in RocketMQ's order: nil message,
// topic rules, forbidden topics, nil body, empty body, body over MaxMessageSize.
func ValidateMessage(m *Message) error {
	if m == nil {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrNilMessage, Message: "the message is null"}
	}
	if err := CheckSendTopic(m.Topic); err != nil {
		return err
	}
	if m.Body == nil {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrNilBody, Message: "the message body is null"}
	}
	if len(m.Body) == 0 {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrEmptyBody, Message: "the message body length is zero"}
	}
	if len(m.Body) > MaxMessageSize {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBodyTooLarge,
			Message: fmt.Sprintf("the message body size over max value, MAX: %d", MaxMessageSize)}
	}
	return nil
}

// checkPropertiesSize refuses encoded properties that no broker stores.
func checkPropertiesSize(props string) error {
	if len(props) > MaxPropertiesSize {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrPropertiesTooLarge,
			Message: fmt.Sprintf("the message properties length is %d bytes, over the broker's limit of %d", len(props), MaxPropertiesSize)}
	}
	return nil
}
