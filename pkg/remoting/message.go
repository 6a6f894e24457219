package remoting

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Message property keys (MessageConst) that producers and brokers interpret.
const (
	PropertyTags              = "TAGS"
	PropertyKeys              = "KEYS"
	PropertyWaitStoreMsgOK    = "WAIT"
	PropertyDelayLevel        = "DELAY"
	PropertyUniqKey           = "UNIQ_KEY"
	PropertyTransactionPrep   = "TRAN_MSG"
	PropertyProducerGroup     = "PGROUP"
	PropertyReconsumeTime     = "RECONSUME_TIME"
	PropertyMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	PropertyMsgRegion         = "MSG_REGION"
	PropertyTraceSwitch       = "TRACE_ON"
	PropertyInstanceID        = "INSTANCE_ID"
	PropertyMsgType           = "MSG_TYPE"
	PropertyShardingKey       = "__SHARDINGKEY"
	PropertyTimerDeliverMS    = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec     = "TIMER_DELAY_SEC"
	PropertyTimerDelayMS      = "TIMER_DELAY_MS"
	PropertyTransactionID     = "__transactionId__"
)

// Separators of the properties string: name \x01 value \x02 ...
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
)

// Message is a message as a producer sends it. Tags and Keys are carried as the TAGS and KEYS
// properties on the wire; Properties holds every other property (UNIQ_KEY, WAIT, user keys). A
// producer that sends it decides which reserved names Properties may hold (the runtime in
// pkg/producer allows only UNIQ_KEY and WAIT).
type Message struct {
	Topic      string
	Tags       string
	Keys       string
	Flag       int32
	Body       []byte
	Properties map[string]string
}

// Property returns the named property, consulting Tags and Keys for TAGS and KEYS.
func (m *Message) Property(name string) string {
	switch {
	case name == PropertyTags && m.Tags != "":
		return m.Tags
	case name == PropertyKeys && m.Keys != "":
		return m.Keys
	}
	return m.Properties[name]
}

// SetProperty sets a property, allocating the map if needed.
func (m *Message) SetProperty(name, value string) {
	if m.Properties == nil {
		m.Properties = make(map[string]string, 4)
	}
	m.Properties[name] = value
}

// UniqIDLength is the length of a UNIQ_KEY that AppendUniqID makes: 16 bytes in hex.
const UniqIDLength = 32

// waitDefault is the WAIT value a send adds when the message sets none (RocketMQ's
// Message.setWaitStoreMsgOK(true) in the constructor).
const waitDefault = "true"

// SendPropertiesSize is the exact length of the properties AppendSendProperties writes for m,
// so that a caller can size its buffer once.
func SendPropertiesSize(m *Message) int {
	return propertiesSize(m, additionsOf(m, true))
}

// AppendSendProperties appends m's properties as a producer puts them on the wire: TAGS and
// KEYS from Tags and Keys (they win over the same keys in Properties), every other non-empty
// property, WAIT=true unless m sets WAIT, and last UNIQ_KEY, m's own or a new one from
// AppendUniqID. m is not modified. It returns where the UNIQ_KEY's value lies in out, so that a
// caller can keep the id without another copy.
func AppendSendProperties(dst []byte, m *Message) (out []byte, idStart, idEnd int) {
	return appendProperties(dst, m, additionsOf(m, true))
}

// EncodeSendProperties is AppendSendProperties as a string, built in one allocation, with the
// UNIQ_KEY as a substring of it.
func EncodeSendProperties(m *Message) (props, uniq string) {
	return encodeProperties(m, true)
}

// EncodeProperties returns the wire form of m's properties as they are, adding neither WAIT
// nor UNIQ_KEY: what a client that sets no defaults sends. Tags and Keys win over the same keys
// in Properties, empty values are left out and a UNIQ_KEY m holds comes last.
func (m *Message) EncodeProperties() string {
	props, _ := encodeProperties(m, false)
	return props
}

// encodeProperties is appendProperties into a buffer of the exact size, handed out as a string
// without a copy (as strings.Builder does): the buffer is never written again.
func encodeProperties(m *Message, send bool) (props, uniq string) {
	a := additionsOf(m, send)
	buf, idStart, idEnd := appendProperties(make([]byte, 0, propertiesSize(m, a)), m, a)
	props = unsafe.String(unsafe.SliceData(buf), len(buf))
	return props, props[idStart:idEnd]
}

// additions are what the encoder writes after the loop over m.Properties. Both the sizing and
// the encoding pass need them, and looking them up once keeps a send's string form at the cost
// of one pass of map lookups.
type additions struct {
	id    string // m's own UNIQ_KEY, "" when it has none
	wait  bool   // write WAIT=true: the send form of a message that sets no WAIT
	newID bool   // write a new UNIQ_KEY: the send form of a message without one
}

func additionsOf(m *Message, send bool) additions {
	a := additions{id: m.Properties[PropertyUniqKey]}
	a.wait = send && m.Properties[PropertyWaitStoreMsgOK] == ""
	a.newID = send && a.id == ""
	return a
}

// skipProperty says whether the loop over m.Properties leaves k=v out: empty values (RocketMQ
// drops them), TAGS and KEYS that Tags and Keys replace, and UNIQ_KEY, which always comes last.
func skipProperty(m *Message, k, v string) bool {
	return v == "" || k == PropertyUniqKey || (k == PropertyTags && m.Tags != "") || (k == PropertyKeys && m.Keys != "")
}

// propertiesSize is the length appendProperties writes for m.
func propertiesSize(m *Message, a additions) int {
	n := 0
	if m.Tags != "" {
		n += len(PropertyTags) + len(m.Tags) + 2
	}
	if m.Keys != "" {
		n += len(PropertyKeys) + len(m.Keys) + 2
	}
	for k, v := range m.Properties {
		if !skipProperty(m, k, v) {
			n += len(k) + len(v) + 2
		}
	}
	if a.wait {
		n += len(PropertyWaitStoreMsgOK) + len(waitDefault) + 2
	}
	if a.id != "" {
		n += len(PropertyUniqKey) + len(a.id) + 2
	} else if a.newID {
		n += len(PropertyUniqKey) + UniqIDLength + 2
	}
	return n
}

// appendProperties is the one encoder of the properties string: name \x01 value \x02 for each
// property, then the additions. It returns where the UNIQ_KEY's value lies in out (an empty
// span when there is none).
func appendProperties(dst []byte, m *Message, a additions) (out []byte, idStart, idEnd int) {
	if m.Tags != "" {
		dst = appendProperty(dst, PropertyTags, m.Tags)
	}
	if m.Keys != "" {
		dst = appendProperty(dst, PropertyKeys, m.Keys)
	}
	for k, v := range m.Properties {
		if !skipProperty(m, k, v) {
			dst = appendProperty(dst, k, v)
		}
	}
	if a.wait {
		dst = appendProperty(dst, PropertyWaitStoreMsgOK, waitDefault)
	}
	if a.id == "" && !a.newID {
		return dst, len(dst), len(dst)
	}
	dst = append(dst, PropertyUniqKey...)
	dst = append(dst, NameValueSeparator)
	idStart = len(dst)
	if a.newID {
		dst = AppendUniqID(dst)
	} else {
		dst = append(dst, a.id...)
	}
	idEnd = len(dst)
	return append(dst, PropertySeparator), idStart, idEnd
}

// EncodeProperty returns one property, name \x01 value \x02, in one allocation: how a sender
// adds a property of its own to what EncodeSendProperties made.
func EncodeProperty(name, value string) string {
	b := appendProperty(make([]byte, 0, len(name)+len(value)+2), name, value)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func appendProperty(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, NameValueSeparator)
	dst = append(dst, value...)
	return append(dst, PropertySeparator)
}

// DecodeProperties parses a properties string the way RocketMQ does: segments between \x02 are
// kept only when they hold \x01 with a non-empty name before it and a non-empty value after it.
// The result is never nil.
func DecodeProperties(s string) map[string]string {
	m := make(map[string]string, strings.Count(s, string(PropertySeparator))+1)
	for len(s) > 0 {
		seg := s
		if i := strings.IndexByte(s, PropertySeparator); i >= 0 {
			seg, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if i := strings.IndexByte(seg, NameValueSeparator); i > 0 && i < len(seg)-1 {
			m[seg[:i]] = seg[i+1:]
		}
	}
	return m
}

// uniqID holds the fixed prefix and the time base of UNIQ_KEY ids.
var uniqID struct {
	once    sync.Once
	prefix  [10]byte // IPv4, pid (2 bytes), random stand-in for the class loader hash (4 bytes)
	counter atomic.Uint32
	mu      sync.Mutex
	base    atomic.Pointer[monthBase]
}

type monthBase struct{ start, next int64 } // unix milliseconds

func initUniqID() {
	ip := localIPv4()
	copy(uniqID.prefix[:4], ip)
	binary.BigEndian.PutUint16(uniqID.prefix[4:], uint16(os.Getpid()))
	_, _ = rand.Read(uniqID.prefix[6:10])
	var c [2]byte
	_, _ = rand.Read(c[:])
	uniqID.counter.Store(uint32(binary.BigEndian.Uint16(c[:])))
}

// localIPv4 prefers a non-loopback, non-link-local IPv4 address, as RocketMQ's getIP does, and
// falls back to bytes of the current time when there is none.
func localIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		var fallback net.IP
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip := ipn.IP.To4()
			if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
				continue
			}
			if !ip.IsPrivate() {
				return ip
			}
			if fallback == nil {
				fallback = ip
			}
		}
		if fallback != nil {
			return fallback
		}
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(time.Now().UnixMilli()))
	return net.IP(b[:])
}

// currentMonthBase returns the start of the current month (local time) and of the next one.
func currentMonthBase(nowMillis int64) *monthBase {
	if b := uniqID.base.Load(); b != nil && nowMillis >= b.start && nowMillis < b.next {
		return b
	}
	uniqID.mu.Lock()
	defer uniqID.mu.Unlock()
	t := time.UnixMilli(nowMillis)
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.Local)
	b := &monthBase{start: start.UnixMilli(), next: start.AddDate(0, 1, 0).UnixMilli()}
	uniqID.base.Store(b)
	return b
}

const upperHex = "0123456789ABCDEF"

// AppendUniqID appends a new UNIQ_KEY message id: 32 upper-case hex digits encoding this host's
// IPv4 address, the pid, a per-process random number, the milliseconds since the start of the
// month and a 16-bit counter (MessageClientIDSetter's layout). Ids are unique within a process
// for 65536 ids per millisecond.
func AppendUniqID(dst []byte) []byte {
	uniqID.once.Do(initUniqID)
	now := time.Now().UnixMilli()
	base := currentMonthBase(now)
	var raw [16]byte
	copy(raw[:10], uniqID.prefix[:])
	binary.BigEndian.PutUint32(raw[10:], uint32(now-base.start))
	binary.BigEndian.PutUint16(raw[14:], uint16(uniqID.counter.Add(1)))
	for _, b := range raw {
		dst = append(dst, upperHex[b>>4], upperHex[b&0xF])
	}
	return dst
}

// NewUniqID returns a new UNIQ_KEY message id (see AppendUniqID).
func NewUniqID() string {
	var buf [UniqIDLength]byte
	return string(AppendUniqID(buf[:0]))
}

// BatchEntryFixedSize is a batch entry's size besides its body and properties
// (MessageDecoder.encodeMessage): int32 totalSize, int32 magicCode (0), int32 bodyCRC (0),
// int32 flag, int32 bodyLength, then the body, int16 propertiesLength and the properties.
const BatchEntryFixedSize = 4*5 + 2

// maxBatchPropertiesLength is the longest properties the entry's int16 length can say.
const maxBatchPropertiesLength = 1<<15 - 1

// AppendBatch appends the SEND_BATCH_MESSAGE body for msgs, each entry with its properties as
// AppendSendProperties writes them, and appends to spans where each message's UNIQ_KEY value
// lies in out (start and end, two ints per message), so that a sender keeps the ids without
// encoding them again; spans may be nil. Properties longer than the 16-bit length RocketMQ
// uses give an error wrapping ErrFrame, with dst as it was. Sized with BatchEntryFixedSize and
// SendPropertiesSize, out needs no growing.
func AppendBatch(dst []byte, msgs []*Message, spans []int) (out []byte, idSpans []int, err error) {
	start := len(dst)
	for i, m := range msgs {
		var idStart, idEnd int
		if dst, idStart, idEnd, err = appendBatchEntry(dst, m); err != nil {
			return dst[:start], spans, fmt.Errorf("batch message %d: %w", i, err)
		}
		spans = append(spans, idStart, idEnd)
	}
	return dst, spans, nil
}

// appendBatchEntry appends m's entry of a batch body and returns where its UNIQ_KEY's value
// lies in out.
func appendBatchEntry(dst []byte, m *Message) (out []byte, idStart, idEnd int, err error) {
	start := len(dst)
	dst = append(dst, make([]byte, BatchEntryFixedSize-2)...)
	dst = append(dst, m.Body...)
	propsAt := len(dst)
	dst = append(dst, 0, 0)
	dst, idStart, idEnd = AppendSendProperties(dst, m)
	propsLen := len(dst) - propsAt - 2
	if propsLen > maxBatchPropertiesLength {
		return dst[:start], 0, 0, frameError("properties of %d bytes exceed %d", propsLen, maxBatchPropertiesLength)
	}
	binary.BigEndian.PutUint16(dst[propsAt:], uint16(propsLen))
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	binary.BigEndian.PutUint32(dst[start+12:], uint32(m.Flag))
	binary.BigEndian.PutUint32(dst[start+16:], uint32(len(m.Body)))
	return dst, idStart, idEnd, nil
}

// DecodeBatch parses a SEND_BATCH_MESSAGE body. Decoded messages carry every property in
// Properties (TAGS and KEYS included) and have no Topic: the batch's header names it. Bodies
// are copied. DecodeBatch never panics; malformed input gives an error wrapping ErrFrame.
func DecodeBatch(b []byte) ([]*Message, error) {
	var msgs []*Message
	for pos := 0; pos < len(b); {
		if len(b)-pos < BatchEntryFixedSize {
			return nil, frameError("batch message %d: %d bytes left, need at least %d", len(msgs), len(b)-pos, BatchEntryFixedSize)
		}
		total := int64(int32(binary.BigEndian.Uint32(b[pos:])))
		bodyLen := int64(int32(binary.BigEndian.Uint32(b[pos+16:])))
		if total < BatchEntryFixedSize || total > int64(len(b)-pos) {
			return nil, frameError("batch message %d: total size %d out of range", len(msgs), total)
		}
		if bodyLen < 0 || bodyLen > total-BatchEntryFixedSize {
			return nil, frameError("batch message %d: body length %d out of range", len(msgs), bodyLen)
		}
		m := &Message{Flag: int32(binary.BigEndian.Uint32(b[pos+12:]))}
		at := pos + 20
		m.Body = append([]byte(nil), b[at:at+int(bodyLen)]...)
		at += int(bodyLen)
		propsLen := int64(int16(binary.BigEndian.Uint16(b[at:])))
		at += 2
		if propsLen < 0 || int64(at)+propsLen != int64(pos)+total {
			return nil, frameError("batch message %d: properties length %d does not match its total size", len(msgs), propsLen)
		}
		m.Properties = DecodeProperties(string(b[at : at+int(propsLen)]))
		msgs = append(msgs, m)
		pos += int(total)
	}
	return msgs, nil
}
