package producer

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// compressible returns n bytes of text-like data that zlib shrinks.
func compressible(n int) []byte {
	return bytes.Repeat([]byte("detour routes RocketMQ sends around slow brokers; "), n/50+1)[:n]
}

// incompressible returns n random bytes, which zlib cannot shrink.
func incompressible(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func inflate(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a zlib stream: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("inflating: %v", err)
	}
	return out
}

func TestSendBodyCompressesFromTheThresholdAsRocketMQ(t *testing.T) {
	const both = SysFlagCompressed | SysFlagZlib
	cases := []struct {
		name      string
		body      []byte
		threshold int // as in Options
		wantFlag  int32
	}{
		{"one byte under 4 KiB stays as it is", compressible(4095), 0, 0},
		{"exactly 4 KiB is compressed (RocketMQ compares with >=)", compressible(4096), 0, both},
		{"5000 bytes", compressible(5000), 0, both},
		{"1 MiB", compressible(1 << 20), 0, both},
		{"just under 4 MiB", compressible(MaxMessageSize - 1), 0, both},
		{"random bytes that do not shrink are sent as they are", incompressible(64 << 10), 0, 0},
		{"a lower threshold", compressible(200), 100, both},
		{"a negative threshold never compresses", compressible(1 << 20), -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := bytes.Clone(tc.body)
			got, flag := sendBody(tc.body, compressThreshold(tc.threshold))
			if flag != tc.wantFlag {
				t.Fatalf("sysFlag %#x, want %#x", flag, tc.wantFlag)
			}
			if !bytes.Equal(tc.body, orig) {
				t.Fatal("the caller's body was modified")
			}
			if flag == 0 {
				if &got[0] != &tc.body[0] || len(got) != len(tc.body) {
					t.Fatal("an uncompressed body is not the caller's own bytes")
				}
				return
			}
			if len(got) >= len(tc.body) {
				t.Errorf("compressed %d bytes to %d", len(tc.body), len(got))
			}
			if !bytes.Equal(inflate(t, got), orig) {
				t.Fatal("the compressed body does not inflate to the original")
			}
		})
	}
}

func TestSendBodyIsSafeForConcurrentUse(t *testing.T) {
	bodies := [][]byte{compressible(5000), compressible(1 << 16), compressible(300 << 10)}
	done := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 20 {
				b := bodies[(g+i)%len(bodies)]
				out, _ := sendBody(b, DefaultCompressThreshold)
				zr, err := zlib.NewReader(bytes.NewReader(out))
				if err == nil {
					var in []byte
					if in, err = io.ReadAll(zr); err == nil && !bytes.Equal(in, b) {
						err = fmt.Errorf("body of %d bytes inflated to different bytes", len(b))
					}
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func withCompressThreshold(n int) clusterOpt {
	return func(o *Options, _ *Policy) { o.CompressThreshold = n }
}

// storedMessage returns the message stored under res on the broker that answered it.
func (c *simCluster) storedMessage(t *testing.T, res *SendResult) brokersim.StoredMessage {
	t.Helper()
	for _, m := range c.brokers[res.Broker].Messages(res.Topic, res.QueueID) {
		if m.UniqKey == res.MsgID {
			return m
		}
	}
	t.Fatalf("message %s not stored on %s queue %d", res.MsgID, res.Broker, res.QueueID)
	return brokersim.StoredMessage{}
}

func TestBrokerReceivesLargeBodiesCompressedUnlessTheSendAsksForThemAsTheyAreAndTheMessageIsUntouched(t *testing.T) {
	cases := []struct {
		name string
		opt  clusterOpt
		// asIs sends under WithBodyAsIs.
		asIs       bool
		body       []byte
		compressed bool
	}{
		{"small body", withCompressThreshold(0), false, compressible(100), false},
		{"5000-byte body", withCompressThreshold(0), false, compressible(5000), true},
		{"1 MiB body", withCompressThreshold(0), false, compressible(1 << 20), true},
		{"compression turned off", withCompressThreshold(-1), false, compressible(1 << 20), false},
		{"a send that asks for its body as it is, at the default threshold", withCompressThreshold(0), true, compressible(1 << 20), false},
		{"a send that asks for its body as it is, exactly at the threshold", withCompressThreshold(0), true, compressible(4096), false},
		{"a send that asks for its body as it is, at a low threshold", withCompressThreshold(100), true, compressible(5000), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 1, []string{"broker-a"}, tc.opt)
			m := &Message{Topic: testTopic, Body: tc.body, Properties: map[string]string{"k": "v"}}
			orig := bytes.Clone(m.Body)
			ctx := context.Background()
			if tc.asIs {
				ctx = WithBodyAsIs(ctx)
			}
			for _, mode := range []SendMode{ModeSync, ModeAsync} {
				var res *SendResult
				var err error
				if mode == ModeSync {
					res, err = c.r.Send(ctx, m)
				} else {
					done := make(chan struct{})
					c.r.SendAsync(ctx, m, func(r *SendResult, e error) { res, err = r, e; close(done) })
					<-done
				}
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.Body, orig) || len(m.Properties) != 1 {
					t.Fatal("the caller's message was modified")
				}
				sm := c.storedMessage(t, res)
				got := sm.Body
				if tc.compressed {
					if sm.SysFlag != 0x301 {
						t.Fatalf("stored sysFlag %#x, want 0x301 (compressed, zlib)", sm.SysFlag)
					}
					if len(sm.Body) >= len(orig) {
						t.Fatalf("stored %d bytes for a body of %d", len(sm.Body), len(orig))
					}
					got = inflate(t, sm.Body)
				} else if sm.SysFlag != 0 {
					t.Fatalf("stored sysFlag %#x, want 0", sm.SysFlag)
				}
				if !bytes.Equal(got, orig) {
					t.Fatal("stored body differs from the one sent")
				}
			}
		})
	}
}

func TestRetriesSendTheSameCompressedBody(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"})
	c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.SystemBusy})
	body := compressible(64 << 10)
	var res *SendResult
	for i := 0; i < 4 && (res == nil || res.Attempts < 2); i++ {
		var err error
		if res, err = c.r.Send(context.Background(), &Message{Topic: testTopic, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if res.Attempts != 2 || res.Broker != "broker-b" {
		t.Fatalf("no send was retried from broker-a on broker-b: %+v", res)
	}
	sm := c.storedMessage(t, res)
	want, _ := sendBody(body, DefaultCompressThreshold)
	if sm.SysFlag != 0x301 || !bytes.Equal(sm.Body, want) {
		t.Fatalf("the retry stored sysFlag %#x and %d bytes, want 0x301 and the %d compressed bytes", sm.SysFlag, len(sm.Body), len(want))
	}
}
