// Package facade serves RocketMQ's name-server protocol in front of a cluster's real name servers,
// so that unmodified RocketMQ producers (Java, Go, C++) benefit from what detour knows about
// brokers. Requests are forwarded; answers come back as the name server gave them, except topic
// routes of topics detour governs: there, queues of brokers detour would not send to (isolated by
// the topic's fault policy, or whose pods are not ready or are going away) lose the write bit.
// RocketMQ clients build their publish info from writable queues only, so they stop sending there
// at their next route poll; the read bit stays, so consumers keep reading every queue.
//
// The facade is not an admin path: requests that change a name server (broker registration,
// write-permission changes, KV config, topic deletion, ...) are refused, never forwarded.
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
	// Refused counts a request the facade refused to forward, by request code.
	Refused(code int16)
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
	// MaxConns bounds client connections; more are closed at once. 0 means 1024.
	MaxConns int
	// MaxFrameSize bounds one request frame; a larger one closes that connection. 0 means 1 MiB
	// (client requests to a name server are small; broker registrations, which are large, are
	// refused anyway).
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
	conns      atomic.Int64
	next       atomic.Uint32 // name server to ask first

	mu     sync.Mutex
	last   map[string]map[string]string // topic -> hidden brokers of the last answer
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Refused request codes: everything that changes a name server's state. RocketMQ's RequestCode
// values: PUT_KV_CONFIG 100, DELETE_KV_CONFIG 102, REGISTER_BROKER 103, UNREGISTER_BROKER 104,
// WIPE_WRITE_PERM_OF_BROKER 205, DELETE_TOPIC_IN_NAMESRV 216, REGISTER_TOPIC_IN_NAMESRV 217,
// UPDATE_NAMESRV_CONFIG 318, ADD_WRITE_PERM_OF_BROKER 327, BROKER_HEARTBEAT 904.
var refused = map[int16]string{
	100: "PUT_KV_CONFIG", 102: "DELETE_KV_CONFIG", 103: "REGISTER_BROKER", 104: "UNREGISTER_BROKER",
	205: "WIPE_WRITE_PERM_OF_BROKER", 216: "DELETE_TOPIC_IN_NAMESRV", 217: "REGISTER_TOPIC_IN_NAMESRV",
	318: "UPDATE_NAMESRV_CONFIG", 327: "ADD_WRITE_PERM_OF_BROKER", 904: "BROKER_HEARTBEAT",
}

// Start listens and serves until Close.
func Start(opts Options) (*Server, error) {
	if opts.View == nil {
		return nil, errors.New("facade: a View is required")
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 1024
	}
	if opts.MaxFrameSize <= 0 {
		opts.MaxFrameSize = 1 << 20
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
	s := &Server{opts: opts, ln: ln, client: opts.Client, last: map[string]map[string]string{}, open: map[net.Conn]struct{}{}}
	if s.client == nil {
		s.client = remoting.NewClient(remoting.ClientOptions{})
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
		if s.conns.Add(1) > int64(s.opts.MaxConns) {
			s.conns.Add(-1)
			s.opts.Logger.V(1).Info("connection refused: too many connections", "remote", c.RemoteAddr().String(), "max", s.opts.MaxConns)
			_ = c.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			s.conns.Add(-1)
			return
		}
		s.open[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve reads requests from one client connection and answers each from its own goroutine, as
// RocketMQ's remoting multiplexes requests on a connection by opaque.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
		_ = c.Close()
		s.conns.Add(-1)
	}()
	fr := remoting.NewFrameReader(c, 0, s.opts.MaxFrameSize)
	fw := remoting.NewFrameWriter(c, 10*time.Second)
	var wmu sync.Mutex
	slots := make(chan struct{}, s.opts.MaxInFlight)
	var reqs sync.WaitGroup
	defer reqs.Wait()
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				// A malformed frame closes this connection only.
				s.opts.Logger.V(1).Info("closing a client connection", "remote", c.RemoteAddr().String(), "error", err.Error())
			}
			return
		}
		if req.IsResponse() {
			continue // clients do not answer name servers; nothing to do
		}
		slots <- struct{}{}
		reqs.Add(1)
		go func() {
			defer func() { <-slots; reqs.Done() }()
			resp := s.handle(req)
			if resp == nil || req.IsOneway() {
				return
			}
			resp.Opaque, resp.Flag = req.Opaque, remoting.FlagResponse
			wmu.Lock()
			err := fw.WriteCommand(resp, true)
			wmu.Unlock()
			if err != nil {
				_ = c.Close()
			}
		}()
	}
}

// handle answers one request: refused, or forwarded and, for a governed topic's route, rewritten.
func (s *Server) handle(req *remoting.Command) *remoting.Command {
	if name, ok := refused[req.Code]; ok {
		if s.opts.Metrics != nil {
			s.opts.Metrics.Refused(req.Code)
		}
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf(
			"detour's name-server facade forwards only reads; send %s (%d) to a name server directly", name, req.Code))
	}
	resp, err := s.forward(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, "detour's name-server facade: "+err.Error())
	}
	if req.Code != remoting.GetRouteInfoByTopic || resp.Code != remoting.Success {
		return resp
	}
	topic := req.ExtFields["topic"]
	body, hidden, known, err := s.rewrite(topic, resp.Body)
	if err != nil {
		s.opts.Logger.Error(err, "route passed through unchanged", "topic", topic)
		return resp
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
	return resp
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
		var resp *remoting.Command
		var err error
		if req.IsOneway() {
			err = s.client.InvokeOneway(ctx, ns[k], req)
		} else {
			resp, err = s.client.Invoke(ctx, ns[k], req)
		}
		cancel()
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
