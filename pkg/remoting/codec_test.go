package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// routeRequest is the command of the reference's test vectors: GET_ROUTEINFO_BY_TOPIC from a
// Java 5.3.3 client.
func routeRequest(t SerializeType) *Command {
	return &Command{
		Code: GetRouteInfoByTopic, Language: "JAVA", Version: 479, Opaque: 1,
		ExtFields: map[string]string{"topic": "TopicTest"}, SerializeType: t,
	}
}

func TestEncodeMatchesReferenceVectors(t *testing.T) {
	const jsonHeader = `{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}`
	tests := []struct {
		name string
		cmd  *Command
		want []byte
	}{
		{
			name: "JSON header is 131 bytes after 00000087 00000083",
			cmd:  routeRequest(JSON),
			want: append(mustHex(t, "00000087 00000083"), jsonHeader...),
		},
		{
			name: "ROCKETMQ header is 41 bytes",
			cmd:  routeRequest(RocketMQ),
			want: mustHex(t, "0000002d 01000029 0069 00 01df 00000001 00000000 00000000 00000014 0005 746f706963 00000009 546f70696354657374"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("frame\n got %x\nwant %x", got, tt.want)
			}
			dec, err := Decode(got[4:])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, tt.cmd) {
				t.Fatalf("decoded %+v, want %+v", dec, tt.cmd)
			}
		})
	}
}

// TestBinaryHeaderLayout checks the RocketMQSerializableTest cases: field offsets and lengths of
// the ROCKETMQ header.
func TestBinaryHeaderLayout(t *testing.T) {
	tests := []struct {
		name      string
		cmd       *Command
		length    int
		remarkLen int
		extAt     int
		extLen    int
	}{
		{"no remark and no ext fields is 21 bytes", &Command{Code: 103, Version: 2333}, 21, 0, 17, 0},
		{"remark Sample Remark is 34 bytes", &Command{Code: 103, Version: 2333, Remark: "Sample Remark"}, 34, 13, 30, 0},
		{"ext key=value is 35 bytes", &Command{Code: 103, Version: 2333, ExtFields: map[string]string{"key": "value"}}, 35, 0, 17, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := AppendHeader(nil, tt.cmd, RocketMQ)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != tt.length {
				t.Fatalf("header is %d bytes, want %d", len(h), tt.length)
			}
			if got := int(binary.BigEndian.Uint16(h[0:])); got != 103 {
				t.Errorf("code %d", got)
			}
			if got := int(binary.BigEndian.Uint16(h[3:])); got != 2333 {
				t.Errorf("version %d", got)
			}
			if got := int(binary.BigEndian.Uint32(h[13:])); got != tt.remarkLen {
				t.Errorf("remark length %d, want %d", got, tt.remarkLen)
			}
			if string(h[17:17+tt.remarkLen]) != tt.cmd.Remark {
				t.Errorf("remark bytes %q", h[17:17+tt.remarkLen])
			}
			if got := int(binary.BigEndian.Uint32(h[tt.extAt:])); got != tt.extLen {
				t.Errorf("ext length %d at offset %d, want %d", got, tt.extAt, tt.extLen)
			}
			dec, err := DecodeHeader(RocketMQ, h)
			if err != nil {
				t.Fatal(err)
			}
			if dec.Remark != tt.cmd.Remark || !reflect.DeepEqual(dec.ExtFields, tt.cmd.ExtFields) {
				t.Fatalf("decoded %+v", dec)
			}
		})
	}
}

// TestSerializeWordMarksType checks markProtocolType's cases: a 261-byte JSON header gives
// 00 00 01 05 and a 16777215-byte ROCKETMQ header gives 01 FF FF FF.
func TestSerializeWordMarksType(t *testing.T) {
	base, _ := AppendHeader(nil, &Command{}, JSON)
	// A remark adds `,"remark":"` + text + `"`.
	json261 := &Command{Remark: strings.Repeat("r", 261-len(base)-12)}
	big := &Command{Remark: strings.Repeat("r", 16777215-binaryFixedLength), SerializeType: RocketMQ}
	tooBig := &Command{Remark: strings.Repeat("r", 16777216-binaryFixedLength), SerializeType: RocketMQ}
	tests := []struct {
		name string
		cmd  *Command
		want string
	}{
		{"JSON header of 261 bytes", json261, "00000105"},
		{"ROCKETMQ header of 16777215 bytes", big, "01ffffff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Encode(tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(f[4:8]); got != tt.want {
				t.Fatalf("second word %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("a header of 16777216 bytes cannot be encoded", func(t *testing.T) {
		if _, err := Encode(tooBig); !errors.Is(err, ErrFrame) {
			t.Fatalf("err = %v, want ErrFrame", err)
		}
	})
}

func TestDecodeHeadersWrittenByOtherImplementations(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   Command
	}{
		{
			name:   "Java response without ext fields or remark",
			header: `{"code":0,"flag":1,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":403}`,
			want:   Command{Code: 0, Flag: 1, Language: "JAVA", Version: 403},
		},
		{
			name:   "rocketmq-client-go request in struct order with empty remark",
			header: `{"code":105,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"topic":"TopicTest"}}`,
			want:   Command{Code: 105, Language: "GO", Version: 317, Opaque: 7, ExtFields: map[string]string{"topic": "TopicTest"}},
		},
		{
			name:   "V2 send header capture with escaped property separators",
			header: `{"code":310,"extFields":{"a":"yyzGroup2","b":"yyztest2","c":"TBW102","d":"4","e":"0","f":"0","g":"1491978653614","h":"0","i":"TAGS\u0001TAG\u0002WAIT\u0001true\u0002KEYS\u0001ffff\u0002","j":"0","k":"false"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":252}`,
			want: Command{Code: 310, Language: "JAVA", Version: 252, Opaque: 3, ExtFields: map[string]string{
				"a": "yyzGroup2", "b": "yyztest2", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1491978653614", "h": "0",
				"i": "TAGS\x01TAG\x02WAIT\x01true\x02KEYS\x01ffff\x02", "j": "0", "k": "false",
			}},
		},
		{
			name:   "null remark and ext fields, whitespace, unknown members and numeric ext values",
			header: " { \"remark\" : null , \"extFields\" : {\"n\": 12, \"b\": true, \"z\": null}, \"x\": [1, {\"y\": [true, null]}], \"code\" : 17 } ",
			want:   Command{Code: 17, ExtFields: map[string]string{"n": "12", "b": "true"}},
		},
		{
			name:   "escapes including a surrogate pair",
			header: `{"code":1,"remark":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00"}`,
			want:   Command{Code: 1, Remark: "a\"b\\c/d\n\té😀"},
		},
		{
			name:   "language as a numeric code",
			header: `{"code":1,"language":9}`,
			want:   Command{Code: 1, Language: "GO"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeHeader(JSON, []byte(tt.header))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestDecodeRejectsMalformedInput(t *testing.T) {
	binHeader := func(mutate func([]byte) []byte) []byte {
		h, _ := AppendHeader(nil, &Command{Code: 1, Remark: "abc", ExtFields: map[string]string{"k": "v"}}, RocketMQ)
		return mutate(h)
	}
	frame := func(t SerializeType, header []byte, body string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(t)<<24|uint32(len(header)))
		return append(append(b, header...), body...)
	}
	tests := []struct {
		name  string
		frame []byte
		want  string
	}{
		{"frame shorter than its header word", []byte{0, 0}, "no header length word"},
		{"header length beyond the frame", binary.BigEndian.AppendUint32(nil, 10), "bad header length 10"},
		{"unknown serialize type", frame(2, []byte("{}"), ""), "unknown serialize type 2"},
		{"ROCKETMQ header shorter than 21 bytes", frame(RocketMQ, make([]byte, 20), ""), "shorter than its 21 fixed bytes"},
		{"negative remark length", frame(RocketMQ, binHeader(func(h []byte) []byte { binary.BigEndian.PutUint32(h[13:], 0xFFFFFFFF); return h }), ""), "remark length -1"},
		{"remark longer than the header", frame(RocketMQ, binHeader(func(h []byte) []byte { binary.BigEndian.PutUint32(h[13:], 1000); return h }), ""), "remark length 1000"},
		{"ext block longer than the header", frame(RocketMQ, binHeader(func(h []byte) []byte { binary.BigEndian.PutUint32(h[20:], 99); return h }), ""), "ext fields length 99"},
		{"ext name longer than the block", frame(RocketMQ, binHeader(func(h []byte) []byte { binary.BigEndian.PutUint16(h[24:], 50); return h }), ""), "ext field name length 50"},
		{"ext value longer than the block", frame(RocketMQ, binHeader(func(h []byte) []byte { binary.BigEndian.PutUint32(h[27:], 50); return h }), ""), "ext field value length 50"},
		{"truncated ext entry", frame(RocketMQ, binHeader(func(h []byte) []byte { binary.BigEndian.PutUint32(h[20:], 4); return h[:28] }), ""), "truncated ext field value length"},
		{"JSON header that is not an object", frame(JSON, []byte(`[1]`), ""), "expected '{'"},
		{"JSON trailing data", frame(JSON, []byte(`{"code":1} x`), ""), "trailing data"},
		{"code beyond a Java int", frame(JSON, []byte(`{"code":3000000000}`), ""), `integer "3000000000" out of range`},
		{"code that fits a Java int but not 16 bits", frame(JSON, []byte(`{"code":200050}`), ""), "code 200050 (opaque 0) does not fit 16 bits"},
		{"fractional opaque", frame(JSON, []byte(`{"opaque":1.5}`), ""), `integer "1.5" out of range`},
		{"unterminated string", frame(JSON, []byte(`{"remark":"abc`), ""), "unterminated string"},
		{"bad escape", frame(JSON, []byte(`{"remark":"\q"}`), ""), "bad escape"},
		{"ext fields not an object", frame(JSON, []byte(`{"extFields":[]}`), ""), "extFields is not an object"},
		{"unknown member nested too deep", frame(JSON, []byte(`{"x":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`), ""), "nesting too deep"},
		{"empty JSON header", frame(JSON, nil, ""), "expected '{'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.frame)
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("err = %v, want ErrFrame", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

// randomCommand builds a command with arbitrary field values, strings included bytes that need
// escaping and bytes that are not UTF-8.
func randomCommand(r *rand.Rand, t SerializeType) *Command {
	str := func(max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = byte(r.IntN(32)) // control characters
			case 1:
				b[i] = byte(r.IntN(256))
			default:
				const alphabet = "abcXYZ09\"\\/ {}:,"
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		return string(b)
	}
	c := &Command{
		Code:          int16(r.Uint32()),
		Language:      languageNames[r.IntN(len(languageNames))],
		Version:       int16(r.Uint32()),
		Opaque:        int32(r.Uint32()),
		Flag:          int32(r.Uint32()),
		Remark:        str(40),
		SerializeType: t,
	}
	if n := r.IntN(6); n > 0 {
		c.ExtFields = make(map[string]string, n)
		for i := 0; i < n; i++ {
			c.ExtFields[str(12)] = str(30)
		}
	} else if t == JSON && r.IntN(2) == 0 {
		c.ExtFields = map[string]string{}
	}
	if n := r.IntN(64); n > 0 {
		c.Body = make([]byte, n)
		for i := range c.Body {
			c.Body[i] = byte(r.Uint32())
		}
	}
	return c
}

func TestRoundTripPreservesEveryField(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, st := range []SerializeType{JSON, RocketMQ} {
		t.Run(st.String(), func(t *testing.T) {
			for i := 0; i < 3000; i++ {
				c := randomCommand(r, st)
				f, err := Encode(c)
				if err != nil {
					t.Fatalf("encode %+v: %v", c, err)
				}
				if got := int(binary.BigEndian.Uint32(f)); got != len(f)-4 {
					t.Fatalf("length word %d, frame has %d bytes after it", got, len(f)-4)
				}
				d, err := Decode(f[4:])
				if err != nil {
					t.Fatalf("decode of %+v: %v", c, err)
				}
				if !reflect.DeepEqual(d, c) {
					t.Fatalf("round trip changed the command\n got %+v\nwant %+v", d, c)
				}
			}
		})
	}
}

func TestDecodeDoesNotAliasTheFrame(t *testing.T) {
	f, _ := Encode(&Command{Code: 1, Remark: "remark", ExtFields: map[string]string{"k": "v"}, Body: []byte("body")})
	d, err := Decode(f[4:])
	if err != nil {
		t.Fatal(err)
	}
	for i := range f {
		f[i] = 'x'
	}
	if d.Remark != "remark" || d.ExtFields["k"] != "v" || string(d.Body) != "body" {
		t.Fatalf("decoded command changed with the frame: %+v", d)
	}
}

func TestEncodeRejectsUnencodableCommands(t *testing.T) {
	tests := []struct {
		name string
		cmd  *Command
	}{
		{"unknown serialize type", &Command{SerializeType: 7}},
		{"ext name longer than 32767 bytes in a ROCKETMQ header", &Command{SerializeType: RocketMQ, ExtFields: map[string]string{strings.Repeat("k", 1<<15): "v"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := AppendFrame(dst, tt.cmd)
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("err = %v, want ErrFrame", err)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

func TestCommandFlags(t *testing.T) {
	req := NewRequest(SendMessage, nil, nil)
	if req.IsResponse() || req.IsOneway() {
		t.Fatal("new request flagged as response or oneway")
	}
	req.Opaque = 42
	req.SerializeType = RocketMQ
	resp := NewResponse(req, SystemBusy, "busy")
	if !resp.IsResponse() || resp.Opaque != 42 || resp.SerializeType != RocketMQ || resp.Code != SystemBusy {
		t.Fatalf("response %+v", resp)
	}
	if !(&Command{Flag: FlagOneway}).IsOneway() {
		t.Fatal("oneway flag not reported")
	}
	if s := resp.String(); !strings.Contains(s, "SYSTEM_BUSY") || !strings.Contains(s, "busy") {
		t.Fatalf("String() = %q", s)
	}
}
