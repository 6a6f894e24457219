package brokersim

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/pkg/remoting"
)

// server is the transport shared by brokers and the name server: an accept loop, one reader
// goroutine per connection that hands each request to handle, and batched response writing.
// It can stop and resume listening on the same address, which is how a broker refuses
// connections.
type server struct {
	addr   string // fixed after the first listen, so a refusing broker comes back on its port
	handle func(sc *serverConn, req *remoting.Command)
	// idle closes a connection that has had no read and no write for this long, as a Java
	// server's IdleStateHandler does on ALL_IDLE; zero keeps connections open forever.
	idle  time.Duration
	epoch time.Time // origin of serverConn.lastActive, so activity is a monotonic offset
	// log hears of requests whose handling panicked.
	log logr.Logger

	mu         sync.Mutex
	ln         net.Listener
	conns      map[*serverConn]struct{}
	closed     bool
	wg         sync.WaitGroup
	accepted   atomic.Int64
	responses  atomic.Int64
	idleClosed atomic.Int64
	panics     atomic.Int64
}

// serverConn is one accepted connection.
type serverConn struct {
	srv *server
	nc  net.Conn
	fw  *remoting.FrameWriter
	fr  *remoting.FrameReader

	// lastActive is when bytes last moved either way, in nanoseconds since srv.epoch.
	lastActive atomic.Int64
	// stranded: a request was dropped here under Fault.Strand; the connection answers nothing
	// more.
	stranded atomic.Bool

	mu        sync.Mutex
	closed    bool
	timers    map[uint64]pendingTimer
	nextID    uint64
	idleTimer *time.Timer // nil when the server has no idle timeout
}

// DefaultIdleTimeout is how long a Java RocketMQ server (broker or name server) keeps a
// connection that neither reads nor writes: NettyServerConfig.serverChannelMaxIdleTimeSeconds,
// 120 s by default. Clients that do not heartbeat lose their connection after this long.
const DefaultIdleTimeout = 120 * time.Second

// idleTimeout turns an Options-style idle timeout into the server's: zero means the Java
// default, negative means never.
func idleTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultIdleTimeout
	case d < 0:
		return 0
	}
	return d
}

// activityConn marks the connection active on every read or write that moves bytes, which is
// what Netty's IdleStateHandler counts as not idle.
type activityConn struct {
	net.Conn
	sc *serverConn
}

// Read implements net.Conn.
func (c activityConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.sc.touch()
	}
	return n, err
}

// Write implements net.Conn.
func (c activityConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.sc.touch()
	}
	return n, err
}

// maxFrameSize is what the simulated servers accept, as RocketMQ's default.
const maxFrameSize = remoting.DefaultMaxFrameSize

// newServer returns a server that closes connections idle for idle (zero: never).
func newServer(handle func(*serverConn, *remoting.Command), idle time.Duration) *server {
	return &server{handle: handle, idle: idle, epoch: time.Now(), conns: make(map[*serverConn]struct{})}
}

// listen starts (or restarts) the accept loop on addr, or on s.addr when it is already fixed.
func (s *server) listen(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("brokersim: server closed")
	}
	if s.ln != nil {
		return nil
	}
	if s.addr != "" {
		addr = s.addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.ln = ln
	s.addr = ln.Addr().String()
	s.wg.Add(1)
	go s.acceptLoop(ln)
	return nil
}

func (s *server) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed || s.ln != ln {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		sc := &serverConn{srv: s, nc: nc}
		ac := activityConn{Conn: nc, sc: sc}
		sc.fw = remoting.NewFrameWriter(ac, 5*time.Second)
		sc.fr = remoting.NewFrameReader(ac, 64<<10, maxFrameSize)
		sc.touch()
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		if s.idle > 0 {
			s.wg.Add(1) // for the idle timer; see checkIdle
			sc.mu.Lock()
			sc.idleTimer = time.AfterFunc(s.idle, sc.checkIdle)
			sc.mu.Unlock()
		}
		s.mu.Unlock()
		s.accepted.Add(1)
		go sc.readLoop()
	}
}

// stopListening closes the listener so new connections are refused, and with dropConns also
// closes every open connection (a dead process loses its connections too).
func (s *server) stopListening(dropConns bool) {
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	var conns []*serverConn
	if dropConns {
		for sc := range s.conns {
			conns = append(conns, sc)
		}
	}
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, sc := range conns {
		sc.close()
	}
}

// listening reports whether the server accepts connections now.
func (s *server) listening() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ln != nil
}

// close stops everything and waits for every goroutine the server started.
func (s *server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.stopListening(true)
	s.wg.Wait()
}

func (sc *serverConn) readLoop() {
	defer sc.srv.wg.Done()
	defer sc.close()
	for {
		req, err := sc.fr.ReadCommand()
		if err != nil {
			// EOF, a reset or a malformed frame: as a RocketMQ server does, drop the connection.
			return
		}
		if req.IsResponse() {
			continue // the simulators never send requests, so there is nothing to match
		}
		sc.serve(req)
		if !sc.fr.Complete() {
			// Everything read so far is handled: write the batch of answers before waiting.
			if sc.fw.Flush() != nil {
				return
			}
		}
	}
}

// serve hands req to the server's handler.
func (sc *serverConn) serve(req *remoting.Command) {
	defer sc.survive(req)
	sc.srv.handle(sc, req)
}

// survive, deferred around handling req, turns a panic into the close of this connection only,
// counted and logged with its stack: a simulator serving many tests, or the demo beside the
// manager, outlives a request it mishandles, as a RocketMQ server closes the channel whose
// handler threw.
func (sc *serverConn) survive(req *remoting.Command) {
	p := recover()
	if p == nil {
		return
	}
	sc.srv.panics.Add(1)
	sc.srv.log.Error(fmt.Errorf("panic: %v", p), "brokersim: handling a request panicked; closing its connection",
		"remote", sc.nc.RemoteAddr().String(), "code", req.Code, "opaque", req.Opaque, "stack", string(debug.Stack()))
	sc.close()
}

// respond queues resp as the answer to req; inline answers are flushed by the read loop.
func (sc *serverConn) respond(req, resp *remoting.Command, flush bool) {
	if req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= remoting.FlagResponse
	if sc.fw.WriteCommand(resp, flush) == nil {
		sc.srv.responses.Add(1)
	}
}

// pendingTimer is a delayed answer: its timer, and what to release once it fired or was stopped.
type pendingTimer struct {
	t       *time.Timer
	release func()
	handle  func() // f, surviving its panic
}

// after runs f, answering req, after d on a timer tied to the connection, and the server waits
// for timers that already fired. A connection its peer closes runs what its timers still hold at
// once, in the order they were set, as a broker handles the requests it read whatever becomes of
// their channel (a send it stores late is how a client's timeout turns into a duplicate); their
// answers go nowhere. Closing the server cancels them. release runs exactly once, after f or when
// the timer is cancelled (or at once when the connection is closed already). A panic in f closes
// the connection, as one in the handler does.
func (sc *serverConn) after(d time.Duration, req *remoting.Command, f, release func()) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed {
		release()
		return
	}
	id := sc.nextID
	sc.nextID++
	if sc.timers == nil {
		sc.timers = make(map[uint64]pendingTimer)
	}
	sc.srv.wg.Add(1)
	handle := func() {
		defer sc.survive(req)
		f()
	}
	sc.timers[id] = pendingTimer{release: release, handle: handle, t: time.AfterFunc(d, func() {
		defer sc.srv.wg.Done()
		defer release()
		sc.mu.Lock()
		delete(sc.timers, id)
		sc.mu.Unlock()
		handle()
	})}
}

// touch records activity on the connection.
func (sc *serverConn) touch() { sc.lastActive.Store(int64(time.Since(sc.srv.epoch))) }

// checkIdle runs on the idle timer. It closes the connection when nothing moved for the
// server's idle timeout, and otherwise re-arms the timer for the rest of that time. The timer
// holds one count of srv.wg while armed or running: checkIdle releases it when it does not
// re-arm, and close releases it when it stops an armed timer.
func (sc *serverConn) checkIdle() {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		sc.srv.wg.Done()
		return
	}
	quiet := time.Since(sc.srv.epoch) - time.Duration(sc.lastActive.Load())
	if rest := sc.srv.idle - quiet; rest > 0 {
		sc.idleTimer.Reset(rest)
		sc.mu.Unlock()
		return
	}
	sc.mu.Unlock()
	sc.srv.idleClosed.Add(1)
	sc.close()
	sc.srv.wg.Done()
}

func (sc *serverConn) close() {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	sc.closed = true
	timers := sc.timers
	sc.timers = nil
	idle := sc.idleTimer
	sc.mu.Unlock()
	if idle != nil && idle.Stop() {
		sc.srv.wg.Done()
	}
	_ = sc.nc.Close()
	sc.srv.mu.Lock()
	delete(sc.srv.conns, sc)
	stopping := sc.srv.closed
	sc.srv.mu.Unlock()
	ids := slices.Sorted(maps.Keys(timers))
	for _, id := range ids {
		pt := timers[id]
		if !pt.t.Stop() {
			continue // fired already; it releases itself
		}
		if !stopping {
			pt.handle()
		}
		pt.release()
		sc.srv.wg.Done()
	}
}

// isClosed reports whether the connection is closed.
func (sc *serverConn) isClosed() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.closed
}
