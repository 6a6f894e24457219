package producer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/detourmq/detour/pkg/remoting"
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
	// ErrReservedProperty is a property whose name RocketMQ reserves for itself (MessageConst's
	// STRING_HASH_SET): brokers and consumers act on such names (TRAN_MSG stores a half message,
	// DELAY delays it), so a caller must not be able to set them as data.
	ErrReservedProperty = errors.New("reserved property name")
	// ErrBlankProperty is a property whose name or value is empty or only blanks, which Java's
	// Message.putUserProperty refuses and a broker would silently drop.
	ErrBlankProperty = errors.New("blank property name or value")
	// ErrPropertySeparator is a tag, key, property name or value holding 0x01 or 0x02, the bytes
	// that separate names, values and properties on the wire: such a string would be read back as
	// other properties than the ones sent.
	ErrPropertySeparator = errors.New("property separator in a string")
	// ErrInvalidUTF8 is a tag, key, property name or value that is not valid UTF-8. Brokers and
	// consumers decode properties as UTF-8, so such bytes would come back as replacement characters.
	ErrInvalidUTF8 = errors.New("string is not valid UTF-8")
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
// topic rules, forbidden topics, nil body, empty body, body over MaxMessageSize; then the string
// rules RocketMQ leaves to luck: tags and keys free of separators and valid UTF-8, and properties
// as Java's Message.putUserProperty takes them (no reserved name, no blank name or value) and free
// of separators and valid UTF-8.
//
// Of the reserved names, Properties may carry UNIQ_KEY (the caller's message id, kept on every
// attempt) and WAIT (whether the broker answers only once the message is stored), which RocketMQ's
// producer API also lets its callers set; every other reserved name, TAGS and KEYS included (they
// are the Tags and Keys fields), is refused. CheckUserProperties refuses those two as well.
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
	if err := checkString(m.Tags, func() string { return "tags" }); err != nil {
		return err
	}
	if err := checkString(m.Keys, func() string { return "keys" }); err != nil {
		return err
	}
	return checkProperties(m.Properties, producerProperties)
}

// reservedProperties are the names RocketMQ's MessageConst.STRING_HASH_SET holds in 4.9.8 and in
// 5.3.3 (the 5.x set contains the 4.9.x one). Java's Message.putUserProperty refuses them.
var reservedProperties = map[string]bool{
	// In both 4.9.8 and 5.3.3.
	"TRACE_ON": true, "MSG_REGION": true, "KEYS": true, "TAGS": true, "WAIT": true, "DELAY": true,
	"RETRY_TOPIC": true, "REAL_TOPIC": true, "REAL_QID": true, "TRAN_MSG": true, "PGROUP": true,
	"MIN_OFFSET": true, "MAX_OFFSET": true, "BUYER_ID": true, "ORIGIN_MESSAGE_ID": true,
	"TRANSFER_FLAG": true, "CORRECTION_FLAG": true, "MQ2_FLAG": true, "RECONSUME_TIME": true,
	"UNIQ_KEY": true, "MAX_RECONSUME_TIMES": true, "CONSUME_START_TIME": true, "INSTANCE_ID": true,
	"CORRELATION_ID": true, "REPLY_TO_CLIENT": true, "TTL": true, "ARRIVE_TIME": true,
	"PUSH_REPLY_TIME": true, "CLUSTER": true, "MSG_TYPE": true, "INNER_MULTI_QUEUE_OFFSET": true,
	// Added by 5.x: pop consumption, timer messages, dead-letter origin and checksums.
	"POP_CK": true, "POP_CK_OFFSET": true, "1ST_POP_TIME": true, "TRAN_PREPARED_QUEUE_OFFSET": true,
	"DUP_INFO": true, "EXTEND_UNIQ_INFO": true, "TIMER_DELAY_MS": true, "TIMER_DELAY_SEC": true,
	"TIMER_DELIVER_MS": true, "TIMER_ENQUEUE_MS": true, "TIMER_DEQUEUE_MS": true,
	"TIMER_ROLL_TIMES": true, "TIMER_OUT_MS": true, "TIMER_DEL_UNIQKEY": true,
	"TIMER_DELAY_LEVEL": true, "__BORNHOST": true, "BORN_TIMESTAMP": true, "DLQ_ORIGIN_TOPIC": true,
	"DLQ_ORIGIN_MESSAGE_ID": true, "__CRC32#": true,
}

// producerProperties are the reserved names the runtime's callers may set (see ValidateMessage).
var producerProperties = map[string]bool{
	remoting.PropertyUniqKey:        true,
	remoting.PropertyWaitStoreMsgOK: true,
}

// IsReservedProperty reports whether name is one of RocketMQ's reserved property names.
func IsReservedProperty(name string) bool { return reservedProperties[name] }

// CheckUserProperties applies the property rules of ValidateMessage to props as user properties,
// as Java's Message.putUserProperty does: no reserved name at all, UNIQ_KEY and WAIT included. The
// send gateway applies it, since its callers set data, not how RocketMQ handles the message.
func CheckUserProperties(props map[string]string) error {
	return checkProperties(props, nil)
}

// checkProperties checks every property, allowing the reserved names in allowed.
func checkProperties(props map[string]string, allowed map[string]bool) error {
	for k, v := range props {
		if checkProperty(k, v, allowed) != nil {
			// Report the first offence in name order, so that one message always gets one answer.
			for _, k := range slices.Sorted(maps.Keys(props)) {
				if err := checkProperty(k, props[k], allowed); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkProperty applies the rules in Java's order (reserved name, then blank), then detour's.
func checkProperty(name, value string, allowed map[string]bool) error {
	if reservedProperties[name] && !allowed[name] {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrReservedProperty,
			Message: fmt.Sprintf("The Property<%s> is used by system, input another please", name)}
	}
	if javaBlank(name) || javaBlank(value) {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBlankProperty,
			Message: fmt.Sprintf("The name or value of property can not be null or blank string! (property %q)", name)}
	}
	if err := checkString(name, func() string { return fmt.Sprintf("name of property %q", name) }); err != nil {
		return err
	}
	return checkString(value, func() string { return fmt.Sprintf("value of property %q", name) })
}

// checkString refuses a string that holds a property separator or is not valid UTF-8; what names
// the string in the error's text and is only called for a refusal, keeping the check free of
// allocations.
func checkString(s string, what func() string) error {
	if strings.ContainsAny(s, "\x01\x02") {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrPropertySeparator,
			Message: fmt.Sprintf("the %s contains a property separator (0x01 or 0x02), which RocketMQ cannot carry", what())}
	}
	if !utf8.ValidString(s) {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrInvalidUTF8,
			Message: fmt.Sprintf("the %s is not valid UTF-8", what())}
	}
	return nil
}

// javaBlank reports whether Java's s.trim().isEmpty() holds: trim drops every char up to U+0020
// from both ends, and UTF-8 encodes those as single bytes no other character uses.
func javaBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > ' ' {
			return false
		}
	}
	return true
}
