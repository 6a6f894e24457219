package remoting

import (
	"encoding/binary"
	"math"
)

// Frame layout (all integers big-endian):
//
//	int32 length          = 4 + headerLength + bodyLength (not counting itself)
//	int32 serializeAndLen = serializeType<<24 | headerLength
//	header, then body
const (
	// DefaultMaxFrameSize is RocketMQ's default frame limit (com.rocketmq.remoting.frameMaxLength),
	// counted over the whole frame including its length field.
	DefaultMaxFrameSize = 16 << 20
	// maxHeaderLength is the largest header the 24-bit length can describe.
	maxHeaderLength = 1<<24 - 1
	// binaryFixedLength is the size of the ROCKETMQ header before remark and ext fields.
	binaryFixedLength = 21
)

// Encode returns the complete frame for c, including the leading 4-byte length.
func Encode(c *Command) ([]byte, error) {
	return AppendFrame(make([]byte, 0, 64+len(c.Remark)+32*len(c.ExtFields)+len(c.Body)), c)
}

// AppendFrame appends the complete frame for c (length field included) to dst. On error dst is
// returned unchanged in length.
func AppendFrame(dst []byte, c *Command) ([]byte, error) {
	return appendFrame(dst, c, c.Opaque, c.Flag)
}

// appendFrame encodes c with the given opaque and flag instead of c's own, so the client can
// send one Command many times without writing to it.
func appendFrame(dst []byte, c *Command, opaque, flag int32) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	switch c.SerializeType {
	case JSON:
		dst = appendJSONHeader(dst, c, opaque, flag)
	case RocketMQ:
		dst, err = appendBinaryHeader(dst, c, opaque, flag)
	default:
		err = frameError("unknown serialize type %d", byte(c.SerializeType))
	}
	if err != nil {
		return dst[:start], err
	}
	headerLen := len(dst) - start - 8
	if headerLen > maxHeaderLength {
		return dst[:start], frameError("header of %d bytes exceeds the 24-bit header length", headerLen)
	}
	if int64(headerLen)+int64(len(c.Body))+4 > math.MaxInt32 {
		return dst[:start], frameError("frame of %d bytes is too large to encode", int64(headerLen)+int64(len(c.Body))+8)
	}
	dst = append(dst, c.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(headerLen))
	return dst, nil
}

// AppendHeader appends only the header of c in serialisation t (no length words, no body).
func AppendHeader(dst []byte, c *Command, t SerializeType) ([]byte, error) {
	switch t {
	case JSON:
		return appendJSONHeader(dst, c, c.Opaque, c.Flag), nil
	case RocketMQ:
		return appendBinaryHeader(dst, c, c.Opaque, c.Flag)
	}
	return dst, frameError("unknown serialize type %d", byte(t))
}

// Decode parses one frame without its leading length field (what follows the length on the
// wire). The result does not share memory with frame. Decode never panics; every failure wraps
// ErrFrame.
func Decode(frame []byte) (*Command, error) {
	if len(frame) < 4 {
		return nil, frameError("frame of %d bytes has no header length word", len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	t := SerializeType(word >> 24)
	headerLen := int(word & maxHeaderLength)
	if headerLen > len(frame)-4 {
		return nil, frameError("bad header length %d: only %d bytes follow", headerLen, len(frame)-4)
	}
	c, err := DecodeHeader(t, frame[4:4+headerLen])
	if err != nil {
		return nil, err
	}
	if body := frame[4+headerLen:]; len(body) > 0 {
		c.Body = append([]byte(nil), body...)
	}
	return c, nil
}

// DecodeHeader parses a header of serialisation t. It never panics; every failure wraps ErrFrame.
func DecodeHeader(t SerializeType, header []byte) (*Command, error) {
	var (
		c   *Command
		err error
	)
	switch t {
	case JSON:
		c, err = decodeJSONHeader(header)
	case RocketMQ:
		c, err = decodeBinaryHeader(header)
	default:
		return nil, frameError("unknown serialize type %d", byte(t))
	}
	if err != nil {
		return nil, err
	}
	c.SerializeType = t
	return c, nil
}

// appendBinaryHeader writes the ROCKETMQ header (RocketMQSerializable).
func appendBinaryHeader(dst []byte, c *Command, opaque, flag int32) ([]byte, error) {
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, LanguageCode(c.Language))
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range c.ExtFields {
		if len(k) > math.MaxInt16 {
			return dst, frameError("ext field name of %d bytes does not fit the ROCKETMQ header", len(k))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	extLen := len(dst) - lenAt - 4
	if extLen > maxHeaderLength {
		return dst, frameError("ext fields of %d bytes do not fit a header", extLen)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(extLen))
	return dst, nil
}

// decodeBinaryHeader parses a ROCKETMQ header. All strings are substrings of one copy of the
// header, so a decode costs one string allocation however many fields there are. Bytes after the
// ext fields are ignored, as the Java decoder does.
func decodeBinaryHeader(h []byte) (*Command, error) {
	if len(h) < binaryFixedLength {
		return nil, frameError("ROCKETMQ header of %d bytes is shorter than its %d fixed bytes", len(h), binaryFixedLength)
	}
	c := &Command{
		Code:     int16(binary.BigEndian.Uint16(h[0:])),
		Language: LanguageName(h[2]),
		Version:  int16(binary.BigEndian.Uint16(h[3:])),
		Opaque:   int32(binary.BigEndian.Uint32(h[5:])),
		Flag:     int32(binary.BigEndian.Uint32(h[9:])),
	}
	s := string(h)
	pos := 13
	remarkLen := int64(int32(binary.BigEndian.Uint32(h[pos:])))
	pos += 4
	if remarkLen < 0 || remarkLen > int64(len(h)-pos-4) {
		return nil, frameError("ROCKETMQ header: remark length %d out of range", remarkLen)
	}
	c.Remark = s[pos : pos+int(remarkLen)]
	pos += int(remarkLen)
	extLen := int64(int32(binary.BigEndian.Uint32(h[pos:])))
	pos += 4
	if extLen < 0 || extLen > int64(len(h)-pos) {
		return nil, frameError("ROCKETMQ header: ext fields length %d out of range", extLen)
	}
	end := pos + int(extLen)
	if extLen > 0 {
		c.ExtFields = make(map[string]string, countBinaryExt(h[pos:end]))
	}
	for pos < end {
		if end-pos < 2 {
			return nil, frameError("ROCKETMQ header: truncated ext field name length")
		}
		kl := int(int16(binary.BigEndian.Uint16(h[pos:])))
		pos += 2
		if kl < 0 || kl > end-pos {
			return nil, frameError("ROCKETMQ header: ext field name length %d out of range", kl)
		}
		k := s[pos : pos+kl]
		pos += kl
		if end-pos < 4 {
			return nil, frameError("ROCKETMQ header: truncated ext field value length")
		}
		vl := int64(int32(binary.BigEndian.Uint32(h[pos:])))
		pos += 4
		if vl < 0 || vl > int64(end-pos) {
			return nil, frameError("ROCKETMQ header: ext field value length %d out of range", vl)
		}
		c.ExtFields[k] = s[pos : pos+int(vl)]
		pos += int(vl)
	}
	return c, nil
}

// countBinaryExt counts the entries of a well-formed ext block to size the map; on malformed
// input it returns a partial count and the decoder reports the error.
func countBinaryExt(b []byte) int {
	n := 0
	for pos := 0; len(b)-pos >= 2; n++ {
		kl := int(int16(binary.BigEndian.Uint16(b[pos:])))
		pos += 2 + kl
		if kl < 0 || len(b)-pos < 4 {
			return n + 1
		}
		vl := int(int32(binary.BigEndian.Uint32(b[pos:])))
		if vl < 0 {
			return n + 1
		}
		pos += 4 + vl
	}
	return n
}
