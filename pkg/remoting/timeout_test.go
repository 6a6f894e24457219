package remoting

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// strandingServer models a network outage that strands a connection: while frozen it reads every
// request and answers none, and a connection that had a request unanswered stays silent after the
// heal, as a TCP connection in retransmission backoff does; connections made after the heal are
// answered. The test may still answer a held request itself, as the peer would once its
// retransmissions get through.
type strandingServer struct {
	*goAwayServer
	frozen   atomic.Bool
	stranded atomic.Int32 // a bit per connection number (1-30) that had a request held
	held     sync.Map     // *Command -> true: the requests left unanswered
}

func startStrandingServer(t *testing.T) *strandingServer {
	s := &strandingServer{}
	s.goAwayServer = startGoAwayServer(t, nil, func(conn int, req *Command) bool {
		if s.frozen.Load() {
			s.stranded.Or(1 << conn)
		}
		if s.stranded.Load()&(1<<conn) == 0 {
			return false
		}
		s.held.Store(req, true)
		return true
	})
	return s
}

// heldOn returns the requests the server left unanswered on connection conn.
func (s *strandingServer) heldOn(conn int) []seenRequest {
	var out []seenRequest
	for _, r := range s.requests() {
		if _, held := s.held.Load(r.req); held && r.conn == conn {
			out = append(out, r)
		}
	}
	return out
}

func TestATimedOutRequestRetiresItsConnectionAndTheNextRequestConnectsAfresh(t *testing.T) {
	s := startStrandingServer(t)
	c := newTestClient(t, ClientOptions{})
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	first := current(c, s.addr())

	s.frozen.Store(true)
	inFlight := make(chan error, 1)
	go func() {
		resp, err := c.Invoke(ctxTimeout(t, 30*time.Second), s.addr(), NewRequest(SendMessageV2, map[string]string{"k": "in-flight"}, nil))
		if err == nil && resp.ExtFields["k"] != "in-flight" {
			err = errors.New("wrong answer to the request in flight")
		}
		inFlight <- err
	}()
	waitFor(t, func() bool { return len(s.requests()) == 2 })
	if _, err := c.Invoke(ctxTimeout(t, 200*time.Millisecond), s.addr(), NewRequest(GetMaxOffset, nil, nil)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a request to the frozen peer got %v, want ErrTimeout", err)
	}
	if isClosed(first) || retiredCount(c) != 1 || current(c, s.addr()) == first {
		t.Fatalf("after the timeout: connection 1 closed %v, retired %d, still current %v; want it open for the request in flight but out of use",
			isClosed(first), retiredCount(c), current(c, s.addr()) == first)
	}

	s.frozen.Store(false)
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(GetMaxOffset, nil, nil)); err != nil {
		t.Fatalf("the first request after the heal: %v", err)
	}
	if seen := s.requests(); seen[len(seen)-1].conn != 2 {
		t.Fatalf("the request after the heal went out on connection %d, want a new connection 2", seen[len(seen)-1].conn)
	}

	// The stranded connection's retransmissions get through at last: the request in flight on it
	// is answered there, and the connection, drained, closes.
	held := s.heldOn(1)
	if len(held) != 2 {
		t.Fatalf("%d requests held on connection 1, want the one in flight and the one that timed out", len(held))
	}
	for _, h := range held {
		h.sc.reply(h.req)
	}
	if err := <-inFlight; err != nil {
		t.Fatalf("the request in flight on the retired connection: %v", err)
	}
	waitFor(t, func() bool { return isClosed(first) && retiredCount(c) == 0 })
}

func TestOnlyADeadlineRetiresAConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(ctx context.Context) (context.Context, context.CancelFunc)
		// cancel: the test cancels the request once it is in flight.
		cancel, retired bool
	}{
		{"a deadline passing", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		}, false, true},
		{"a cancellation", context.WithCancel, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTestServer(t, func(sc *serverConn, req *Command) {
				if req.ExtFields["drop"] == "" {
					sc.reply(req)
				}
			})
			c := newTestClient(t, ClientOptions{})
			if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
				t.Fatal(err)
			}
			first := current(c, srv.addr())
			ctx, cancel := tc.end(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := c.Invoke(ctx, srv.addr(), NewRequest(HeartBeat, map[string]string{"drop": "yes"}, nil))
				done <- err
			}()
			if tc.cancel {
				waitFor(t, func() bool { return pendingOn(c, srv.addr()) == 1 })
				cancel()
			}
			if err := <-done; err == nil {
				t.Fatal("an unanswered request succeeded")
			}
			if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), srv.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
				t.Fatal(err)
			}
			if got := current(c, srv.addr()) != first; got != tc.retired {
				t.Fatalf("the next request used a new connection: %v, want %v", got, tc.retired)
			}
			if tc.retired {
				waitFor(t, func() bool { return isClosed(first) && retiredCount(c) == 0 })
			}
		})
	}
}

func TestARetiredConnectionClosesAfterTheGraceWithRequestsStillWaiting(t *testing.T) {
	s := startStrandingServer(t)
	c := newTestClient(t, ClientOptions{RetiredGrace: 300 * time.Millisecond})
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	first := current(c, s.addr())
	s.frozen.Store(true)
	never := make(chan error, 1)
	go func() {
		// No deadline: only the grace ends its wait on a connection that never answers.
		_, err := c.Invoke(context.Background(), s.addr(), NewRequest(SendMessageV2, nil, nil))
		never <- err
	}()
	waitFor(t, func() bool { return len(s.requests()) == 2 })
	if _, err := c.Invoke(ctxTimeout(t, 100*time.Millisecond), s.addr(), NewRequest(GetMaxOffset, nil, nil)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	select {
	case err := <-never:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("the request waiting on the retired connection got %v, want ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a request without a deadline still waits on a retired connection long after its grace")
	}
	waitFor(t, func() bool { return isClosed(first) && retiredCount(c) == 0 })
}

// TestARequestQueuedBehindAWriteThePeerDoesNotTakeRetiresTheConnection: requests to one address
// share one connection and its write queue, so a short request (a probe) queued behind a large
// one the peer stops reading waits on the socket. Its timeout retires the connection, and the
// next request goes out on a new one, while the large request still completes when the peer
// reads again.
func TestARequestQueuedBehindAWriteThePeerDoesNotTakeRetiresTheConnection(t *testing.T) {
	reading := make(chan struct{})
	var resumeOnce sync.Once
	resume := func() { resumeOnce.Do(func() { close(reading) }) }
	s := startGoAwayServer(t, nil, func(conn int, req *Command) bool {
		if conn == 1 && req.ExtFields["k"] == "stall" {
			<-reading // the peer stops reading this connection
		}
		return false
	})
	t.Cleanup(resume) // before the server's cleanup, which waits for this handler
	c := newTestClient(t, ClientOptions{WriteTimeout: time.Minute})
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	first := current(c, s.addr())
	// The stalling request, then one larger than any socket buffer, which the writer cannot
	// finish while the peer does not read.
	done := make(chan error, 2)
	for _, r := range []*Command{
		NewRequest(SendMessageV2, map[string]string{"k": "stall"}, nil),
		NewRequest(SendMessageV2, map[string]string{"k": "large"}, make([]byte, 15<<20)),
	} {
		go func() {
			_, err := c.Invoke(ctxTimeout(t, time.Minute), s.addr(), r)
			done <- err
		}()
		waitFor(t, func() bool { return pendingOn(c, s.addr()) >= 1 })
	}
	waitFor(t, func() bool { return pendingOn(c, s.addr()) == 2 })
	if _, err := c.Invoke(ctxTimeout(t, 200*time.Millisecond), s.addr(), NewRequest(GetMaxOffset, nil, nil)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a probe queued behind the stalled write got %v, want ErrTimeout", err)
	}
	if _, err := c.Invoke(ctxTimeout(t, 5*time.Second), s.addr(), NewRequest(GetMaxOffset, nil, nil)); err != nil {
		t.Fatalf("the next probe: %v", err)
	}
	if current(c, s.addr()) == first || isClosed(first) {
		t.Fatal("the next probe did not go out on a new connection beside the stalled one")
	}
	resume()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("a request on the stalled connection: %v", err)
		}
	}
	waitFor(t, func() bool { return isClosed(first) && retiredCount(c) == 0 })
}
