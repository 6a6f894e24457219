package remoting

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// closingServer answers every request on its first connection except the one that arrives after
// the connection sat idle: that one it reads and then closes the connection without answering,
// as a server's idle close crossing a request does. Later connections are answered normally.
func closingServer(t *testing.T) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer c.Close()
				fr := NewFrameReader(c, 0, 0)
				fw := NewFrameWriter(c, time.Second)
				for i := 0; ; i++ {
					req, err := fr.ReadCommand()
					if err != nil {
						return
					}
					if n == 1 && i == 1 {
						return // the idle close: read, no answer, FIN
					}
					_ = fw.WriteCommand(NewResponse(req, Success, ""), true)
				}
			}()
		}
	}()
	return ln.Addr().String(), conns
}

func TestARequestCrossingAnIdleCloseIsSentAgainOnANewConnection(t *testing.T) {
	cases := []struct {
		name       string
		staleAfter time.Duration
		wantErr    bool
	}{
		{"after the connection sat idle, the request is sent once more", 50 * time.Millisecond, false},
		{"on a busy connection the close is the caller's error", time.Hour, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, conns := closingServer(t)
			c := NewClient(ClientOptions{StaleAfter: tc.staleAfter})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := c.Invoke(ctx, addr, NewRequest(GetMaxOffset, nil, nil)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the idle span under test
			resp, err := c.Invoke(ctx, addr, NewRequest(GetMaxOffset, nil, nil))
			switch {
			case tc.wantErr && !errors.Is(err, ErrClosed):
				t.Fatalf("got %v, %v; want ErrClosed", resp, err)
			case !tc.wantErr && (err != nil || resp.Code != Success):
				t.Fatalf("got %v, %v; want the answer from a new connection", resp, err)
			}
			if want := map[bool]int32{true: 1, false: 2}[tc.wantErr]; conns.Load() != want {
				t.Errorf("%d connections, want %d", conns.Load(), want)
			}
		})
	}
}
