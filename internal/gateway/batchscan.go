package gateway

import (
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/detourmq/detour/pkg/producer"
)

// decodeBatchFast decodes a batch request of the form clients write, in one pass over its bytes:
// {"messages":[{...},...]} with the fields body, bodyText, tags, keys (as a string) and
// properties (strings), each at most once per message, spelled exactly so, and strings without
// escapes. A text body is not copied: the message's body is its bytes in data (capped, so the
// body cannot grow into the next message's bytes), and equal tags of consecutive messages share
// one string, so a batch of such messages allocates per batch, not per message.
//
// ok is false when data holds anything else (escapes, a field spelled otherwise or repeated,
// null, numbers, keys as a list, malformed JSON...): decodeBatchJSON, which reads every form
// encoding/json reads, then decodes it and words its errors. The only error decodeBatchFast
// returns itself is the one decodeBatchJSON would return at the same point: more than
// MaxBatchMessages messages, said as soon as the next message begins. Its results are
// encoding/json's (FuzzBatchFastDecodingMatchesEncodingJSON).
func decodeBatchFast(data []byte) (msgs []batchMessage, ok bool, err error) {
	s := batchScanner{data: data}
	if !s.next('{') || !s.name("messages") || !s.next(':') || !s.next('[') {
		return nil, false, nil
	}
	if !s.next(']') {
		var prevTags string
		for {
			msgs = append(msgs, batchMessage{})
			if !s.message(&msgs[len(msgs)-1], &prevTags) {
				return nil, false, nil
			}
			if s.next(']') {
				break
			}
			if !s.next(',') {
				return nil, false, nil
			}
			if len(msgs) == producer.MaxBatchMessages {
				return nil, true, errTooManyInBatch()
			}
		}
	}
	if !s.next('}') || !s.end() {
		return nil, false, nil
	}
	return msgs, true, nil
}

// errTooManyInBatch is the refusal of a batch over MaxBatchMessages messages.
func errTooManyInBatch() *requestError {
	return badRequest("the batch holds more than %d messages, the limit", producer.MaxBatchMessages)
}

// batchScanner reads the form decodeBatchFast accepts; every method returns false on anything
// else.
type batchScanner struct {
	data []byte
	pos  int
}

// Fields of a batch message, as bits of the set already seen.
const (
	fieldBody uint8 = 1 << iota
	fieldBodyText
	fieldTags
	fieldKeys
	fieldProperties
)

// fieldOf returns the bit of the field spelled name, 0 for any other spelling.
func fieldOf(name []byte) uint8 {
	switch string(name) {
	case "body":
		return fieldBody
	case "bodyText":
		return fieldBodyText
	case "tags":
		return fieldTags
	case "keys":
		return fieldKeys
	case "properties":
		return fieldProperties
	}
	return 0
}

// skipSpace moves past JSON whitespace.
func (s *batchScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next moves past whitespace and c, if c is what comes.
func (s *batchScanner) next(c byte) bool {
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *batchScanner) end() bool {
	s.skipSpace()
	return s.pos == len(s.data)
}

// name moves past whitespace and the string want.
func (s *batchScanner) name(want string) bool {
	got, ok := s.str()
	return ok && string(got) == want
}

// str moves past whitespace and a string without escapes or control characters (which JSON
// forbids unescaped), returning its bytes in data.
func (s *batchScanner) str() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start := s.pos
	i := start + plainPrefix(s.data[start:])
	for ; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return s.data[start:i:i], true
		case c < 0x20 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// message decodes one message into bm; prevTags is the previous message's tags, whose string
// bm shares when its tags are the same.
func (s *batchScanner) message(bm *batchMessage, prevTags *string) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var seen uint8
	for {
		key, ok := s.str()
		field := fieldOf(key)
		if !ok || field == 0 || seen&field != 0 || !s.next(':') {
			return false
		}
		seen |= field
		if !s.field(bm, field, prevTags) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// field decodes the value of field into bm.
func (s *batchScanner) field(bm *batchMessage, field uint8, prevTags *string) bool {
	if field == fieldProperties {
		return s.properties(bm)
	}
	v, ok := s.str()
	if !ok {
		return false
	}
	switch field {
	case fieldBody:
		// As encoding/json decodes a []byte: standard base64, into a buffer of DecodedLen.
		b := make([]byte, base64.StdEncoding.DecodedLen(len(v)))
		n, err := base64.StdEncoding.Decode(b, v)
		if err != nil {
			return false
		}
		bm.Body = b[:n]
	case fieldBodyText:
		bm.BodyText = v
	case fieldTags:
		if string(v) != *prevTags {
			*prevTags = string(v)
		}
		bm.Tags = *prevTags
	case fieldKeys:
		bm.Keys = strings.Fields(string(v))
	}
	return true
}

// properties decodes an object of strings into a new map, a repeated name keeping its last
// value, as encoding/json does.
func (s *batchScanner) properties(bm *batchMessage) bool {
	if !s.next('{') {
		return false
	}
	bm.Properties = map[string]string{}
	if s.next('}') {
		return true
	}
	for {
		name, ok := s.str()
		if !ok || !s.next(':') {
			return false
		}
		value, ok := s.str()
		if !ok {
			return false
		}
		bm.Properties[string(name)] = string(value)
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// Byte-wise masks for testing eight bytes at once.
const (
	eachByte   = 0x0101010101010101
	eachTopBit = 0x8080808080808080
)

// plainPrefix returns the length of b's prefix, in whole words of 8 bytes, that holds no
// quote, backslash or control character: the bytes str need not look at one by one. A word
// holds a byte below n (n <= 128) exactly when (w - n*eachByte) &^ w has a top bit set.
func plainPrefix(b []byte) int {
	n := 0
	for ; n+8 <= len(b); n += 8 {
		w := binary.LittleEndian.Uint64(b[n:])
		control := (w - 0x20*eachByte) &^ w
		quote := w ^ '"'*eachByte
		backslash := w ^ '\\'*eachByte
		if (control|(quote-eachByte)&^quote|(backslash-eachByte)&^backslash)&eachTopBit != 0 {
			break
		}
	}
	return n
}
