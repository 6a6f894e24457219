package remoting

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON header is a fastjson-serialised RemotingCommand. Its field set is fixed and small, so
// it is written and parsed by hand: that is several times faster than encoding/json and lets a
// decoded header keep all its unescaped strings as substrings of a single copy of the header.

// appendJSONHeader writes the header the way fastjson does (keys in alphabetical order, null
// remark and ext fields omitted). An empty Language is omitted too.
func appendJSONHeader(dst []byte, c *Command, opaque, flag int32) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	if c.ExtFields != nil {
		dst = append(dst, `,"extFields":{`...)
		first := true
		for k, v := range c.ExtFields {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(flag), 10)
	if c.Language != "" {
		dst = append(dst, `,"language":`...)
		dst = appendJSONString(dst, c.Language)
	}
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(opaque), 10)
	if c.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, c.Remark)
	}
	dst = append(dst, `,"serializeTypeCurrentRPC":"JSON","version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string. Bytes >= 0x80 pass through unchanged, so strings
// that are not valid UTF-8 survive a round trip through this package's own decoder.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonParser is a minimal, allocation-aware JSON reader over one string. It never panics: every
// index is checked, and nesting in skipped values is bounded.
type jsonParser struct {
	s   string
	pos int
	// wide is the first code or version that fits a Java int but not this package's int16.
	wide *FieldRangeError
}

const maxJSONDepth = 64

func (p *jsonParser) errorf(what string) error {
	return frameError("JSON header: %s at offset %d", what, p.pos)
}

func (p *jsonParser) ws() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *jsonParser) peek() byte {
	p.ws()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *jsonParser) expect(b byte) error {
	if p.peek() != b {
		return p.errorf("expected '" + string(rune(b)) + "'")
	}
	p.pos++
	return nil
}

// str reads a string; unescaped strings are substrings of the input (no allocation).
func (p *jsonParser) str() (string, error) {
	if p.peek() != '"' {
		return "", p.errorf("expected a string")
	}
	p.pos++
	start := p.pos
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case '"':
			v := p.s[start:p.pos]
			p.pos++
			return v, nil
		case '\\':
			return p.escapedStr(start)
		}
		p.pos++
	}
	return "", p.errorf("unterminated string")
}

// escapedStr finishes a string that contains escapes, starting over from its first byte.
func (p *jsonParser) escapedStr(start int) (string, error) {
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, p.s[start:p.pos]...)
	for p.pos < len(p.s) {
		b := p.s[p.pos]
		switch {
		case b == '"':
			p.pos++
			return string(buf), nil
		case b != '\\':
			buf = append(buf, b)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.s) {
			break
		}
		e := p.s[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if p.pos+1 < len(p.s) && p.s[p.pos] == '\\' && p.s[p.pos+1] == 'u' {
					save := p.pos
					p.pos += 2
					if lo, ok := p.hex4(); ok {
						r2 = utf16.DecodeRune(r, lo)
					}
					if r2 == utf8.RuneError {
						p.pos = save
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errorf("bad escape")
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := p.s[p.pos+i]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// number returns the raw text of a JSON number.
func (p *jsonParser) number() (string, error) {
	p.ws()
	start := p.pos
	if p.pos < len(p.s) && p.s[p.pos] == '-' {
		p.pos++
	}
	digits := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			p.pos++
			continue
		}
		break
	}
	if p.pos == digits {
		return "", p.errorf("expected a number")
	}
	return p.s[start:p.pos], nil
}

// integer reads a JSON number that must be an integer within [lo, hi].
func (p *jsonParser) integer(lo, hi int64) (int64, error) {
	t, err := p.number()
	if err != nil {
		return 0, err
	}
	v, perr := strconv.ParseInt(t, 10, 64)
	if perr != nil || v < lo || v > hi {
		return 0, p.errorf("integer " + strconv.Quote(t) + " out of range")
	}
	return v, nil
}

// literal consumes true, false or null and returns it.
func (p *jsonParser) literal() (string, error) {
	p.ws()
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(p.s)-p.pos >= len(lit) && p.s[p.pos:p.pos+len(lit)] == lit {
			p.pos += len(lit)
			return lit, nil
		}
	}
	return "", p.errorf("unexpected value")
}

// skip consumes any JSON value.
func (p *jsonParser) skip(depth int) error {
	if depth > maxJSONDepth {
		return p.errorf("nesting too deep")
	}
	switch p.peek() {
	case '"':
		_, err := p.str()
		return err
	case '{':
		p.pos++
		if p.peek() == '}' {
			p.pos++
			return nil
		}
		for {
			if _, err := p.str(); err != nil {
				return err
			}
			if err := p.expect(':'); err != nil {
				return err
			}
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			switch p.peek() {
			case ',':
				p.pos++
			case '}':
				p.pos++
				return nil
			default:
				return p.errorf("expected ',' or '}'")
			}
		}
	case '[':
		p.pos++
		if p.peek() == ']' {
			p.pos++
			return nil
		}
		for {
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			switch p.peek() {
			case ',':
				p.pos++
			case ']':
				p.pos++
				return nil
			default:
				return p.errorf("expected ',' or ']'")
			}
		}
	case 't', 'f', 'n':
		_, err := p.literal()
		return err
	default:
		_, err := p.number()
		return err
	}
}

// scalar reads a string, number or boolean as text; null gives ok=false. fastjson always writes
// ext values as strings, but a lenient reader costs nothing.
func (p *jsonParser) scalar() (v string, ok bool, err error) {
	switch c := p.peek(); {
	case c == '"':
		v, err = p.str()
		return v, err == nil, err
	case c == 't' || c == 'f' || c == 'n':
		v, err = p.literal()
		return v, err == nil && v != "null", err
	default:
		v, err = p.number()
		return v, err == nil, err
	}
}

// countMembers estimates the members of the object being read (from just after its '{') by
// counting top-level commas, so the ext map is allocated once at the right size. It does not
// move the parser.
func (p *jsonParser) countMembers() int {
	n, depth := 1, 0
	for i := p.pos; i < len(p.s); i++ {
		switch p.s[i] {
		case '"':
			for i++; i < len(p.s) && p.s[i] != '"'; i++ {
				if p.s[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return n
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}

func decodeJSONHeader(h []byte) (*Command, error) {
	p := jsonParser{s: string(h)}
	c, err := p.header(&Command{})
	if err != nil {
		return nil, err
	}
	if p.wide != nil {
		// The frame is whole and its header well formed; only this command cannot be represented.
		p.wide.Opaque, p.wide.Flag = c.Opaque, c.Flag
		return nil, p.wide
	}
	return c, nil
}

// header parses the header object into c.
func (p *jsonParser) header(c *Command) (*Command, error) {
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	if p.peek() == '}' {
		p.pos++
		return c, p.end()
	}
	for {
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		if err := p.field(c, key); err != nil {
			return nil, err
		}
		switch p.peek() {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return c, p.end()
		default:
			return nil, p.errorf("expected ',' or '}'")
		}
	}
}

func (p *jsonParser) end() error {
	if p.peek() != 0 {
		return p.errorf("trailing data")
	}
	return nil
}

// field decodes one member of the header object into c; unknown members are skipped.
func (p *jsonParser) field(c *Command, key string) error {
	var err error
	var v int64
	switch key {
	case "code", "version":
		// Java ints in RocketMQ's JSON header; this package keeps the 16-bit fields of the
		// ROCKETMQ header, so a wider value is remembered and fails the command once parsed.
		v, err = p.integer(math.MinInt32, math.MaxInt32)
		if err == nil && (v < math.MinInt16 || v > math.MaxInt16) && p.wide == nil {
			p.wide = &FieldRangeError{Field: key, Value: v}
		}
		if key == "code" {
			c.Code = int16(v)
		} else {
			c.Version = int16(v)
		}
	case "opaque":
		v, err = p.integer(math.MinInt32, math.MaxInt32)
		c.Opaque = int32(v)
	case "flag":
		v, err = p.integer(math.MinInt32, math.MaxInt32)
		c.Flag = int32(v)
	case "language":
		switch p.peek() {
		case '"':
			c.Language, err = p.str()
		case 'n':
			_, err = p.literal()
			c.Language = ""
		default:
			v, err = p.integer(0, math.MaxUint8)
			c.Language = LanguageName(byte(v))
		}
	case "remark":
		if p.peek() == 'n' {
			_, err = p.literal()
			c.Remark = ""
		} else {
			c.Remark, err = p.str()
		}
	case "extFields":
		err = p.extFields(c)
	default:
		err = p.skip(0)
	}
	return err
}

func (p *jsonParser) extFields(c *Command) error {
	switch p.peek() {
	case 'n':
		_, err := p.literal()
		c.ExtFields = nil
		return err
	case '{':
	default:
		return p.errorf("extFields is not an object")
	}
	p.pos++
	c.ExtFields = make(map[string]string, p.countMembers())
	if p.peek() == '}' {
		p.pos++
		return nil
	}
	for {
		k, err := p.str()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		v, ok, err := p.scalar()
		if err != nil {
			return err
		}
		if ok {
			c.ExtFields[k] = v
		}
		switch p.peek() {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return nil
		default:
			return p.errorf("expected ',' or '}' in extFields")
		}
	}
}
