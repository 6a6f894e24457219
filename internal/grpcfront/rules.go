package grpcfront

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// The Proxy's limits on a message's strings, at the Proxy's defaults (ProxyConfig).
const (
	// maxUserProperties is how many user properties a message may carry (userPropertyMaxNum).
	maxUserProperties = 128
	// maxUserPropertySize bounds the bytes of the user properties' names and values, the tag and
	// the keys, together (maxUserPropertySize).
	maxUserPropertySize = 16 << 10
	// maxMessageGroupSize: a message group must be shorter than this many bytes
	// (maxMessageGroupSize; the Proxy refuses a group of exactly this size too).
	maxMessageGroupSize = 64
	// maxDeliveryDelay is how far ahead a delivery time may lie (maxDelayTimeMills, one day).
	maxDeliveryDelay = 24 * 60 * 60 * 1000 // ms
)

// checkTopicName applies the Proxy's topic rules: RocketMQ's name rules (blank, at most 127
// characters of ^[%|a-zA-Z0-9_-]+$) and no system topic.
func checkTopicName(name string) *rmqpb.Status {
	if err := producer.CheckTopic(name); err != nil {
		return newStatus(rmqpb.Code_ILLEGAL_TOPIC, "%v", err)
	}
	if producer.IsSystemTopic(name) {
		return newStatus(rmqpb.Code_ILLEGAL_TOPIC, "topic %s is one of RocketMQ's system topics, which clients cannot use", name)
	}
	return nil
}

// hasControl reports whether s holds a control character as Java's CharMatcher.javaIsoControl
// sees them: U+0000 to U+001F and U+007F to U+009F.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// javaWhitespace is Java's Character.isWhitespace: the Unicode space, line and paragraph
// separators but the no-break spaces, and the ASCII controls TAB to CR and FS to US.
func javaWhitespace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1c && r <= 0x1f:
		return true
	case r == 0xa0, r == 0x2007, r == 0x202f:
		return false
	}
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// blank is the Proxy's StringUtils.isBlank for a non-empty string: only Java whitespace.
func blank(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !javaWhitespace(r) }) < 0
}

// checkTag applies the Proxy's tag rules to a non-empty tag: not blank, no '|' (the separator of
// tag expressions, so no consumer could subscribe to it), no control character.
func checkTag(tag string) *rmqpb.Status {
	switch {
	case tag == "":
		return nil
	case blank(tag):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_TAG, "the tag is only whitespace")
	case strings.Contains(tag, "|"):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_TAG, "the tag %q holds '|', the separator of tag expressions, so no consumer could subscribe to it", tag)
	case hasControl(tag):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_TAG, "the tag %q holds a control character", tag)
	}
	return nil
}

// checkKey applies the Proxy's key rules to a non-empty key: not blank, no control character.
func checkKey(key string) *rmqpb.Status {
	switch {
	case key == "":
		return nil
	case blank(key):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_KEY, "a key is only whitespace")
	case hasControl(key):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_KEY, "the key %q holds a control character", key)
	}
	return nil
}

// checkGroup applies the Proxy's message-group rules to a non-empty group: not blank, under
// maxMessageGroupSize bytes, no control character.
func checkGroup(group string) *rmqpb.Status {
	switch {
	case group == "":
		return nil
	case blank(group):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "the message group is only whitespace")
	case len(group) >= maxMessageGroupSize:
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "the message group is %d bytes, the limit is under %d", len(group), maxMessageGroupSize)
	case hasControl(group):
		return newStatus(rmqpb.Code_ILLEGAL_MESSAGE_GROUP, "the message group %q holds a control character", group)
	}
	return nil
}

// checkUserProperties applies the Proxy's property rules (count, reserved names, control
// characters, in that order for each property) and detour's one more: no empty name or value,
// which a broker drops without a word when it stores the message. It returns the bytes the
// names and values count towards maxUserPropertySize.
func checkUserProperties(props map[string]string) (int, *rmqpb.Status) {
	if len(props) > maxUserProperties {
		return 0, newStatus(rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE, "the message has %d user properties, over the limit of %d", len(props), maxUserProperties)
	}
	size := 0
	for _, k := range slices.Sorted(maps.Keys(props)) {
		v := props[k]
		switch {
		case producer.IsReservedProperty(k):
			return 0, newStatus(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "user property %s is reserved: RocketMQ acts on it", k)
		case hasControl(k):
			return 0, newStatus(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "the name of user property %q holds a control character", k)
		case hasControl(v):
			return 0, newStatus(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of user property %q holds a control character", k)
		case k == "" || v == "":
			return 0, newStatus(rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY,
				"user property %q has an empty name or value, which a broker drops from the stored message", k)
		}
		size += len(k) + len(v)
	}
	return size, nil
}

// checkDeliveryDelay refuses a delivery time further ahead than the Proxy lets a message wait.
func checkDeliveryDelay(aheadMillis int64) *rmqpb.Status {
	if aheadMillis > maxDeliveryDelay {
		return newStatus(rmqpb.Code_ILLEGAL_DELIVERY_TIME, "the delivery time is %d ms ahead, beyond the limit of %d ms (one day)", aheadMillis, maxDeliveryDelay)
	}
	return nil
}

// checkBodyFits refuses bodies over a broker's maxMessageSize, measured before detour
// compresses anything, as the Proxy measures what it passes on.
func checkBodyFits(out []outgoing, brokerMax int) *rmqpb.Status {
	for i, o := range out {
		if len(o.msg.Body) > brokerMax {
			st := newStatus(rmqpb.Code_MESSAGE_BODY_TOO_LARGE, "the message body is %d bytes, over the brokers' maxMessageSize of %d", len(o.msg.Body), brokerMax)
			if len(out) > 1 {
				st.Message = fmt.Sprintf("message %d: %s", i, st.Message)
			}
			return st
		}
	}
	return nil
}
