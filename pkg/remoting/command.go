package remoting

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// SerializeType selects how a frame's header is written. It travels in the high byte of the
// frame's second word, so every frame says how to read itself.
type SerializeType byte

const (
	// JSON headers are what Java servers write by default and what rocketmq-client-go sends.
	JSON SerializeType = 0
	// RocketMQ is the compact binary header (RocketMQSerializable).
	RocketMQ SerializeType = 1
)

// String returns the name RocketMQ uses for the serialisation.
func (t SerializeType) String() string {
	switch t {
	case JSON:
		return "JSON"
	case RocketMQ:
		return "ROCKETMQ"
	}
	return fmt.Sprintf("SerializeType(%d)", byte(t))
}

// Flag bits of a command.
const (
	// FlagResponse marks a response (RPC_TYPE bit).
	FlagResponse int32 = 1 << 0
	// FlagOneway marks a request that must not be answered (RPC_ONEWAY bit).
	FlagOneway int32 = 1 << 1
)

// Command is one RocketMQ RemotingCommand: a request or a response.
//
// ExtFields carries the custom header (all values are strings on the wire). A nil ExtFields is
// omitted from JSON headers; an empty non-nil map is written as {}.
type Command struct {
	Code          int16
	Language      string
	Version       int16
	Opaque        int32
	Flag          int32
	Remark        string
	ExtFields     map[string]string
	Body          []byte
	SerializeType SerializeType
}

// IsResponse reports whether the command is a response.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the command is a request that expects no response.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// NewRequest returns a request with this package's language and version and a JSON header. The
// client assigns the opaque when it sends the request, so one Command may be sent many times.
func NewRequest(code int16, ext map[string]string, body []byte) *Command {
	return &Command{Code: code, Language: DefaultLanguage, Version: DefaultVersion, ExtFields: ext, Body: body}
}

// NewResponse returns the response to req with the given code and remark: same opaque, response
// flag set, and the request's header serialisation.
func NewResponse(req *Command, code int16, remark string) *Command {
	return &Command{
		Code: code, Language: DefaultLanguage, Version: DefaultVersion, Opaque: req.Opaque,
		Flag: FlagResponse, Remark: remark, SerializeType: req.SerializeType,
	}
}

// NewNotSupportedResponse answers req REQUEST_CODE_NOT_SUPPORTED as a RocketMQ server or client
// answers a request code it has no processor for, with its remark (leading space included).
func NewNotSupportedResponse(req *Command) *Command {
	return NewResponse(req, RequestCodeNotSupported, notSupportedRemark(int(req.Code)))
}

// notSupportedRemark is RocketMQ's remark for a request code nothing processes.
func notSupportedRemark(code int) string {
	return fmt.Sprintf(" request type %d not supported", code)
}

// String renders the command for logs and test failures; the body is summarised by its length.
func (c *Command) String() string {
	var b strings.Builder
	kind := "request"
	name := RequestCodeName(c.Code)
	if c.IsResponse() {
		kind = "response"
		name = ResponseCodeName(c.Code)
	} else if c.IsOneway() {
		kind = "oneway request"
	}
	fmt.Fprintf(&b, "%s %s opaque=%d", kind, name, c.Opaque)
	if c.Remark != "" {
		fmt.Fprintf(&b, " remark=%q", c.Remark)
	}
	if len(c.ExtFields) > 0 {
		keys := make([]string, 0, len(c.ExtFields))
		for k := range c.ExtFields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" ext={")
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%q", k, c.ExtFields[k])
		}
		b.WriteByte('}')
	}
	if len(c.Body) > 0 {
		fmt.Fprintf(&b, " body=%dB", len(c.Body))
	}
	return b.String()
}

// Transport errors. Every error returned by the Client wraps exactly one of these, so callers can
// tell a slow broker from an unreachable one from a broken stream with errors.Is. A response with a
// non-success code is not an error of the transport.
var (
	// ErrTimeout: the request's context deadline passed before its response arrived.
	ErrTimeout = errors.New("remoting: request timed out")
	// ErrConnect: no connection to the address could be established.
	ErrConnect = errors.New("remoting: connect failed")
	// ErrClosed: the connection (or the whole client) was closed before the response arrived.
	ErrClosed = errors.New("remoting: connection closed")
	// ErrFrame: a frame could not be encoded or decoded (malformed, oversized, unknown header type).
	ErrFrame = errors.New("remoting: bad frame")
)

// FieldRangeError is a frame read whole, with a well-formed header, whose code or version does
// not fit this package's 16-bit fields: RocketMQ's JSON header carries both as Java ints, while
// its ROCKETMQ header and Command keep 16 bits. It wraps ErrFrame, but unlike other frame errors
// the stream stays in step, so only the request or response it belongs to (by Opaque and Flag)
// fails and the connection carries on.
type FieldRangeError struct {
	// Field is "code" or "version"; Value is what the header carried.
	Field string
	Value int64
	// Opaque and Flag are the header's, which tell whose answer it was.
	Opaque, Flag int32
}

// Error implements error.
func (e *FieldRangeError) Error() string {
	return fmt.Sprintf("%v: %s %d (opaque %d) does not fit 16 bits", ErrFrame, e.Field, e.Value, e.Opaque)
}

// Unwrap makes errors.Is(err, ErrFrame) true.
func (e *FieldRangeError) Unwrap() error { return ErrFrame }

// frameError wraps ErrFrame with a description.
func frameError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFrame, fmt.Sprintf(format, args...))
}

// ResponseError describes a response whose code means the request failed on the server. It is
// returned by the response helpers (ParseSendResponse and friends), never by Invoke.
type ResponseError struct {
	Code   int16
	Remark string
}

// Error implements error.
func (e *ResponseError) Error() string {
	if e.Remark == "" {
		return fmt.Sprintf("remoting: server answered %s (%d)", ResponseCodeName(e.Code), e.Code)
	}
	return fmt.Sprintf("remoting: server answered %s (%d): %s", ResponseCodeName(e.Code), e.Code, e.Remark)
}
