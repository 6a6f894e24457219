package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestJSONCodeAndVersionAreJavaIntsThatFailOnlyTheirCommand(t *testing.T) {
	cases := []struct {
		header string
		field  string
		value  int64
		opaque int32
		flag   int32
	}{
		{`{"code":40000,"flag":1,"opaque":7,"version":479}`, "code", 40000, 7, 1},
		{`{"opaque":9,"code":-32769,"flag":0}`, "code", -32769, 9, 0},
		{`{"code":0,"version":2147483647,"opaque":3,"flag":1}`, "version", 2147483647, 3, 1},
	}
	for _, tc := range cases {
		t.Run(tc.header, func(t *testing.T) {
			_, err := DecodeHeader(JSON, []byte(tc.header))
			var fre *FieldRangeError
			if !errors.As(err, &fre) || !errors.Is(err, ErrFrame) {
				t.Fatalf("got %v, want a *FieldRangeError wrapping ErrFrame", err)
			}
			if fre.Field != tc.field || fre.Value != tc.value || fre.Opaque != tc.opaque || fre.Flag != tc.flag {
				t.Fatalf("got %+v", fre)
			}
		})
	}
	// The 16-bit range itself decodes as before.
	for _, code := range []int16{-32768, -1, 0, 1500, 32767} {
		c, err := DecodeHeader(JSON, fmt.Appendf(nil, `{"code":%d,"version":%d}`, code, code))
		if err != nil || c.Code != code || c.Version != code {
			t.Errorf("code %d: got %+v, %v", code, c, err)
		}
	}
}

// rawJSONFrame encodes a frame whose JSON header is given as text, for values Command cannot hold.
func rawJSONFrame(header string) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	f = binary.BigEndian.AppendUint32(f, uint32(JSON)<<24|uint32(len(header)))
	return append(f, header...)
}

func TestResponseWithACodeBeyond16BitsFailsOnlyItsRequest(t *testing.T) {
	s := startTestServer(t, func(sc *serverConn, req *Command) {
		if req.ExtFields["k"] == "wide" {
			_ = sc.fw.WriteRaw(rawJSONFrame(fmt.Sprintf(`{"code":40000,"flag":1,"opaque":%d,"language":"JAVA","version":479}`, req.Opaque)))
			return
		}
		sc.reply(req)
	})
	c := newTestClient(t, ClientOptions{})
	ctx := ctxTimeout(t, 5*time.Second)
	_, err := c.Invoke(ctx, s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "wide"}, nil))
	var fre *FieldRangeError
	if !errors.Is(err, ErrFrame) || !errors.As(err, &fre) || fre.Value != 40000 {
		t.Fatalf("got %v, want a frame error naming code 40000", err)
	}
	// The connection carries on.
	for range 3 {
		if resp, err := c.Invoke(ctx, s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "ok"}, nil)); err != nil || resp.Code != Success {
			t.Fatalf("next request: %v %v", resp, err)
		}
	}
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections, want the first one kept", n)
	}
}

func TestServerRequestWithACodeBeyond16BitsIsRefused(t *testing.T) {
	answered := make(chan *Command, 1)
	s := startTestServer(t, func(sc *serverConn, req *Command) {
		if req.IsResponse() {
			answered <- req
			return
		}
		sc.reply(req)
		_ = sc.fw.WriteRaw(rawJSONFrame(`{"code":70000,"flag":0,"opaque":42,"language":"JAVA","version":479}`))
	})
	c := newTestClient(t, ClientOptions{})
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-answered:
		if resp.Code != RequestCodeNotSupported || resp.Opaque != 42 || !resp.IsResponse() || resp.Remark != " request type 70000 not supported" {
			t.Fatalf("answer %v, want REQUEST_CODE_NOT_SUPPORTED for opaque 42", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's request was never answered")
	}
	if !c.Connected(s.addr()) {
		t.Fatal("the connection was dropped")
	}
}
