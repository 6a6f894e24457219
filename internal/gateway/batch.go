package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/detourmq/detour/pkg/producer"
)

// BatchPath is the route of the batch endpoint: many messages to one Topic in one request, sent
// as one SEND_BATCH_MESSAGE.
const BatchPath = MessagesPath + ":batch"

// BatchSender sends a batch of messages by a route; *producer.Runtime is one. A Sender that is
// not a BatchSender answers batch requests 501.
type BatchSender interface {
	SendBatchRoute(ctx context.Context, route string, msgs []*producer.Message) (*producer.BatchResult, error)
}

// Codes of answers only batch requests get.
const (
	CodeUnsupportedMediaType = "UnsupportedMediaType" // 415: a batch that is not JSON
	CodeNotImplemented       = "NotImplemented"       // 501: the gateway's Sender sends no batches
)

// JSONBatch is the body of a batch request: the messages, each in the JSON form of a single send.
type JSONBatch struct {
	Messages []JSONMessage `json:"messages"`
}

// batchMessage is JSONMessage as the gateway decodes it in a batch. A body that is absent or
// null stays nil; an empty one is empty but not nil.
type batchMessage struct {
	Body       []byte            `json:"body,omitempty"` // standard base64, as encoding/json reads []byte
	BodyText   textBody          `json:"bodyText,omitempty"`
	Tags       string            `json:"tags,omitempty"`
	Keys       Keys              `json:"keys,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// MessageGroup is refused: a batch goes to one queue the runtime picks, not a group's.
	MessageGroup string `json:"messageGroup,omitempty"`
	// DeliverAtMillis and DelayMillis are refused: RocketMQ delays no message of a batch.
	DeliverAtMillis int64 `json:"deliverAtMillis,omitempty"`
	DelayMillis     int64 `json:"delayMillis,omitempty"`
}

// textBody is a JSON string taken as its UTF-8 bytes.
type textBody []byte

// UnmarshalJSON implements json.Unmarshaler. A string without escapes (the request is known to
// be valid UTF-8) is copied as it is; one with escapes is unquoted by encoding/json.
func (t *textBody) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) >= 2 && data[0] == '"' && bytes.IndexByte(data[1:len(data)-1], '\\') < 0 {
		*t = append(make([]byte, 0, len(data)-2), data[1:len(data)-1]...)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*t = []byte(s)
	return nil
}

// BatchResponse is the 200 answer to a batch: where the batch was stored (one queue, in order)
// and each message's ids, in the order of the request.
type BatchResponse struct {
	Topic   string `json:"topic"`
	Broker  string `json:"broker"`
	QueueID int    `json:"queueId"`
	// Attempts counts the attempts made; BrokersTried names the broker of each, in order.
	Attempts      int      `json:"attempts"`
	BrokersTried  []string `json:"brokersTried"`
	Status        string   `json:"status"`
	LatencyMillis int64    `json:"latencyMillis"`
	// Messages holds one entry per message of the request, in its order.
	Messages []BatchMessageResult `json:"messages"`
}

// BatchMessageResult is one stored message of a batch.
type BatchMessageResult struct {
	// MsgID is the message's UNIQ_KEY.
	MsgID string `json:"msgId"`
	// OffsetMsgID is the broker's id of the stored message, when the broker named one per message.
	OffsetMsgID string `json:"offsetMsgId,omitempty"`
	// QueueOffset is the message's offset in the queue: the batch's messages are consecutive.
	QueueOffset int64 `json:"queueOffset"`
}

// maxBatchRequest is the largest batch request body read: a maximal batch in base64 plus room
// for every message's JSON fields.
var maxBatchRequest = int64(base64.StdEncoding.EncodedLen(producer.MaxMessageSize)) + 4*jsonOverhead

func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request) {
	target, ok := s.admit(w, r, maxBatchRequest)
	if !ok {
		return
	}
	if !isJSON(r) {
		writeError(w, http.StatusUnsupportedMediaType, ErrorResponse{Code: CodeUnsupportedMediaType,
			Error: `a batch is sent as JSON: Content-Type: application/json with {"messages":[...]}`})
		return
	}
	bs, ok := s.opts.Sender.(BatchSender)
	if !ok {
		writeError(w, http.StatusNotImplemented, ErrorResponse{Code: CodeNotImplemented, Error: "this gateway sends no batches"})
		return
	}
	msgs, err := readBatch(w, r)
	if err != nil {
		writeReadError(w, err)
		return
	}
	for i, m := range msgs {
		m.Topic = target.Topic
		// As for single sends: a caller sets data, never how RocketMQ treats a message.
		if err := producer.CheckUserProperties(m.Properties); err != nil {
			s.writeSendError(w, r, batchItemError(i, err))
			return
		}
	}
	begin := time.Now()
	res, err := bs.SendBatchRoute(r.Context(), target.Route, msgs)
	s.countSent(target, len(msgs), err, time.Since(begin))
	if err != nil {
		s.writeSendError(w, r, withBrokerNames(err, target.Brokers))
		return
	}
	writeJSON(w, http.StatusOK, batchResponse(withBrokerNames(res, target.Brokers)))
}

// batchItemError names the message of the batch a validation error is about.
func batchItemError(i int, err error) error {
	if ve, ok := errors.AsType[*producer.ValidationError](err); ok {
		return &producer.ValidationError{Code: ve.Code, Rule: ve.Rule, Message: "batch message " + strconv.Itoa(i) + ": " + ve.Message}
	}
	return err
}

// batchResponse is the answer for a stored batch.
func batchResponse(res *producer.BatchResult) *BatchResponse {
	out := &BatchResponse{
		Topic:         res.Topic,
		Broker:        res.Broker,
		QueueID:       res.QueueID,
		Attempts:      res.Attempts,
		BrokersTried:  res.BrokersTried,
		Status:        res.Status,
		LatencyMillis: res.Latency.Milliseconds(),
		Messages:      make([]BatchMessageResult, len(res.MsgIDs)),
	}
	for i, id := range res.MsgIDs {
		out.Messages[i] = BatchMessageResult{MsgID: id, QueueOffset: res.QueueOffset + int64(i)}
		if res.OffsetMsgIDs != nil {
			out.Messages[i].OffsetMsgID = res.OffsetMsgIDs[i]
		}
	}
	return out
}

// readBatch reads and decodes a batch request into messages without Topic.
func readBatch(w http.ResponseWriter, r *http.Request) ([]*producer.Message, error) {
	data, err := readBody(w, r, maxBatchRequest)
	if err != nil {
		return nil, err
	}
	// As for single messages: bytes that are not UTF-8 would be stored other than sent.
	if !utf8.Valid(data) {
		return nil, badRequest("decoding the JSON batch: the request is not valid UTF-8")
	}
	jb, err := decodeBatch(data)
	if err != nil {
		return nil, err
	}
	if len(jb) == 0 {
		return nil, badRequest(`the batch holds no message: send {"messages":[...]}`)
	}
	// One allocation for all the messages; each message's body, tags, keys and properties are
	// its own.
	store := make([]producer.Message, len(jb))
	msgs := make([]*producer.Message, len(jb))
	for i := range jb {
		if err := fillBatchMessage(&store[i], &jb[i]); err != nil {
			return nil, &requestError{status: err.status, code: err.code, msg: "batch message " + strconv.Itoa(i) + ": " + err.msg}
		}
		msgs[i] = &store[i]
	}
	return msgs, nil
}

// decodeBatch decodes a JSONBatch's messages from data: the usual form in one pass
// (decodeBatchFast), any other as encoding/json reads it (decodeBatchJSON).
func decodeBatch(data []byte) ([]batchMessage, error) {
	if msgs, ok, err := decodeBatchFast(data); ok {
		return msgs, err
	}
	return decodeBatchJSON(data)
}

// decodeBatchJSON decodes a JSONBatch's messages from data as a stream, one message at a time: the
// request is scanned once for its structure and once per message for its fields (decoding the
// whole object, then its list, would scan every byte four times), and decoding stops past
// MaxBatchMessages, so a request of a million tiny messages costs what it sent, not a decoded
// message for each. The object may hold "messages" only, once.
func decodeBatchJSON(data []byte) ([]batchMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := expectDelim(dec, '{', "the batch must be a JSON object"); err != nil {
		return nil, err
	}
	var msgs []batchMessage
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badRequest("decoding the JSON batch: %v", err)
		}
		switch key, _ := tok.(string); {
		case key != "messages":
			return nil, badRequest("decoding the JSON batch: json: unknown field %q", key)
		case seen:
			return nil, badRequest(`decoding the JSON batch: json: repeated field "messages"`)
		}
		seen = true
		if msgs, err = decodeBatchMessages(dec); err != nil {
			return nil, err
		}
	}
	if err := expectDelim(dec, '}', "the batch must be a JSON object"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("decoding the JSON batch: more than one JSON value")
	}
	return msgs, nil
}

// decodeBatchMessages decodes the list of a batch's messages (null for none).
func decodeBatchMessages(dec *json.Decoder) ([]batchMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, badRequest("decoding the JSON batch: %v", err)
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('[') {
		return nil, badRequest("decoding the JSON batch: messages must be a list")
	}
	var msgs []batchMessage
	for dec.More() {
		if len(msgs) == producer.MaxBatchMessages {
			return nil, errTooManyInBatch()
		}
		msgs = append(msgs, batchMessage{})
		if err := dec.Decode(&msgs[len(msgs)-1]); err != nil {
			return nil, badRequest("decoding the JSON batch: message %d: %v", len(msgs)-1, err)
		}
	}
	return msgs, expectDelim(dec, ']', "messages must be a list")
}

// expectDelim reads the next token, which must be d.
func expectDelim(dec *json.Decoder, d json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return badRequest("decoding the JSON batch: %v", err)
	}
	if tok != d {
		return badRequest("decoding the JSON batch: %s", what)
	}
	return nil
}

// fillMessage sets m from the JSON form jm.
func fillMessage(m *producer.Message, jm *JSONMessage) *requestError {
	m.Tags = jm.Tags
	if len(jm.Keys) > 0 {
		m.Keys = strings.Join(jm.Keys, " ")
	}
	switch {
	case jm.Body != nil && jm.BodyText != nil:
		return badRequest("set either body (base64) or bodyText, not both")
	case jm.Body != nil:
		if base64.StdEncoding.DecodedLen(len(*jm.Body)) > producer.MaxMessageSize+2 {
			return tooLarge()
		}
		b, err := base64.StdEncoding.DecodeString(*jm.Body)
		if err != nil {
			return badRequest("body is not standard base64: %v", err)
		}
		m.Body = b
	case jm.BodyText != nil:
		m.Body = []byte(*jm.BodyText)
	}
	if len(m.Body) > producer.MaxMessageSize {
		return tooLarge()
	}
	if len(jm.Properties) > 0 {
		m.Properties = maps.Clone(jm.Properties)
	}
	return nil
}

// fillBatchMessage sets m from bm, whose body bytes m takes over.
func fillBatchMessage(m *producer.Message, bm *batchMessage) *requestError {
	if bm.MessageGroup != "" {
		return badRequest("a batch carries no message group: send ordered messages one per request")
	}
	if bm.DeliverAtMillis != 0 || bm.DelayMillis != 0 {
		return badRequest("a batch carries no delivery time (RocketMQ delays no message of a batch): send timed messages one per request")
	}
	if bm.Body != nil && bm.BodyText != nil {
		return badRequest("set either body (base64) or bodyText, not both")
	}
	m.Body = bm.Body
	if bm.BodyText != nil {
		m.Body = bm.BodyText
	}
	if len(m.Body) > producer.MaxMessageSize {
		return tooLarge()
	}
	m.Tags = bm.Tags
	if len(bm.Keys) > 0 {
		m.Keys = strings.Join(bm.Keys, " ")
	}
	// The map was made for this request: the message takes it over.
	m.Properties = bm.Properties
	return nil
}
