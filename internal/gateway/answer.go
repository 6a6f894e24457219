package gateway

import (
	"encoding/json"
	"strconv"
)

// jsonAppender is an answer that appends its JSON to a buffer exactly as encoding/json's Encoder
// writes it (HTML characters escaped, a newline after), without reflection: the 200 answers,
// written once per request.
type jsonAppender interface {
	appendJSON(b []byte) []byte
}

func (r *SendResponse) appendJSON(b []byte) []byte {
	b = appendJSONField(b, "{", "msgId", r.MsgID)
	if r.OffsetMsgID != "" {
		b = appendJSONField(b, ",", "offsetMsgId", r.OffsetMsgID)
	}
	b = appendJSONField(b, ",", "topic", r.Topic)
	b = appendJSONField(b, ",", "broker", r.Broker)
	b = strconv.AppendInt(append(b, `,"queueId":`...), int64(r.QueueID), 10)
	b = strconv.AppendInt(append(b, `,"queueOffset":`...), r.QueueOffset, 10)
	b = strconv.AppendInt(append(b, `,"attempts":`...), int64(r.Attempts), 10)
	b = appendJSONStrings(append(b, `,"brokersTried":`...), r.BrokersTried)
	b = appendJSONField(b, ",", "status", r.Status)
	b = strconv.AppendInt(append(b, `,"latencyMillis":`...), r.LatencyMillis, 10)
	return append(b, "}\n"...)
}

func (r *BatchResponse) appendJSON(b []byte) []byte {
	b = appendJSONField(b, "{", "topic", r.Topic)
	b = appendJSONField(b, ",", "broker", r.Broker)
	b = strconv.AppendInt(append(b, `,"queueId":`...), int64(r.QueueID), 10)
	b = strconv.AppendInt(append(b, `,"attempts":`...), int64(r.Attempts), 10)
	b = appendJSONStrings(append(b, `,"brokersTried":`...), r.BrokersTried)
	b = appendJSONField(b, ",", "status", r.Status)
	b = strconv.AppendInt(append(b, `,"latencyMillis":`...), r.LatencyMillis, 10)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		return append(b, "null}\n"...)
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		sep := ",{"
		if i == 0 {
			sep = "[{"
		}
		b = appendJSONField(b, sep, "msgId", m.MsgID)
		if m.OffsetMsgID != "" {
			b = appendJSONField(b, ",", "offsetMsgId", m.OffsetMsgID)
		}
		b = strconv.AppendInt(append(b, `,"queueOffset":`...), m.QueueOffset, 10)
		b = append(b, '}')
	}
	if len(r.Messages) == 0 {
		b = append(b, '[')
	}
	return append(b, "]}\n"...)
}

// appendJSONField appends sep (what opens the object or separates the field from the one
// before), then "name": and value as a JSON string.
func appendJSONField(b []byte, sep, name, value string) []byte {
	b = append(append(append(append(b, sep...), '"'), name...), `":`...)
	return appendJSONString(b, value)
}

// appendJSONStrings appends a list of strings, null for nil.
func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as encoding/json writes it: quoted as it is when every byte is
// printable ASCII that needs no escape (ids, topic and broker names, statuses), otherwise by
// encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s)
			return append(b, quoted...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}
