package remoting

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// goAwayServer answers GO_AWAY to the requests goAway picks, leaves unanswered those hold picks
// and echoes the others. It records every request with the number of the connection that carried
// it (in accept order, from 1).
type goAwayServer struct {
	*testServer
	mu    sync.Mutex
	seen  []seenRequest
	conns map[*serverConn]int
}

type seenRequest struct {
	conn int
	sc   *serverConn
	req  *Command
}

func startGoAwayServer(t *testing.T, goAway, hold func(conn int, req *Command) bool) *goAwayServer {
	s := &goAwayServer{conns: map[*serverConn]int{}}
	s.testServer = startTestServer(t, func(sc *serverConn, req *Command) {
		s.mu.Lock()
		n, ok := s.conns[sc]
		if !ok {
			n = len(s.conns) + 1
			s.conns[sc] = n
		}
		s.seen = append(s.seen, seenRequest{n, sc, req})
		s.mu.Unlock()
		switch {
		case goAway != nil && goAway(n, req):
			_ = sc.fw.WriteCommand(NewResponse(req, GoAway, "please go away"), true)
		case hold != nil && hold(n, req):
			// The test answers it, or never does.
		default:
			sc.reply(req)
		}
	})
	return s
}

func (s *goAwayServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// current returns the client's connection to addr, or nil.
func current(c *Client, addr string) *conn {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.conns[addr]
}

// isClosed reports whether the client has closed cn.
func isClosed(cn *conn) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.closed
}

// retiredCount is how many retired connections the client keeps open for their answers.
func retiredCount(c *Client) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.retired)
}

func TestGoAwayIsAnsweredByResendingOnANewConnection(t *testing.T) {
	s := startGoAwayServer(t, func(conn int, req *Command) bool { return conn == 1 && req.Code == SendMessageV2 }, nil)
	c := newTestClient(t, ClientOptions{})
	ctx := ctxTimeout(t, 5*time.Second)
	if _, err := c.Invoke(ctx, s.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	first := current(c, s.addr())

	req := NewRequest(SendMessageV2, map[string]string{"a": "group", "b": "Topic"}, []byte("body"))
	resp, err := c.Invoke(ctx, s.addr(), req)
	if err != nil {
		t.Fatalf("the resend on a new connection failed: %v", err)
	}
	if resp.Code != Success || resp.ExtFields["b"] != "Topic" {
		t.Fatalf("got %v, want the new connection's answer", resp)
	}
	seen := s.requests()
	if len(seen) != 3 || seen[1].conn != 1 || seen[2].conn != 2 {
		t.Fatalf("%d requests, want the heartbeat and the send on connection 1, then the send on connection 2", len(seen))
	}
	a, b := seen[1].req, seen[2].req
	if a.Code != b.Code || a.ExtFields["a"] != b.ExtFields["a"] || a.ExtFields["b"] != b.ExtFields["b"] ||
		string(a.Body) != string(b.Body) || a.Opaque == b.Opaque {
		t.Fatalf("the resend differs: %v then %v (the same request with a new opaque expected)", a, b)
	}
	// Nothing waits on the connection that answered GO_AWAY, so it is closed at once, and later
	// requests use the new one.
	if !isClosed(first) || retiredCount(c) != 0 {
		t.Fatalf("connection 1 closed: %v, retired connections kept: %d", isClosed(first), retiredCount(c))
	}
	if _, err := c.Invoke(ctx, s.addr(), req); err != nil {
		t.Fatal(err)
	}
	if seen := s.requests(); len(seen) != 4 || seen[3].conn != 2 || s.accepts.Load() != 2 {
		t.Fatalf("%d requests over %d connections, want the next send on connection 2", len(seen), s.accepts.Load())
	}
}

func TestRequestsInFlightOnAGoingAwayConnectionStillGetTheirAnswers(t *testing.T) {
	s := startGoAwayServer(t,
		func(conn int, req *Command) bool { return conn == 1 && req.ExtFields["k"] == "go-away" },
		func(conn int, req *Command) bool { return conn == 1 && req.ExtFields["k"] == "slow" })
	c := newTestClient(t, ClientOptions{})
	ctx := ctxTimeout(t, 10*time.Second)

	// A slow request is in flight on connection 1 when another request there is answered GO_AWAY.
	slow := make(chan error, 1)
	go func() {
		resp, err := c.Invoke(ctx, s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "slow"}, nil))
		if err == nil && resp.ExtFields["k"] != "slow" {
			err = errors.New("wrong answer to the slow request")
		}
		slow <- err
	}()
	waitFor(t, func() bool { return len(s.requests()) == 1 })
	first := current(c, s.addr())
	if _, err := c.Invoke(ctx, s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "go-away"}, nil)); err != nil {
		t.Fatalf("the resend on a new connection failed: %v", err)
	}
	if isClosed(first) || retiredCount(c) != 1 || current(c, s.addr()) == first {
		t.Fatalf("connection 1 closed: %v, retired: %d; want it open for the slow request but out of use",
			isClosed(first), retiredCount(c))
	}

	// The slow request is answered on connection 1, which then closes.
	held := s.requests()[0]
	held.sc.reply(held.req)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return isClosed(first) && retiredCount(c) == 0 })
	if seen := s.requests(); len(seen) != 3 || seen[2].conn != 2 {
		t.Fatalf("%d requests, want the slow one and the GO_AWAY one on connection 1, the resend on 2", len(seen))
	}
}

func TestGoAwayOnTheNewConnectionTooIsReturnedAsTheAnswer(t *testing.T) {
	s := startGoAwayServer(t, func(int, *Command) bool { return true }, nil)
	c := newTestClient(t, ClientOptions{})
	resp, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(SendMessageV2, nil, []byte("x")))
	if err != nil || resp.Code != GoAway {
		t.Fatalf("got %v, %v; want the second GO_AWAY as the response", resp, err)
	}
	if n := s.accepts.Load(); n != 2 || len(s.requests()) != 2 {
		t.Fatalf("%d connections and %d requests, want one resend on one new connection", n, len(s.requests()))
	}
	if c.Connected(s.addr()) || retiredCount(c) != 0 {
		t.Fatal("a connection that answered GO_AWAY is still kept")
	}
}

func TestCloseFailsRequestsWaitingOnARetiredConnection(t *testing.T) {
	s := startGoAwayServer(t,
		func(conn int, req *Command) bool { return conn == 1 && req.ExtFields["k"] == "go-away" },
		func(_ int, req *Command) bool { return req.ExtFields["k"] == "never" })
	c := NewClient(ClientOptions{})
	ctx := context.Background()
	never := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "never"}, nil))
		never <- err
	}()
	waitFor(t, func() bool { return len(s.requests()) == 1 })
	if _, err := c.Invoke(ctx, s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "go-away"}, nil)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on a retired connection")
	}
	if err := <-never; !errors.Is(err, ErrClosed) {
		t.Fatalf("the request waiting on the retired connection got %v, want ErrClosed", err)
	}
}
