package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/detourmq/detour/pkg/producer"
)

// Headers of the raw form: the request body is the message body, and these carry the rest.
const (
	// HeaderTags carries the message's tags (RocketMQ's TAGS property).
	HeaderTags = "X-Detour-Tags"
	// HeaderKeys carries the message's keys, separated by spaces as RocketMQ separates KEYS;
	// repeating the header adds keys.
	HeaderKeys = "X-Detour-Keys"
	// HeaderPropertyPrefix starts a user property header: X-Detour-Property-Order-Id: 42 sets the
	// property "order-id". HTTP header names are case-insensitive, so names arrive lower-cased;
	// the JSON form keeps a property name's case.
	HeaderPropertyPrefix = "X-Detour-Property-"
	// HeaderMessageGroup carries the message's group: every message of a group goes to the same
	// queue, in order (see Runtime.SendOrderedRoute).
	HeaderMessageGroup = "X-Detour-Message-Group"
	// HeaderDeliverAt carries when consumers may have the message at the earliest, in
	// milliseconds since the Unix epoch; HeaderDelay the same as a delay from now, in
	// milliseconds (see Runtime.SendTimedRoute).
	HeaderDeliverAt = "X-Detour-Deliver-At-Millis"
	HeaderDelay     = "X-Detour-Delay-Millis"
)

// delivery is how a request asks for its message to be sent: by group, or for later.
type delivery struct {
	group          string
	deliverAtMilli int64
	delayMilli     int64
}

// deliverAt is when the message may be delivered, zero for at once.
func (d delivery) deliverAt(now time.Time) (time.Time, error) {
	switch {
	case d.deliverAtMilli < 0 || d.delayMilli < 0:
		return time.Time{}, badRequest("a delivery time or delay cannot be negative")
	case d.deliverAtMilli > 0 && d.delayMilli > 0:
		return time.Time{}, badRequest("set either a delivery time or a delay, not both")
	case d.deliverAtMilli > 0:
		return time.UnixMilli(d.deliverAtMilli), nil
	case d.delayMilli > 0:
		return now.Add(time.Duration(d.delayMilli) * time.Millisecond), nil
	}
	return time.Time{}, nil
}

// headerDelivery reads the delivery headers of the raw form.
func headerDelivery(h http.Header) (delivery, error) {
	d := delivery{group: h.Get(HeaderMessageGroup)}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{HeaderDeliverAt, &d.deliverAtMilli}, {HeaderDelay, &d.delayMilli}} {
		v := h.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return d, badRequest("%s is not a whole number of milliseconds: %q", f.name, v)
		}
		*f.dst = n
	}
	return d, nil
}

// jsonOverhead is what a JSON request may carry besides the base64 body: tags, keys and
// properties.
const jsonOverhead = 1 << 20

// maxJSONRequest is the largest JSON request body read: a maximal message body in base64 plus
// room for the other fields.
var maxJSONRequest = int64(base64.StdEncoding.EncodedLen(producer.MaxMessageSize)) + jsonOverhead

// JSONMessage is the JSON form of a send request (Content-Type: application/json). Exactly one
// of Body (standard base64) and BodyText (used as UTF-8 bytes) carries the message body.
type JSONMessage struct {
	Body       *string           `json:"body,omitempty"`
	BodyText   *string           `json:"bodyText,omitempty"`
	Tags       string            `json:"tags,omitempty"`
	Keys       Keys              `json:"keys,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// MessageGroup, when set, sends the message to its group's queue, in order with the group's
	// other messages.
	MessageGroup string `json:"messageGroup,omitempty"`
	// DeliverAtMillis (milliseconds since the Unix epoch) or DelayMillis (from now) ask for the
	// message to reach consumers no earlier.
	DeliverAtMillis int64 `json:"deliverAtMillis,omitempty"`
	DelayMillis     int64 `json:"delayMillis,omitempty"`
}

// Keys are a message's keys. In JSON they are a list of strings or one string of
// space-separated keys.
type Keys []string

// UnmarshalJSON implements json.Unmarshaler.
func (k *Keys) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*k = strings.Fields(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return errors.New("keys must be a string or a list of strings")
	}
	*k = many
	return nil
}

// requestError is a request the gateway refuses before sending, with the status to answer.
type requestError struct {
	status int
	code   string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, code: CodeInvalidMessage, msg: fmt.Sprintf(format, args...)}
}

func tooLarge() *requestError {
	return &requestError{status: http.StatusRequestEntityTooLarge, code: CodeMessageTooLarge,
		msg: fmt.Sprintf("the message body size over max value, MAX: %d", producer.MaxMessageSize)}
}

// isJSON reports whether the request uses the JSON form.
func isJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	if !strings.Contains(ct, ";") {
		// What ParseMediaType makes of a type without parameters, without the map of them it
		// allocates.
		return strings.TrimSpace(strings.ToLower(ct)) == "application/json"
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// readMessage builds the message of a request (asJSON: in the JSON form), leaving Topic empty,
// and returns how it asks to be delivered. A body over the limit is refused with 413 without
// reading more of it than necessary.
func readMessage(w http.ResponseWriter, r *http.Request, asJSON bool) (*producer.Message, delivery, error) {
	limit := int64(producer.MaxMessageSize)
	if asJSON {
		limit = maxJSONRequest
	}
	data, err := readBody(w, r, limit)
	if err != nil {
		return nil, delivery{}, err
	}
	if asJSON {
		return decodeJSONMessage(data)
	}
	d, err := headerDelivery(r.Header)
	if err != nil {
		return nil, d, err
	}
	return headerMessage(r.Header, data), d, nil
}

// readBody reads a request body of at most limit bytes; a larger one is refused with 413
// without reading more of it than necessary.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var data []byte
	var err error
	if r.ContentLength >= 0 && r.ContentLength <= presizeLimit {
		// A small known length (the server ends the body there) is read into one buffer of that
		// size; a raw body becomes the message as it is.
		data = make([]byte, r.ContentLength)
		_, err = io.ReadFull(body, data)
	} else {
		// A larger body grows its buffer as bytes arrive, so a client that announces 4 MiB and
		// sends one byte costs the process what it sent, not what it announced.
		data, err = readGrowing(body, r.ContentLength)
	}
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge()
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	return data, nil
}

// presizeLimit is the largest announced body read into a buffer of the announced size up front.
const presizeLimit = 64 << 10

// readGrowing reads r to its end into a buffer that at most doubles what has arrived, up to the
// announced length (when known) so a complete body ends in a buffer of exactly its size.
func readGrowing(r io.Reader, announced int64) ([]byte, error) {
	buf := make([]byte, 0, min(presizeLimit, max(announced, 512)))
	for {
		if len(buf) == cap(buf) {
			if announced >= 0 && int64(len(buf)) >= announced {
				// All that was announced arrived: only the end of the body may follow.
				var one [1]byte
				n, err := io.ReadFull(r, one[:])
				if n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
					return buf, nil
				}
				if err != nil {
					return buf, err
				}
				buf = append(buf, one[:n]...)
				continue
			}
			next := 2 * cap(buf)
			if announced > 0 && int64(next) > announced {
				next = int(announced)
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if announced >= 0 && int64(len(buf)) < announced {
				return buf, io.ErrUnexpectedEOF
			}
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// headerMessage is the raw form: body as sent, tags, keys and properties from headers.
func headerMessage(h http.Header, body []byte) *producer.Message {
	m := &producer.Message{Body: body, Tags: h.Get(HeaderTags)}
	var keys []string
	for _, v := range h.Values(HeaderKeys) {
		keys = append(keys, strings.Fields(v)...)
	}
	m.Keys = strings.Join(keys, " ")
	for name, values := range h {
		if len(name) <= len(HeaderPropertyPrefix) || !strings.EqualFold(name[:len(HeaderPropertyPrefix)], HeaderPropertyPrefix) {
			continue
		}
		if m.Properties == nil {
			m.Properties = make(map[string]string)
		}
		m.Properties[strings.ToLower(name[len(HeaderPropertyPrefix):])] = strings.Join(values, ",")
	}
	return m
}

func decodeJSONMessage(data []byte) (*producer.Message, delivery, error) {
	// encoding/json turns bytes that are not UTF-8 into U+FFFD; refusing them keeps a message
	// from being stored other than sent.
	if !utf8.Valid(data) {
		return nil, delivery{}, badRequest("decoding the JSON message: the request is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var jm JSONMessage
	if err := dec.Decode(&jm); err != nil {
		return nil, delivery{}, badRequest("decoding the JSON message: %v", err)
	}
	if dec.More() {
		return nil, delivery{}, badRequest("decoding the JSON message: more than one JSON value")
	}
	m := &producer.Message{}
	if err := fillMessage(m, &jm); err != nil {
		return nil, delivery{}, err
	}
	return m, delivery{group: jm.MessageGroup, deliverAtMilli: jm.DeliverAtMillis, delayMilli: jm.DelayMillis}, nil
}
