// Package facade serves RocketMQ's name-server protocol in front of a cluster's real name servers,
// so that unmodified RocketMQ producers (Java, Go, C++) benefit from what detour knows about
// brokers. Requests are forwarded; answers come back as the name server gave them, except topic
// routes of topics detour governs: there, queues of brokers detour would not send to (isolated by
// the topic's fault policy, or whose pods are not ready or are going away) lose the write bit.
// RocketMQ clients build their publish info from writable queues only, so they stop sending there
// at their next route poll; the read bit stays, so consumers keep reading every queue.
//
// The facade is not an admin path: it forwards only the reads RocketMQ clients send to a name
// server and refuses everything else, requests that change a name server (broker registration,
// write-permission changes, KV config, topic deletion, ...) among them. It trusts no peer: oneway
// requests are dropped, connections are bounded in total, per source address and in how long
// they may stay silent or take to deliver a frame (when all are taken, a source below its fair
// share takes the place of the largest source's idlest connection, so a few sources cannot lock
// out the rest), identical reads in flight share one upstream
// request, and a panic while serving a connection closes that connection only.
//
// The package knows nothing of Kubernetes: a View supplies the name servers and, per topic, the
// brokers to hide.
package facade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/pkg/remoting"
)

// View is what the facade needs to know, asked on every route request.
type View interface {
	// NameServers are the real name servers to forward to, asked in turn.
	NameServers() []string
	// Hide returns, for a topic whose route lists brokers, the brokers to publish without the
	// write bit and why (broker name to reason). known is false for topics detour does not govern;
	// their routes pass through unchanged.
	Hide(topic string, brokers []string) (hidden map[string]string, known bool)
}

// Metrics receives what the facade serves; every method must be safe for concurrent use.
type Metrics interface {
	// RouteServed counts a route answer for topic ("" for topics detour does not govern),
	// rewritten or not.
	RouteServed(topic string, rewritten bool)
	// BrokersHidden reports how many brokers the last answer for topic hid.
	BrokersHidden(topic string, n int)
	// Refused counts a request the facade refused to forward, by request code: a code it does
	// not forward, or a oneway request. Any code may arrive; see CodeName.
	Refused(code int16)
	// Coalesced counts a request answered by an identical one's upstream request.
	Coalesced(code int16)
	// Panicked counts a panic recovered while serving a client connection, which closed it.
	Panicked()
	// Answered observes one request answered (forwarded or refused), by request code, with the
	// time from its arrival to its answer's write.
	Answered(code int16, took time.Duration)
	// ConnectionRefused counts a client connection closed at once because the facade held
	// MaxConns connections and its source was not below its fair share (perSource false), or its
	// source held MaxConnsPerSource. A connection that takes another's place is not counted.
	ConnectionRefused(perSource bool)
}

// Change is a broker hidden from or shown again in a topic's route, compared with the previous
// answer for that topic.
type Change struct {
	Topic, Broker string
	Hidden        bool
	Reason        string
}

// Options configure a Server.
type Options struct {
	// Addr is the host:port to listen on.
	Addr string
	View View
	// Client forwards requests; nil means a client owned by the Server.
	Client *remoting.Client
	// MaxConns bounds client connections. 0 means DefaultMaxConns. When every connection is
	// taken, a new one from a source holding fewer than its fair share (MaxConns over the sources
	// holding connections, the new one's counted) takes the place of the idlest connection of the
	// source holding the most, when that source holds at least two more; otherwise the new one is
	// closed at once.
	MaxConns int
	// MaxConnsPerSource bounds the connections from one IP address, so no one peer can take every
	// connection; more are closed at once. 0 means max(8, MaxConns/16); negative means no bound
	// but MaxConns, for clients that all reach the facade through one address (a NAT gateway).
	MaxConnsPerSource int
	// IdleTimeout closes a connection on which no byte of a next frame arrives for this long.
	// 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// FrameTimeout closes a connection that started a frame (sent its first byte) but did not
	// finish it within this long. 0 means DefaultFrameTimeout.
	FrameTimeout time.Duration
	// MaxFrameSize bounds one request frame; a larger one closes that connection. 0 means
	// DefaultMaxFrameSize.
	MaxFrameSize int
	// MaxInFlight bounds requests in flight per connection. 0 means 64.
	MaxInFlight int
	// Timeout bounds one forwarded request. 0 means 3 s, as RocketMQ clients wait for a name server.
	Timeout time.Duration
	Metrics Metrics
	// OnChange, when set, hears every broker hidden or shown again.
	OnChange func(Change)
	Logger   logr.Logger
}

// Server is a running facade.
type Server struct {
	opts       Options
	ln         net.Listener
	client     *remoting.Client
	ownsClient bool
	next       atomic.Uint32 // name server to ask first
	flights    flights

	mu      sync.Mutex
	last    map[string]map[string]string // topic -> hidden brokers of the last answer
	open    map[net.Conn]*tracked
	sources sources
	closed  bool
	wg      sync.WaitGroup
}

// Defaults of Options.
const (
	// DefaultMaxConns bounds client connections.
	DefaultMaxConns = 1024
	// DefaultMaxFrameSize bounds one request frame: client requests to a name server are small;
	// broker registrations, which are large, are refused anyway.
	DefaultMaxFrameSize = 1 << 20
	// DefaultIdleTimeout is how long a connection may stay silent between frames: a Java name
	// server's own serverChannelMaxIdleTimeSeconds, and the Java client's
	// clientChannelMaxIdleTimeSeconds. A client with any topic polls its routes every 30 s
	// (pollNameServerInterval), so it is never silent that long; one without topics that is cut
	// reconnects at its next request, as it does when a real name server closes an idle channel.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultFrameTimeout bounds how long a started frame may take to arrive. Clients write a
	// request to a name server (well under a kilobyte) in one piece; only a peer holding the
	// connection open on purpose takes seconds.
	DefaultFrameTimeout = 10 * time.Second
)

// Start listens and serves until Close.
func Start(opts Options) (*Server, error) {
	if opts.View == nil {
		return nil, errors.New("facade: a View is required")
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxConnsPerSource == 0 {
		opts.MaxConnsPerSource = max(8, opts.MaxConns/16)
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.FrameTimeout <= 0 {
		opts.FrameTimeout = DefaultFrameTimeout
	}
	if opts.MaxFrameSize <= 0 {
		opts.MaxFrameSize = DefaultMaxFrameSize
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("facade: listening on %s: %w", opts.Addr, err)
	}
	s := &Server{opts: opts, ln: ln, client: opts.Client, last: map[string]map[string]string{},
		open: map[net.Conn]*tracked{}, sources: newSources()}
	if s.client == nil {
		// Answers are parsed to be rewritten: a name server's answer beyond the bound the runtime
		// holds name servers to is refused on its length, before it is read.
		s.client = remoting.NewClient(remoting.ClientOptions{MaxFrameSize: remoting.NameServerMaxFrameSize})
		s.ownsClient = true
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the address the facade listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening, closes every connection and waits for the handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.open {
		_ = c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	if s.ownsClient {
		_ = s.client.Close()
	}
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		t, evicted, why := s.admit(c)
		if why != "" {
			s.opts.Logger.V(1).Info("connection refused", "reason", why, "remote", c.RemoteAddr().String(),
				"max", s.opts.MaxConns, "maxPerSource", s.opts.MaxConnsPerSource)
			if s.opts.Metrics != nil && why != refusedClosing {
				s.opts.Metrics.ConnectionRefused(why == refusedPerSource)
			}
			_ = c.Close()
			continue
		}
		if evicted != nil {
			s.opts.Logger.V(1).Info("idlest connection of the largest source closed for a source under its share",
				"closed", evicted.RemoteAddr().String(), "for", c.RemoteAddr().String(), "max", s.opts.MaxConns)
			_ = evicted.Close()
		}
		s.wg.Add(1)
		go s.serve(c, t)
	}
}

// recovered handles a panic p recovered while serving c: it is logged and counted, and c is
// closed, so one peer's request costs its own connection, never the process.
func (s *Server) recovered(c net.Conn, p any) {
	s.opts.Logger.Error(fmt.Errorf("panic: %v", p), "closing a client connection after a panic",
		"remote", c.RemoteAddr().String(), "stack", string(debug.Stack()))
	if s.opts.Metrics != nil {
		s.opts.Metrics.Panicked()
	}
	_ = c.Close()
}

// dropOneway drops a oneway request unanswered and unforwarded. RocketMQ clients send oneway
// requests only to brokers (sends, consumer offsets, transaction ends, unlocks); what reaches a
// name server oneway comes from brokers (registrations, heartbeats), which the facade refuses
// anyway, so nothing a client needs is lost, and nothing is forwarded that no one would read.
func (s *Server) dropOneway(c net.Conn, req *remoting.Command) {
	s.opts.Logger.V(1).Info("oneway request dropped", "remote", c.RemoteAddr().String(), "code", req.Code)
	if s.opts.Metrics != nil {
		s.opts.Metrics.Refused(req.Code)
	}
}

// serve reads requests from one client connection and answers each from its own goroutine, as
// RocketMQ's remoting multiplexes requests on a connection by opaque.
func (s *Server) serve(c net.Conn, t *tracked) {
	defer s.wg.Done()
	defer func() {
		s.release(c)
		_ = c.Close()
	}()
	defer func() {
		if p := recover(); p != nil {
			s.recovered(c, p)
		}
	}()
	dr := &deadlineReader{c: c, idle: s.opts.IdleTimeout, frame: s.opts.FrameTimeout}
	fr := remoting.NewFrameReader(dr, 0, s.opts.MaxFrameSize)
	fw := remoting.NewFrameWriter(c, 10*time.Second)
	var wmu sync.Mutex
	slots := make(chan struct{}, s.opts.MaxInFlight)
	var reqs sync.WaitGroup
	defer reqs.Wait()
	for {
		if err := dr.next(fr.Buffered()); err != nil {
			return // closed
		}
		req, err := fr.ReadCommand()
		if err != nil {
			s.closing(c, err)
			return
		}
		s.touch(t)
		if req.IsResponse() {
			continue // clients do not answer name servers; nothing to do
		}
		if req.IsOneway() {
			s.dropOneway(c, req)
			continue
		}
		arrived := time.Now()
		slots <- struct{}{}
		reqs.Add(1)
		go func() {
			defer func() { <-slots; reqs.Done() }()
			defer func() {
				if p := recover(); p != nil {
					s.recovered(c, p)
				}
			}()
			resp := s.handle(req)
			resp.Opaque, resp.Flag = req.Opaque, remoting.FlagResponse
			wmu.Lock()
			err := fw.WriteCommand(resp, true)
			wmu.Unlock()
			if err != nil {
				_ = c.Close()
				return
			}
			if s.opts.Metrics != nil {
				s.opts.Metrics.Answered(req.Code, time.Since(arrived))
			}
		}()
	}
}

// closing logs why a client connection ends, unless the client closed it.
func (s *Server) closing(c net.Conn, err error) {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.opts.Logger.V(1).Info("closing a client connection: no frame in time", "remote", c.RemoteAddr().String(),
			"idleTimeout", s.opts.IdleTimeout, "frameTimeout", s.opts.FrameTimeout)
	default:
		// A malformed frame closes this connection only.
		s.opts.Logger.V(1).Info("closing a client connection", "remote", c.RemoteAddr().String(), "error", err.Error())
	}
}

// handle answers one request, always with a response of its own: refused, or forwarded (shared
// with identical requests in flight) and, for a governed topic's route, rewritten.
func (s *Server) handle(req *remoting.Command) *remoting.Command {
	if _, ok := forwarded[req.Code]; !ok {
		if s.opts.Metrics != nil {
			s.opts.Metrics.Refused(req.Code)
		}
		return remoting.NewResponse(req, remoting.NoPermission, refusal(req.Code))
	}
	shared, err := s.forwardCoalesced(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "detour's name-server facade: "+err.Error())
	}
	// A copy, so this client's opaque, serialisation and route rewrite touch no other's answer.
	resp := *shared
	resp.SerializeType = req.SerializeType
	if req.Code != remoting.GetRouteInfoByTopic || resp.Code != remoting.Success {
		return &resp
	}
	topic := req.ExtFields["topic"]
	body, hidden, known, err := s.rewrite(topic, resp.Body)
	if err != nil {
		s.opts.Logger.Error(err, "route passed through unchanged", "topic", topic)
		return &resp
	}
	if known {
		s.noteHidden(topic, hidden)
	}
	if s.opts.Metrics != nil {
		// Any client may ask for any topic: only governed topics get a label value of their own,
		// so series stay bounded.
		label := ""
		if known {
			label = topic
		}
		s.opts.Metrics.RouteServed(label, len(hidden) > 0)
	}
	resp.Body = body
	return &resp
}

// forwardCoalesced forwards req, or waits for an identical request already in flight and shares
// its answer, which the caller must not change.
func (s *Server) forwardCoalesced(req *remoting.Command) (*remoting.Command, error) {
	key, ok := flightKey(req)
	if !ok {
		return s.forward(req)
	}
	return s.flights.do(key, func() (*remoting.Command, error) { return s.forward(req) }, func() {
		if s.opts.Metrics != nil {
			s.opts.Metrics.Coalesced(req.Code)
		}
	})
}

// forward sends req to the name servers in turn, starting with the one that answered last.
func (s *Server) forward(req *remoting.Command) (*remoting.Command, error) {
	ns := s.opts.View.NameServers()
	if len(ns) == 0 {
		return nil, errors.New("no name servers known")
	}
	start := int(s.next.Load())
	var errs []error
	for i := range ns {
		k := (start + i) % len(ns)
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		resp, err := s.client.Invoke(ctx, ns[k], req)
		cancel()
		if err == nil && resp == nil {
			err = errors.New("no answer") // every caller may read the answer's fields
		}
		if err == nil {
			s.next.Store(uint32(k))
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns[k], err))
	}
	return nil, errors.Join(errs...)
}

// rewrite clears the write bit of hidden brokers' queues in a route body. The body comes back
// byte for byte when nothing is hidden or the topic is not governed.
func (s *Server) rewrite(topic string, body []byte) (out []byte, hidden map[string]string, known bool, err error) {
	std := body
	if !json.Valid(body) {
		// Name servers answer clients before 4.9.4 in fastjson's form, with bare integer keys.
		if std, err = remoting.QuoteIntegerKeys(body); err != nil {
			return body, nil, false, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(std))
	dec.UseNumber()
	var route map[string]any
	if err := dec.Decode(&route); err != nil {
		return body, nil, false, fmt.Errorf("route of %s: %w", topic, err)
	}
	qds, _ := route["queueDatas"].([]any)
	var brokers []string
	for _, q := range qds {
		if qd, ok := q.(map[string]any); ok {
			if name, ok := qd["brokerName"].(string); ok && !slices.Contains(brokers, name) {
				brokers = append(brokers, name)
			}
		}
	}
	hidden, known = s.opts.View.Hide(topic, brokers)
	if !known || len(hidden) == 0 {
		return body, nil, known, nil
	}
	changed := false
	for _, q := range qds {
		qd, ok := q.(map[string]any)
		if !ok {
			continue
		}
		name, _ := qd["brokerName"].(string)
		if _, hide := hidden[name]; !hide {
			continue
		}
		n, ok := qd["perm"].(json.Number)
		if !ok {
			continue
		}
		perm, err := strconv.Atoi(n.String())
		if err != nil {
			continue
		}
		if int32(perm)&remoting.PermWrite != 0 {
			qd["perm"] = json.Number(strconv.Itoa(int(int32(perm) &^ remoting.PermWrite)))
			changed = true
		}
	}
	if !changed {
		return body, hidden, known, nil
	}
	out, err = json.Marshal(route)
	if err != nil {
		return body, nil, known, err
	}
	return out, hidden, known, nil
}

// noteHidden reports brokers hidden or shown again since the last answer for topic.
func (s *Server) noteHidden(topic string, hidden map[string]string) {
	s.mu.Lock()
	prev := s.last[topic]
	s.last[topic] = hidden
	s.mu.Unlock()
	if s.opts.Metrics != nil {
		s.opts.Metrics.BrokersHidden(topic, len(hidden))
	}
	if s.opts.OnChange == nil {
		return
	}
	for b, why := range hidden {
		if _, was := prev[b]; !was {
			s.opts.OnChange(Change{Topic: topic, Broker: b, Hidden: true, Reason: why})
		}
	}
	for b := range prev {
		if _, is := hidden[b]; !is {
			s.opts.OnChange(Change{Topic: topic, Broker: b, Hidden: false})
		}
	}
}
