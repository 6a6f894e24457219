package remoting

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
)

// clientWrites returns the writes made on the client's connection to addr.
func clientWrites(c *Client, addr string) int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cn := c.conns[addr]; cn != nil && cn.fw != nil {
		return cn.fw.Writes()
	}
	return 0
}

func benchSendRequest(st SerializeType) *Command {
	h := sampleSendHeader()
	h.Properties = "WAIT\x01true\x02UNIQ_KEY\x017F0000011F90000000000000000A0001\x02TAGS\x01TagA\x02"
	req := NewSendRequest(h, make([]byte, 256), true)
	req.SerializeType = st
	return req
}

func BenchmarkEncode(b *testing.B) {
	for _, st := range []SerializeType{JSON, RocketMQ} {
		req := benchSendRequest(st)
		b.Run("SendV2/"+st.String(), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 2048)
			for i := 0; i < b.N; i++ {
				var err error
				if buf, err = AppendFrame(buf[:0], req); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	resp := NewSendResponse(&Command{Opaque: 7}, SendResponse{MsgID: "7F00000100002A9F0000000000000001", QueueID: 3, QueueOffset: 123456, TransactionID: "7F0000011F90000000000000000A0001"})
	for _, st := range []SerializeType{JSON, RocketMQ} {
		for name, c := range map[string]*Command{"SendV2": benchSendRequest(st), "SendResponse": resp} {
			c := *c
			c.SerializeType = st
			frame, _ := Encode(&c)
			b.Run(name+"/"+st.String(), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(frame)))
				for i := 0; i < b.N; i++ {
					if _, err := Decode(frame[4:]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// stdlibHeader mirrors the JSON header's fields for an encoding/json comparison.
type stdlibHeader struct {
	Code                    int16             `json:"code"`
	ExtFields               map[string]string `json:"extFields,omitempty"`
	Flag                    int32             `json:"flag"`
	Language                string            `json:"language"`
	Opaque                  int32             `json:"opaque"`
	Remark                  string            `json:"remark,omitempty"`
	SerializeTypeCurrentRPC string            `json:"serializeTypeCurrentRPC"`
	Version                 int16             `json:"version"`
}

// BenchmarkJSONHeaderStdlib is the same header through encoding/json, for comparison with the
// hand-written codec above.
func BenchmarkJSONHeaderStdlib(b *testing.B) {
	req := benchSendRequest(JSON)
	h := stdlibHeader{Code: req.Code, ExtFields: req.ExtFields, Language: req.Language, Opaque: 1, SerializeTypeCurrentRPC: "JSON", Version: req.Version}
	raw, _ := json.Marshal(h)
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := json.Marshal(&h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var out stdlibHeader
			if err := json.Unmarshal(raw, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkNewUniqID(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = NewUniqID()
	}
}

// BenchmarkInvokeEcho measures a request/response round trip over loopback against a minimal
// echo peer (the brokersim package measures the same against a simulated broker).
func BenchmarkInvokeEcho(b *testing.B) {
	t := &testing.T{}
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		resp := NewResponse(req, Success, "")
		_ = sc.fw.WriteCommand(resp, sc.fr.Buffered() == 0)
		if sc.fr.Buffered() == 0 {
			_ = sc.fw.Flush()
		}
	})
	defer srv.close()
	c := NewClient(ClientOptions{})
	defer c.Close()
	req := benchSendRequest(JSON)
	ctx := context.Background()
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := c.Invoke(ctx, srv.addr(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		w0 := clientWrites(c, srv.addr())
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Invoke(ctx, srv.addr(), req); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/float64(clientWrites(c, srv.addr())-w0), "frames/write")
	})
}
