package remoting

import (
	"crypto/rand"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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

// AppendProperties appends the wire form of m's properties: Tags and Keys as TAGS and KEYS
// (they take precedence over the same keys in Properties), then every non-empty property.
func (m *Message) AppendProperties(dst []byte) []byte {
	if m.Tags != "" {
		dst = appendProperty(dst, PropertyTags, m.Tags)
	}
	if m.Keys != "" {
		dst = appendProperty(dst, PropertyKeys, m.Keys)
	}
	for k, v := range m.Properties {
		if v == "" || (k == PropertyTags && m.Tags != "") || (k == PropertyKeys && m.Keys != "") {
			continue
		}
		dst = appendProperty(dst, k, v)
	}
	return dst
}

// EncodeProperties returns the wire form of m's properties (see AppendProperties).
func (m *Message) EncodeProperties() string {
	n := len(m.Tags) + len(m.Keys) + 12
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	var b strings.Builder
	b.Grow(n)
	if m.Tags != "" {
		writeProperty(&b, PropertyTags, m.Tags)
	}
	if m.Keys != "" {
		writeProperty(&b, PropertyKeys, m.Keys)
	}
	for k, v := range m.Properties {
		if v == "" || (k == PropertyTags && m.Tags != "") || (k == PropertyKeys && m.Keys != "") {
			continue
		}
		writeProperty(&b, k, v)
	}
	return b.String()
}

func writeProperty(b *strings.Builder, k, v string) {
	b.WriteString(k)
	b.WriteByte(NameValueSeparator)
	b.WriteString(v)
	b.WriteByte(PropertySeparator)
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

func appendProperty(dst []byte, k, v string) []byte {
	dst = append(dst, k...)
	dst = append(dst, NameValueSeparator)
	dst = append(dst, v...)
	return append(dst, PropertySeparator)
}

// EncodeProperties returns name\x01value\x02 for every entry with a non-empty value, with the
// trailing separator RocketMQ writes. Order follows map iteration, as in RocketMQ (HashMap).
func EncodeProperties(props map[string]string) string {
	n := 0
	for k, v := range props {
		n += len(k) + len(v) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for k, v := range props {
		if v != "" {
			writeProperty(&b, k, v)
		}
	}
	return b.String()
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
	var buf [32]byte
	return string(AppendUniqID(buf[:0]))
}

// Batch body layout, per message (MessageDecoder.encodeMessage):
//
//	int32 totalSize, int32 magicCode (0), int32 bodyCRC (0), int32 flag,
//	int32 bodyLength, body, int16 propertiesLength, properties
const batchFixedLength = 4 + 4 + 4 + 4 + 4 + 2

// AppendBatch appends the SEND_BATCH_MESSAGE body for msgs. Each message's properties must fit
// the 16-bit length RocketMQ uses; longer ones give an error wrapping ErrFrame.
func AppendBatch(dst []byte, msgs []*Message) ([]byte, error) {
	for i, m := range msgs {
		start := len(dst)
		dst = append(dst, make([]byte, 20)...)
		dst = append(dst, m.Body...)
		propsAt := len(dst)
		dst = append(dst, 0, 0)
		dst = m.AppendProperties(dst)
		propsLen := len(dst) - propsAt - 2
		if propsLen > 1<<15-1 {
			return dst[:start], frameError("batch message %d: properties of %d bytes exceed 32767", i, propsLen)
		}
		binary.BigEndian.PutUint16(dst[propsAt:], uint16(propsLen))
		binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
		binary.BigEndian.PutUint32(dst[start+12:], uint32(m.Flag))
		binary.BigEndian.PutUint32(dst[start+16:], uint32(len(m.Body)))
	}
	return dst, nil
}

// DecodeBatch parses a SEND_BATCH_MESSAGE body. Decoded messages carry every property in
// Properties (TAGS and KEYS included) and have no Topic: the batch's header names it. Bodies
// are copied. DecodeBatch never panics; malformed input gives an error wrapping ErrFrame.
func DecodeBatch(b []byte) ([]*Message, error) {
	var msgs []*Message
	for pos := 0; pos < len(b); {
		if len(b)-pos < batchFixedLength {
			return nil, frameError("batch message %d: %d bytes left, need at least %d", len(msgs), len(b)-pos, batchFixedLength)
		}
		total := int64(int32(binary.BigEndian.Uint32(b[pos:])))
		bodyLen := int64(int32(binary.BigEndian.Uint32(b[pos+16:])))
		if total < batchFixedLength || total > int64(len(b)-pos) {
			return nil, frameError("batch message %d: total size %d out of range", len(msgs), total)
		}
		if bodyLen < 0 || bodyLen > total-batchFixedLength {
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
