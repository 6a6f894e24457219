package remoting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ClientOptions configures a Client. Zero values take the defaults.
type ClientOptions struct {
	// DialTimeout bounds connection establishment (default 3s). A request also stops waiting
	// for a connection when its own context ends.
	DialTimeout time.Duration
	// MaxFrameSize bounds frames in both directions, length field included
	// (default DefaultMaxFrameSize, 16 MiB).
	MaxFrameSize int
	// WriteTimeout bounds each socket write, so a peer that stops reading breaks its connection
	// instead of blocking senders (default 5s).
	WriteTimeout time.Duration
	// ReadBufferSize is the per-connection read buffer (default 32 KiB); responses that fit it
	// are decoded without an intermediate copy.
	ReadBufferSize int
	// KeepAlive is the TCP keep-alive period (default: the operating system's; negative disables).
	KeepAlive time.Duration
	// StaleAfter is how long a connection must have been idle before a request for a peer close
	// that crosses the request to count as an idle close, answered by sending the request once
	// more on a new connection (default 1 s, the shortest idle timeout a RocketMQ server can be
	// set to; negative disables).
	StaleAfter time.Duration
	// OnRequest, if set, answers requests a server sends to the client (for example
	// CHECK_TRANSACTION_STATE). A nil result sends nothing. Without it such requests are
	// answered REQUEST_CODE_NOT_SUPPORTED. It runs on the connection's reader and must not block.
	OnRequest func(addr string, req *Command) *Command
	// RetiredGrace bounds how long a retired connection (one that carried a GO_AWAY, or a
	// request that timed out waiting for its answer) stays open for the requests still in flight
	// on it; those still waiting then fail with ErrClosed (default 30 s; negative: no bound, the
	// connection closes only when they are done).
	RetiredGrace time.Duration
}

func (o *ClientOptions) withDefaults() ClientOptions {
	c := *o
	if c.DialTimeout <= 0 {
		c.DialTimeout = 3 * time.Second
	}
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.ReadBufferSize <= 0 {
		c.ReadBufferSize = 32 << 10
	}
	switch {
	case c.RetiredGrace == 0:
		c.RetiredGrace = 30 * time.Second
	case c.RetiredGrace < 0:
		c.RetiredGrace = 0
	}
	switch {
	case c.StaleAfter == 0:
		c.StaleAfter = time.Second
	case c.StaleAfter < 0:
		c.StaleAfter = time.Duration(math.MaxInt64)
	}
	return c
}

// Client sends RocketMQ requests over TCP. It keeps one connection per address and multiplexes
// every request to that address over it, matching responses to requests by opaque. Each request
// waits under its own context deadline; no goroutine is started per request: per connection one
// reader does all the receiving and one writer all the sending, batching the frames queued while
// it writes. A connection that fails fails only the requests in flight on it and is replaced by
// the next request. A server that answers GO_AWAY (a RocketMQ 5.x broker or proxy shutting down)
// is treated as RocketMQ's client treats it: its connection takes no new requests and the request
// is sent again on a new connection. A request that times out waiting for its answer retires its
// connection the same way, as RocketMQ's client closes a channel after a timeout
// (clientCloseSocketIfTimeout): a connection that stopped answering, such as one stuck in TCP
// retransmission backoff after a network outage, would otherwise hold every later request to its
// address, probes included, long after the peer answers again on a new connection.
//
// A Client is safe for concurrent use.
type Client struct {
	opts   ClientOptions
	opaque atomic.Int32

	mu    sync.RWMutex
	conns map[string]*conn
	// retired holds connections a GO_AWAY or a timeout took out of conns that still wait for
	// answers.
	retired map[*conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	ctx     context.Context // cancelled by Close, aborts dials
	cancel  context.CancelFunc
	// creds chooses the credentials requests are signed with, per address (acl.go).
	creds atomic.Pointer[CredentialLookup]
}

// NewClient returns a client; connections are made on first use of each address.
func NewClient(opts ClientOptions) *Client {
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{opts: opts.withDefaults(), conns: make(map[string]*conn), retired: make(map[*conn]struct{}),
		ctx: ctx, cancel: cancel}
}

// errClientClosed is what requests get once Close has been called.
var errClientClosed = fmt.Errorf("%w: client closed", ErrClosed)

// conn is one multiplexed connection.
type conn struct {
	client *Client
	addr   string
	ready  chan struct{} // closed when the dial finished, either way
	up     atomic.Bool   // dial succeeded and ready is closed
	err    error         // dial error, set before ready closes

	nc   net.Conn
	fw   *FrameWriter
	stop chan struct{} // closed by fail: ends the writer goroutine

	// active is when the connection last carried a request or a response (unix nanoseconds),
	// so a request can tell it went out on a connection the peer may have just closed for idleness.
	active atomic.Int64

	mu      sync.Mutex
	pending map[int32]*call
	closed  bool
	// retired: the server answered GO_AWAY here, or a request timed out; no new request is
	// registered, and the connection closes once its pending requests are done, or when grace
	// fires.
	retired bool
	grace   *time.Timer // closes a retired connection after RetiredGrace; stopped by fail
}

// call is one request waiting for its response. Calls are pooled; done has capacity one and
// receives exactly one signal per use, after resp or err is set.
type call struct {
	done chan struct{}
	resp *Command
	err  error
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// framePool holds encode buffers; buffers that grew past maxRetainedBuffer are dropped.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Invoke sends req to addr and waits for its response until ctx ends. req is not modified (the
// wire carries a fresh opaque), so it may be reused or sent concurrently. A response with a
// failure code is returned as a response, not as an error. Errors wrap ErrTimeout, ErrConnect,
// ErrClosed or ErrFrame, or are the context's error when ctx was cancelled without a deadline.
//
// A request that went out on a connection idle for StaleAfter or longer, which the server then
// closed without answering (its idle close crossing the request), is sent once more on a new
// connection: the server read nothing after deciding to close, and the broker is not at fault.
//
// A GO_AWAY answer (a server shutting down) is handled as RocketMQ's client does with
// enableReconnectForGoAway, its default: the connection that carried it takes no new requests and
// req is sent once more, under the same ctx, on a new connection to addr; requests already in
// flight on the old connection still get their answers there. Only when the new connection
// answers GO_AWAY too is that answer returned, as a response like any other refusal, so the
// caller's retry rules decide (RocketMQ 5.x producers retry it on another broker).
func (c *Client) Invoke(ctx context.Context, addr string, req *Command) (*Command, error) {
	req = c.signFor(addr, req)
	resp, cn, err := c.roundTrip(ctx, addr, req)
	if errors.Is(err, errStale) {
		resp, cn, err = c.roundTrip(ctx, addr, req)
	}
	if err != nil || resp.Code != GoAway {
		return resp, err
	}
	c.retire(cn)
	resp, cn, err = c.roundTrip(ctx, addr, req)
	if err == nil && resp.Code == GoAway {
		c.retire(cn)
	}
	return resp, err
}

// roundTrip sends req once and waits for its response; it also returns the connection that
// carried it.
func (c *Client) roundTrip(ctx context.Context, addr string, req *Command) (*Command, *conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, c.ctxError(err, addr, req, "before sending")
	}
	opaque := c.opaque.Add(1)
	bp := framePool.Get().(*[]byte)
	frame, err := appendFrame((*bp)[:0], req, opaque, req.Flag&^(FlagResponse|FlagOneway))
	if err == nil && len(frame) > c.opts.MaxFrameSize {
		err = frameError("request %s of %d bytes exceeds the frame limit of %d bytes", RequestCodeName(req.Code), len(frame), c.opts.MaxFrameSize)
	}
	if err != nil {
		putFrame(bp, frame)
		return nil, nil, err
	}

	cl := callPool.Get().(*call)
	cn, err := c.register(ctx, addr, req, opaque, cl)
	if err != nil {
		callPool.Put(cl)
		putFrame(bp, frame)
		return nil, nil, err
	}
	now := time.Now().UnixNano()
	idle := time.Duration(now - cn.active.Swap(now))
	werr := cn.fw.Write(frame)
	putFrame(bp, frame)
	if werr != nil {
		cn.fail(fmt.Errorf("%w: writing to %s: %w", ErrClosed, addr, werr))
	}

	select {
	case <-cl.done:
	case <-ctx.Done():
		cn.mu.Lock()
		if cn.pending[opaque] == cl {
			delete(cn.pending, opaque)
			drained := cn.drainedLocked()
			cn.mu.Unlock()
			switch {
			case drained: // retired before, and this was the last request it waited for
				cn.fail(errRetired)
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				// The connection did not answer in time: later requests connect afresh, and
				// the ones in flight here still get their answers if they come.
				c.retire(cn)
			}
			callPool.Put(cl)
			return nil, cn, c.ctxError(ctx.Err(), addr, req, "waiting for the response")
		}
		cn.mu.Unlock()
		// The reader (or a failing connection) already took the call: its signal is on the
		// way and it is as good as any.
		<-cl.done
	}
	resp, err := cl.resp, cl.err
	cl.resp, cl.err = nil, nil
	callPool.Put(cl)
	if err != nil && idle >= c.opts.StaleAfter && errors.Is(err, errPeerClosed) {
		err = fmt.Errorf("%w: %w", errStale, err)
	}
	return resp, cn, err
}

// register files cl under opaque on a live connection to addr and returns that connection.
func (c *Client) register(ctx context.Context, addr string, req *Command, opaque int32, cl *call) (*conn, error) {
	for lost := 0; ; {
		cn, err := c.conn(ctx, addr, req)
		if err != nil {
			return nil, err
		}
		cn.mu.Lock()
		if !cn.closed && !cn.retired {
			cn.pending[opaque] = cl
			cn.mu.Unlock()
			return cn, nil
		}
		closed := cn.closed
		cn.mu.Unlock()
		// The connection died or was retired between lookup and registration. Nothing was
		// written, so it is safe to try on a fresh connection: once for a connection that died,
		// until ctx ends for one retired (a timeout elsewhere took it out of service, and the
		// table holds its successor already).
		if err := ctx.Err(); err != nil {
			return nil, c.ctxError(err, addr, req, "waiting for the connection")
		}
		if closed {
			if lost++; lost > 1 {
				return nil, fmt.Errorf("%w: %s to %s: connection lost before sending", ErrClosed, RequestCodeName(req.Code), addr)
			}
		}
	}
}

// errPeerClosed marks a connection the peer closed cleanly (a FIN, not a reset or a bad frame).
var errPeerClosed = fmt.Errorf("%w: closed by the peer", ErrClosed)

// errStale marks a request that went out on a connection idle for StaleAfter or longer, which the
// peer closed before answering: most likely the server's idle close crossing the request on the
// wire (RocketMQ servers close connections idle for serverChannelMaxIdleTimeSeconds). A server
// that closed the channel for idleness read nothing more from it, so the request is sent once more
// on a new connection.
var errStale = errors.New("sent on a connection the peer closed for idleness")

// errRetired closes a retired connection once nothing waits on it; no request sees it.
var errRetired = fmt.Errorf("%w: connection retired", ErrClosed)

// retire takes cn out of service after the server answered GO_AWAY on it or a request on it timed
// out: the next request to its address connects afresh, requests in flight on cn still get their
// answers, and cn closes once none is left, when RetiredGrace has passed, or when the server
// closes it first, whichever comes first. Retiring cn again, or after it closed, does nothing.
func (c *Client) retire(cn *conn) {
	c.mu.Lock()
	if c.conns[cn.addr] == cn {
		delete(c.conns, cn.addr)
	}
	cn.mu.Lock()
	if cn.closed || cn.retired {
		cn.mu.Unlock()
		c.mu.Unlock()
		return
	}
	cn.retired = true
	drained := cn.drainedLocked()
	if !drained && c.opts.RetiredGrace > 0 {
		grace := c.opts.RetiredGrace
		cn.grace = time.AfterFunc(grace, func() {
			cn.fail(fmt.Errorf("%w: %s: retired connection closed after %v with requests still waiting", ErrClosed, cn.addr, grace))
		})
	}
	cn.mu.Unlock()
	if !drained {
		// Close must still find it.
		c.retired[cn] = struct{}{}
	}
	c.mu.Unlock()
	if drained {
		cn.fail(errRetired)
	}
}

// drainedLocked reports whether cn is retired and nothing waits on it any more, so it can close.
// cn.mu must be held.
func (cn *conn) drainedLocked() bool {
	return cn.retired && !cn.closed && len(cn.pending) == 0
}

// InvokeOneway sends req to addr with the oneway flag and returns once it is queued for writing.
// No response is expected or read.
func (c *Client) InvokeOneway(ctx context.Context, addr string, req *Command) error {
	if err := ctx.Err(); err != nil {
		return c.ctxError(err, addr, req, "before sending")
	}
	req = c.signFor(addr, req)
	bp := framePool.Get().(*[]byte)
	frame, err := appendFrame((*bp)[:0], req, c.opaque.Add(1), (req.Flag|FlagOneway)&^FlagResponse)
	defer putFrame(bp, frame)
	if err != nil {
		return err
	}
	if len(frame) > c.opts.MaxFrameSize {
		return frameError("request %s of %d bytes exceeds the frame limit of %d bytes", RequestCodeName(req.Code), len(frame), c.opts.MaxFrameSize)
	}
	cn, err := c.conn(ctx, addr, req)
	if err != nil {
		return err
	}
	if err := cn.fw.Write(frame); err != nil {
		err = fmt.Errorf("%w: writing to %s: %w", ErrClosed, addr, err)
		cn.fail(err)
		return err
	}
	return nil
}

func putFrame(bp *[]byte, frame []byte) {
	if cap(frame) > maxRetainedBuffer {
		return
	}
	*bp = frame[:0]
	framePool.Put(bp)
}

// ctxError turns a context error into the client's error: a passed deadline wraps ErrTimeout
// (and context.DeadlineExceeded), a cancellation stays a plain cancellation.
func (c *Client) ctxError(err error, addr string, req *Command, when string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s to %s %s: %w", ErrTimeout, RequestCodeName(req.Code), addr, when, err)
	}
	return fmt.Errorf("remoting: %s to %s cancelled %s: %w", RequestCodeName(req.Code), addr, when, err)
}

// conn returns the live connection to addr, dialling one if needed, and waits for it to be
// usable until ctx ends.
func (c *Client) conn(ctx context.Context, addr string, req *Command) (*conn, error) {
	c.mu.RLock()
	cn := c.conns[addr]
	closed := c.closed
	c.mu.RUnlock()
	if closed {
		return nil, errClientClosed
	}
	if cn == nil {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errClientClosed
		}
		if cn = c.conns[addr]; cn == nil {
			cn = &conn{client: c, addr: addr, ready: make(chan struct{}), pending: make(map[int32]*call)}
			c.conns[addr] = cn
			c.wg.Add(1)
			go cn.run()
		}
		c.mu.Unlock()
	}
	if cn.up.Load() {
		return cn, nil
	}
	select {
	case <-cn.ready:
	case <-ctx.Done():
		return nil, c.ctxError(ctx.Err(), addr, req, "waiting for the connection")
	}
	if cn.err != nil {
		return nil, cn.err
	}
	return cn, nil
}

// run dials, starts the connection's writer, then reads responses until the connection fails.
// The reader and the writer are the only goroutines a connection owns.
func (cn *conn) run() {
	c := cn.client
	defer c.wg.Done()
	d := net.Dialer{Timeout: c.opts.DialTimeout, KeepAlive: c.opts.KeepAlive}
	nc, err := d.DialContext(c.ctx, "tcp", cn.addr)
	if err != nil {
		if c.ctx.Err() != nil {
			cn.err = errClientClosed
		} else {
			cn.err = fmt.Errorf("%w: %s: %w", ErrConnect, cn.addr, err)
		}
		c.forget(cn)
		cn.mu.Lock()
		cn.closed = true
		cn.mu.Unlock()
		close(cn.ready)
		return
	}
	cn.mu.Lock()
	if cn.closed { // the client closed while we were dialling
		cn.mu.Unlock()
		_ = nc.Close()
		cn.err = errClientClosed
		close(cn.ready)
		return
	}
	cn.nc = nc
	cn.fw = NewQueuedFrameWriter(nc, c.opts.WriteTimeout)
	cn.stop = make(chan struct{})
	c.wg.Add(1)
	go cn.writeLoop()
	cn.mu.Unlock()
	cn.active.Store(time.Now().UnixNano())
	cn.up.Store(true)
	close(cn.ready)
	cn.readLoop()
}

// writeLoop does all the connection's writing, so requests never wait on the socket.
func (cn *conn) writeLoop() {
	defer cn.client.wg.Done()
	if err := cn.fw.Run(cn.stop); err != nil {
		cn.fail(fmt.Errorf("%w: writing to %s: %w", ErrClosed, cn.addr, err))
	}
}

func (cn *conn) readLoop() {
	fr := NewFrameReader(cn.nc, cn.client.opts.ReadBufferSize, cn.client.opts.MaxFrameSize)
	for {
		cmd, err := fr.ReadCommand()
		if fre, ok := errors.AsType[*FieldRangeError](err); ok {
			// One command the client cannot represent: the stream is in step, so only the
			// request waiting for it fails (or the server's request is refused).
			if cn.unrepresentable(fre) {
				return
			}
			continue
		}
		if err != nil {
			switch {
			case errors.Is(err, ErrFrame):
				err = fmt.Errorf("%w from %s (connection closed): %w", ErrFrame, cn.addr, err)
			case errors.Is(err, io.EOF):
				err = fmt.Errorf("%w: %s closed the connection", errPeerClosed, cn.addr)
			default:
				err = fmt.Errorf("%w: reading from %s: %w", ErrClosed, cn.addr, err)
			}
			cn.fail(err)
			return
		}
		cn.active.Store(time.Now().UnixNano())
		if !cmd.IsResponse() {
			cn.serve(cmd)
			continue
		}
		if cn.deliver(cmd.Opaque, cmd, nil) {
			return
		}
	}
}

// deliver hands a response, or an error in its place, to the request waiting for opaque, if it
// still waits. It reports whether that closed the connection: the last answer a retired
// connection waited for.
func (cn *conn) deliver(opaque int32, resp *Command, err error) bool {
	cn.mu.Lock()
	cl := cn.pending[opaque]
	if cl != nil {
		delete(cn.pending, opaque)
	}
	drained := cn.drainedLocked()
	cn.mu.Unlock()
	if cl != nil { // else the caller gave up; the answer is dropped
		cl.resp, cl.err = resp, err
		cl.done <- struct{}{}
	}
	if drained {
		cn.fail(errRetired)
	}
	return drained
}

// unrepresentable answers a command whose code or version does not fit 16 bits: a response fails
// its request with an error wrapping ErrFrame, a request from the server is refused as not
// supported. It reports whether the connection closed.
func (cn *conn) unrepresentable(fre *FieldRangeError) bool {
	if fre.Flag&FlagResponse != 0 {
		return cn.deliver(fre.Opaque, nil, fmt.Errorf("%w from %s", fre, cn.addr))
	}
	if fre.Flag&FlagOneway != 0 {
		return false
	}
	resp := &Command{Code: RequestCodeNotSupported, Language: DefaultLanguage, Version: DefaultVersion,
		Opaque: fre.Opaque, Flag: FlagResponse, Remark: notSupportedRemark(int(fre.Value))}
	if fre.Field != "code" {
		resp.Remark = fre.Error()
	}
	if err := cn.fw.WriteCommand(resp, true); err != nil {
		cn.fail(fmt.Errorf("%w: writing to %s: %w", ErrClosed, cn.addr, err))
		return true
	}
	return false
}

// serve answers a request the server sent to this client.
func (cn *conn) serve(req *Command) {
	var resp *Command
	if h := cn.client.opts.OnRequest; h != nil {
		resp = h(cn.addr, req)
	} else if !req.IsOneway() {
		resp = NewNotSupportedResponse(req)
	}
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	if err := cn.fw.WriteCommand(resp, true); err != nil {
		cn.fail(fmt.Errorf("%w: writing to %s: %w", ErrClosed, cn.addr, err))
	}
}

// fail closes the connection, removes it from the client and fails every request in flight on
// it with err. Only the first call has an effect.
func (cn *conn) fail(err error) {
	// Leave the table first so new requests dial afresh rather than find a dying connection.
	cn.client.forget(cn)
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return
	}
	cn.closed = true
	pending := cn.pending
	cn.pending = nil
	nc := cn.nc
	if cn.stop != nil {
		close(cn.stop)
	}
	if cn.grace != nil {
		cn.grace.Stop()
	}
	cn.mu.Unlock()
	if nc != nil {
		_ = nc.Close()
	}
	for _, cl := range pending {
		cl.err = err
		cl.done <- struct{}{}
	}
}

// forget drops cn from the connection table if it is still the current one for its address, and
// from the retired connections.
func (c *Client) forget(cn *conn) {
	c.mu.Lock()
	if c.conns[cn.addr] == cn {
		delete(c.conns, cn.addr)
	}
	delete(c.retired, cn)
	c.mu.Unlock()
}

// CloseConn closes the connection to addr, if any, failing its requests in flight with
// ErrClosed. The next request to addr connects again.
func (c *Client) CloseConn(addr string) {
	c.mu.RLock()
	cn := c.conns[addr]
	c.mu.RUnlock()
	if cn != nil {
		cn.fail(fmt.Errorf("%w: connection to %s closed by the client", ErrClosed, addr))
	}
}

// Connected reports whether the client holds an established connection to addr.
func (c *Client) Connected(addr string) bool {
	c.mu.RLock()
	cn := c.conns[addr]
	c.mu.RUnlock()
	return cn != nil && cn.up.Load()
}

// Close closes every connection, fails every request in flight with ErrClosed, and waits for
// the client's goroutines to exit. Later requests fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conns := make([]*conn, 0, len(c.conns)+len(c.retired))
	for _, cn := range c.conns {
		conns = append(conns, cn)
	}
	for cn := range c.retired {
		conns = append(conns, cn)
	}
	c.mu.Unlock()
	c.cancel()
	for _, cn := range conns {
		cn.fail(errClientClosed)
	}
	c.wg.Wait()
	return nil
}
