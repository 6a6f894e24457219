package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
)

// testServer is a scriptable RocketMQ-protocol peer. handle is called on the connection's reader
// goroutine for every request and decides what to do with it.
type testServer struct {
	t       *testing.T
	ln      net.Listener
	accepts atomic.Int32
	handle  func(sc *serverConn, req *Command)
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []*serverConn
}

type serverConn struct {
	nc net.Conn
	fw *FrameWriter
	fr *FrameReader
}

// reply answers req with code Success, echoing its ext fields, flushing at once.
func (sc *serverConn) reply(req *Command) {
	resp := NewResponse(req, Success, "")
	resp.ExtFields = req.ExtFields
	_ = sc.fw.WriteCommand(resp, true)
}

func echo(sc *serverConn, req *Command) { sc.reply(req) }

func startTestServer(t *testing.T, handle func(sc *serverConn, req *Command)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, handle: handle}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			sc := &serverConn{nc: nc, fw: NewFrameWriter(nc, time.Second), fr: NewFrameReader(nc, 0, 0)}
			s.mu.Lock()
			s.conns = append(s.conns, sc)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				for {
					req, err := sc.fr.ReadCommand()
					if err != nil {
						return
					}
					s.handle(sc, req)
				}
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, sc := range s.conns {
		_ = sc.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func newTestClient(t *testing.T, opts ClientOptions) *Client {
	c := NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestInvokeMultiplexesConcurrentRequestsOverOneConnection(t *testing.T) {
	// The server answers in reverse order of arrival whenever it has read everything available,
	// so responses routinely overtake each other and only opaque matching keeps them straight.
	var held []*Command
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		held = append(held, req)
		if sc.fr.Buffered() > 0 && len(held) < 16 {
			return
		}
		for i := len(held) - 1; i >= 0; i-- {
			resp := NewResponse(held[i], Success, "")
			resp.ExtFields = held[i].ExtFields
			_ = sc.fw.WriteCommand(resp, false)
		}
		held = held[:0]
		_ = sc.fw.Flush()
	})
	c := newTestClient(t, ClientOptions{})
	const workers, perWorker = 64, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				id := strconv.Itoa(w*perWorker + i)
				req := NewRequest(SendMessageV2, map[string]string{"id": id}, []byte(id))
				resp, err := c.Invoke(ctxTimeout(t, 10*time.Second), srv.addr(), req)
				if err != nil {
					errs <- err
					return
				}
				if resp.ExtFields["id"] != id || !resp.IsResponse() {
					errs <- fmt.Errorf("request %s got response %v", id, resp)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := srv.accepts.Load(); n != 1 {
		t.Fatalf("server accepted %d connections, want 1", n)
	}
}

func TestInvokeWaitsUntilTheContextDeadline(t *testing.T) {
	srv := startTestServer(t, func(*serverConn, *Command) {}) // never answers
	c := newTestClient(t, ClientOptions{})
	start := time.Now()
	_, err := c.Invoke(ctxTimeout(t, 80*time.Millisecond), srv.addr(), NewRequest(SendMessage, nil, nil))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed < 80*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", elapsed)
	}
	if !strings.Contains(err.Error(), srv.addr()) || !strings.Contains(err.Error(), "SEND_MESSAGE") {
		t.Fatalf("error %q does not name the address and request", err)
	}
	if n := pendingOn(c, srv.addr()); n != 0 {
		t.Fatalf("%d calls left pending after the timeout", n)
	}

	t.Run("cancellation is not a timeout", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Invoke(ctx, srv.addr(), NewRequest(SendMessage, nil, nil))
			done <- err
		}()
		waitFor(t, func() bool { return pendingOn(c, srv.addr()) == 1 })
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want Canceled and not ErrTimeout", err)
		}
	})
	t.Run("an expired context sends nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Invoke(ctx, "127.0.0.1:1", NewRequest(SendMessage, nil, nil)); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if c.Connected("127.0.0.1:1") {
			t.Fatal("dialled for a dead context")
		}
	})
}

func TestInvokeOnewaySetsTheFlagAndExpectsNoAnswer(t *testing.T) {
	got := make(chan *Command, 2)
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		got <- req
		if !req.IsOneway() {
			sc.reply(req)
		}
	})
	c := newTestClient(t, ClientOptions{})
	if err := c.InvokeOneway(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, map[string]string{"n": "1"}, nil)); err != nil {
		t.Fatal(err)
	}
	first := <-got
	if !first.IsOneway() || first.IsResponse() || first.ExtFields["n"] != "1" {
		t.Fatalf("server got %v", first)
	}
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if second := <-got; second.IsOneway() {
		t.Fatal("a normal request carried the oneway flag")
	}
	if n := pendingOn(c, srv.addr()); n != 0 {
		t.Fatalf("%d calls pending", n)
	}
}

func TestClientReconnectsAfterTheServerClosesTheConnection(t *testing.T) {
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		if req.ExtFields["close"] == "true" {
			_ = sc.nc.Close()
			return
		}
		sc.reply(req)
	})
	c := newTestClient(t, ClientOptions{})
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, map[string]string{"close": "true"}, nil))
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("request on the closed connection: err = %v, want ErrClosed", err)
	}
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatalf("request after the close: %v", err)
	}
	if n := srv.accepts.Load(); n != 2 {
		t.Fatalf("server accepted %d connections, want 2", n)
	}
}

func TestMalformedFrameFailsOnlyItsConnection(t *testing.T) {
	release := make(chan struct{})
	var goodHeld sync.WaitGroup
	goodHeld.Add(4)
	good := startTestServer(t, func(sc *serverConn, req *Command) {
		goodHeld.Done()
		go func() { <-release; sc.reply(req) }()
	})
	var badSeen atomic.Int32
	bad := startTestServer(t, func(sc *serverConn, req *Command) {
		if badSeen.Add(1) == 4 {
			// A frame whose header claims more bytes than the frame holds.
			raw := binary.BigEndian.AppendUint32(nil, 8)
			raw = binary.BigEndian.AppendUint32(raw, 100)
			raw = append(raw, "{}{}"...)
			_ = sc.fw.WriteRaw(raw)
		}
	})
	c := newTestClient(t, ClientOptions{})
	type result struct {
		addr string
		err  error
	}
	results := make(chan result, 8)
	for i := 0; i < 4; i++ {
		for _, addr := range []string{good.addr(), bad.addr()} {
			go func(addr string) {
				_, err := c.Invoke(ctxTimeout(t, 10*time.Second), addr, NewRequest(SendMessage, nil, nil))
				results <- result{addr, err}
			}(addr)
		}
	}
	for i := 0; i < 4; i++ {
		r := <-results
		if r.addr != bad.addr() {
			t.Fatalf("request to the good server finished early: %v", r.err)
		}
		if !errors.Is(r.err, ErrFrame) || !strings.Contains(r.err.Error(), "bad header length 100") || !strings.Contains(r.err.Error(), bad.addr()) {
			t.Fatalf("err = %v, want ErrFrame naming the header length and the address", r.err)
		}
	}
	goodHeld.Wait()
	close(release)
	for i := 0; i < 4; i++ {
		if r := <-results; r.err != nil || r.addr != good.addr() {
			t.Fatalf("request to %s: %v", r.addr, r.err)
		}
	}
	if !c.Connected(good.addr()) {
		t.Fatal("the good connection was closed")
	}
}

func TestOversizedFramesAreRefused(t *testing.T) {
	t.Run("from the server: fails the connection's requests", func(t *testing.T) {
		srv := startTestServer(t, func(sc *serverConn, req *Command) {
			raw := binary.BigEndian.AppendUint32(nil, 2<<20) // claims 2 MiB
			_ = sc.fw.WriteRaw(raw)
		})
		c := newTestClient(t, ClientOptions{MaxFrameSize: 1 << 20})
		_, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(SendMessage, nil, nil))
		if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "exceeds the limit of 1048576 bytes") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("from the server: the 16 MiB default", func(t *testing.T) {
		srv := startTestServer(t, func(sc *serverConn, req *Command) {
			_ = sc.fw.WriteRaw(binary.BigEndian.AppendUint32(nil, 16<<20)) // 16 MiB + 4 with the length
		})
		c := newTestClient(t, ClientOptions{})
		_, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(SendMessage, nil, nil))
		if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "16777220 bytes exceeds the limit of 16777216") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a request over the limit is refused before sending and the connection stays", func(t *testing.T) {
		srv := startTestServer(t, echo)
		c := newTestClient(t, ClientOptions{MaxFrameSize: 4096})
		if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(SendMessage, nil, nil)); err != nil {
			t.Fatal(err)
		}
		_, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(SendMessage, nil, make([]byte, 5000)))
		if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), "exceeds the frame limit of 4096") {
			t.Fatalf("err = %v", err)
		}
		if err := c.InvokeOneway(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(SendMessage, nil, make([]byte, 5000))); !errors.Is(err, ErrFrame) {
			t.Fatalf("oneway err = %v", err)
		}
		if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(SendMessage, nil, nil)); err != nil {
			t.Fatal(err)
		}
		if n := srv.accepts.Load(); n != 1 {
			t.Fatalf("%d connections, want 1", n)
		}
	})
}

func TestConnectFailureWrapsErrConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := newTestClient(t, ClientOptions{})
	_, err = c.Invoke(ctxTimeout(t, 5*time.Second), addr, NewRequest(SendMessage, nil, nil))
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want ErrConnect naming %s", err, addr)
	}
	if err := c.InvokeOneway(ctxTimeout(t, 5*time.Second), addr, NewRequest(SendMessage, nil, nil)); !errors.Is(err, ErrConnect) {
		t.Fatalf("oneway err = %v", err)
	}
}

func TestCloseFailsRequestsInFlight(t *testing.T) {
	srv := startTestServer(t, func(*serverConn, *Command) {})
	c := NewClient(ClientOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), srv.addr(), NewRequest(SendMessage, nil, nil))
		done <- err
	}()
	waitFor(t, func() bool { return pendingOn(c, srv.addr()) == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight err = %v, want ErrClosed", err)
	}
	if _, err := c.Invoke(context.Background(), srv.addr(), NewRequest(SendMessage, nil, nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close err = %v, want ErrClosed", err)
	}
}

func TestServerRequestsAreAnswered(t *testing.T) {
	answers := make(chan *Command, 1)
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		if req.IsResponse() {
			answers <- req
			return
		}
		_ = sc.fw.WriteCommand(&Command{Code: CheckTransactionState, Opaque: 777, Language: "JAVA"}, true)
		sc.reply(req)
	})
	c := newTestClient(t, ClientOptions{})
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	a := <-answers
	if a.Code != RequestCodeNotSupported || a.Opaque != 777 || a.Remark != " request type 39 not supported" {
		t.Fatalf("answer %v (remark %q), want RocketMQ's REQUEST_CODE_NOT_SUPPORTED for opaque 777", a, a.Remark)
	}
}

func TestNoGoroutineOrCallLeaksPerRequest(t *testing.T) {
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		if req.ExtFields["drop"] == "" {
			sc.reply(req)
		}
	})
	before := runtime.NumGoroutine()
	c := NewClient(ClientOptions{})
	// Warm up: one connection means one reader goroutine here and one handler in the server.
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	warm := runtime.NumGoroutine()

	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				ext := map[string]string{}
				timeout := 5 * time.Second
				if i%10 == 0 {
					ext["drop"] = "yes"
					timeout = time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_, err := c.Invoke(ctx, srv.addr(), NewRequest(HeartBeat, ext, nil))
				cancel()
				if (err != nil) != (ext["drop"] != "") {
					t.Errorf("request %d/%d: %v", w, i, err)
				}
				if i%50 == 0 {
					_ = c.InvokeOneway(context.Background(), srv.addr(), NewRequest(HeartBeat, map[string]string{"drop": "x"}, nil))
				}
			}
		}(w)
	}
	wg.Wait()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= warm })
	if n := pendingOn(c, srv.addr()); n != 0 {
		t.Fatalf("%d calls left pending", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}

// pendingOn returns how many calls wait on the client's connection to addr.
func pendingOn(c *Client, addr string) int {
	c.mu.RLock()
	cn := c.conns[addr]
	c.mu.RUnlock()
	if cn == nil {
		return 0
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.pending)
}

// waitFor polls cond until it holds or five seconds pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, time.Millisecond, "condition", func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("not yet (goroutines: %d)", runtime.NumGoroutine())
	})
}

func TestFrameReaderCompleteTellsWhetherReadingWouldWait(t *testing.T) {
	a, _ := Encode(routeRequest(JSON))
	tests := []struct {
		name   string
		stream []byte
		want   bool
	}{
		{"nothing buffered", nil, false},
		{"partial length word", a[:2], false},
		{"partial frame", a[:len(a)-1], false},
		{"whole frame", a, true},
		{"oversized frame fails at once", binary.BigEndian.AppendUint32(nil, 1<<30), true},
		{"undersized frame fails at once", binary.BigEndian.AppendUint32(nil, 2), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := NewFrameReader(strings.NewReader(string(tt.stream)), 0, 0)
			_, _ = fr.br.Peek(len(tt.stream)) // fill the buffer as a read would
			if got := fr.Complete(); got != tt.want {
				t.Fatalf("Complete() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDeadlineHoldsWhenThePeerStopsReading fills the socket of a peer that never reads: the
// writer goroutine blocks, but every request still returns at its own deadline.
func TestDeadlineHoldsWhenThePeerStopsReading(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			held <- nc
		}
	}()
	c := newTestClient(t, ClientOptions{WriteTimeout: time.Hour, MaxFrameSize: 2 << 20})
	body := make([]byte, 1<<20)
	for i := 0; i < 24; i++ { // far more than the loopback socket buffers hold
		done := make(chan error, 1)
		go func() {
			_, err := c.Invoke(ctxTimeout(t, 50*time.Millisecond), ln.Addr().String(), NewRequest(SendMessage, nil, body))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("request %d: err = %v, want ErrTimeout", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("request %d is stuck behind the blocked write", i)
		}
	}
	if nc := <-held; nc != nil {
		_ = nc.Close()
	}
}
