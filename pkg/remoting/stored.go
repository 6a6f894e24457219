package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Magic codes that open a stored message record (MessageDecoder): version 1 writes the topic's
// length in one byte, version 2 in two.
const (
	storedMagicV1 int32 = -626843481 // 0xDAA320A7
	storedMagicV2 int32 = -626843477 // 0xDAA320AB
)

// sysFlag bits of a stored record (MessageSysFlag) that change its layout or its body.
const (
	sysFlagBornHostV6      int32 = 0x1 << 4
	sysFlagStoreHostV6     int32 = 0x1 << 5
	storedFixedBeforeHosts       = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
	maxStoredTopicLengthV1       = 255
	// maxStoredPropertiesLength is the most a record's two-byte (Java short) length can say.
	maxStoredPropertiesLength = 32767
)

// StoredMessage is a message as a broker stores it and sends it in VIEW_MESSAGE_BY_ID answers and
// CHECK_TRANSACTION_STATE requests (RocketMQ's MessageDecoder.encode): the record's fixed fields,
// the body as stored (compressed when SysFlag says so), the topic and the properties.
type StoredMessage struct {
	BodyCRC                   int32
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	CommitLogOffset           int64
	SysFlag                   int32
	BornTimestamp             int64 // Unix milliseconds
	BornHost                  netip.AddrPort
	StoreTimestamp            int64 // Unix milliseconds
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     string
	Properties                map[string]string
}

// errStoredRecord is wrapped by every DecodeStoredMessage failure.
var errStoredRecord = errors.New("malformed stored message")

// DecodeStoredMessage reads one stored message record, refusing a record whose total size is
// not its length, an unknown magic code, and any field that runs past the end. Body is a copy.
func DecodeStoredMessage(b []byte) (*StoredMessage, error) {
	bad := func(format string, args ...any) (*StoredMessage, error) {
		return nil, fmt.Errorf("%w: %s", errStoredRecord, fmt.Sprintf(format, args...))
	}
	r := storedReader{b: b}
	total := r.i32()
	if r.short || int(total) != len(b) {
		return bad("total size %d, record of %d bytes", total, len(b))
	}
	magic := r.i32()
	if magic != storedMagicV1 && magic != storedMagicV2 {
		return bad("magic code %#x is neither version's", uint32(magic))
	}
	m := &StoredMessage{BodyCRC: r.i32(), QueueID: r.i32(), Flag: r.i32(), QueueOffset: r.i64(),
		CommitLogOffset: r.i64(), SysFlag: r.i32(), BornTimestamp: r.i64()}
	m.BornHost = r.host(m.SysFlag&sysFlagBornHostV6 != 0)
	m.StoreTimestamp = r.i64()
	m.StoreHost = r.host(m.SysFlag&sysFlagStoreHostV6 != 0)
	m.ReconsumeTimes, m.PreparedTransactionOffset = r.i32(), r.i64()
	if n := r.i32(); n < 0 {
		return bad("body length %d", n)
	} else if body := r.bytes(int(n)); body != nil {
		m.Body = append([]byte{}, body...)
	}
	var topicLen int
	if magic == storedMagicV1 {
		topicLen = int(r.u8())
	} else {
		topicLen = int(r.u16())
	}
	m.Topic = string(r.bytes(topicLen))
	m.Properties = DecodeProperties(string(r.bytes(int(r.u16()))))
	switch {
	case r.short:
		return bad("record of %d bytes ends inside a field", len(b))
	case r.at != len(b):
		return bad("%d bytes after the properties", len(b)-r.at)
	}
	return m, nil
}

// EncodeStoredMessage writes m as a version 1 record, as a broker encodes a half message it
// checks back on. Hosts must be valid; the topic must fit version 1's one-byte length.
func EncodeStoredMessage(m *StoredMessage) ([]byte, error) {
	if !m.BornHost.IsValid() || !m.StoreHost.IsValid() {
		return nil, errors.New("remoting: a stored message needs its born and store hosts")
	}
	if len(m.Topic) > maxStoredTopicLengthV1 {
		return nil, fmt.Errorf("remoting: topic of %d bytes does not fit a version 1 record", len(m.Topic))
	}
	props := (&Message{Properties: m.Properties}).EncodeProperties()
	if len(props) > maxStoredPropertiesLength {
		return nil, fmt.Errorf("remoting: properties of %d bytes, over a record's limit of %d", len(props), maxStoredPropertiesLength)
	}
	sysFlag := m.SysFlag &^ (sysFlagBornHostV6 | sysFlagStoreHostV6)
	if m.BornHost.Addr().Unmap().Is6() {
		sysFlag |= sysFlagBornHostV6
	}
	if m.StoreHost.Addr().Unmap().Is6() {
		sysFlag |= sysFlagStoreHostV6
	}
	size := storedFixedBeforeHosts + hostLength(m.BornHost) + 8 + hostLength(m.StoreHost) + 4 + 8 +
		4 + len(m.Body) + 1 + len(m.Topic) + 2 + len(props)
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	for _, v := range []int32{storedMagicV1, m.BodyCRC, m.QueueID, m.Flag} {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(m.QueueOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(m.CommitLogOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(sysFlag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.BornTimestamp))
	b = appendHost(b, m.BornHost)
	b = binary.BigEndian.AppendUint64(b, uint64(m.StoreTimestamp))
	b = appendHost(b, m.StoreHost)
	b = binary.BigEndian.AppendUint32(b, uint32(m.ReconsumeTimes))
	b = binary.BigEndian.AppendUint64(b, uint64(m.PreparedTransactionOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
	b = append(b, m.Body...)
	b = append(b, byte(len(m.Topic)))
	b = append(b, m.Topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...), nil
}

func hostLength(h netip.AddrPort) int {
	if h.Addr().Unmap().Is6() {
		return 20
	}
	return 8
}

func appendHost(b []byte, h netip.AddrPort) []byte {
	a := h.Addr().Unmap()
	b = append(b, a.AsSlice()...)
	return binary.BigEndian.AppendUint32(b, uint32(h.Port()))
}

// storedReader reads big-endian fields, remembering when one ran past the end (short) so the
// decoder checks once.
type storedReader struct {
	b     []byte
	at    int
	short bool
}

func (r *storedReader) bytes(n int) []byte {
	if r.short || n < 0 || len(r.b)-r.at < n {
		r.short = true
		return nil
	}
	out := r.b[r.at : r.at+n]
	r.at += n
	return out
}

func (r *storedReader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *storedReader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *storedReader) i32() int32 {
	if b := r.bytes(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *storedReader) i64() int64 {
	if b := r.bytes(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// host reads an IPv4 or IPv6 address and a four-byte port; a port past 65535 reads as the
// invalid AddrPort, as no socket has it.
func (r *storedReader) host(v6 bool) netip.AddrPort {
	n := 4
	if v6 {
		n = 16
	}
	ip := r.bytes(n)
	port := r.i32()
	if ip == nil || port < 0 || port > 65535 {
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a, uint16(port))
}
