// Package nstest runs hostile RocketMQ name servers on loopback for tests: one that answers
// GET_ROUTEINFO_BY_TOPIC and GET_BROKER_CLUSTER_INFO with whatever bodies the test sets, however
// large or absurd, and one that takes connections and never answers. Route and cluster-info bodies
// of any size are built by RouteBody and ClusterInfoBody.
package nstest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// Scripted is a name server that answers with the bodies last set. A nil route body answers
// TOPIC_NOT_EXIST; a nil cluster-info body answers an empty cluster.
type Scripted struct {
	ln      net.Listener
	route   atomic.Pointer[[]byte]
	cluster atomic.Pointer[[]byte]
	// routeErr, when set, answers route queries with its code and remark instead.
	routeErr atomic.Pointer[remoting.ResponseError]
	held     conns
}

// StartScripted starts a scripted name server that answers route queries with route; it stops
// when the test ends.
func StartScripted(t testing.TB, route []byte) *Scripted {
	t.Helper()
	s := &Scripted{ln: listen(t)}
	s.AnswerRoute(route)
	s.held.wg.Add(1)
	go s.held.accept(s.ln, s.serve)
	t.Cleanup(s.Close)
	return s
}

// Addr is the name server's host:port.
func (s *Scripted) Addr() string { return s.ln.Addr().String() }

// AnswerRoute sets the body every later GET_ROUTEINFO_BY_TOPIC gets, whatever the topic.
func (s *Scripted) AnswerRoute(body []byte) {
	s.routeErr.Store(nil)
	s.route.Store(&body)
}

// AnswerRouteError makes every later GET_ROUTEINFO_BY_TOPIC get code and remark, no body.
func (s *Scripted) AnswerRouteError(code int16, remark string) {
	s.routeErr.Store(&remoting.ResponseError{Code: code, Remark: remark})
}

// AnswerClusterInfo sets the body every later GET_BROKER_CLUSTER_INFO gets.
func (s *Scripted) AnswerClusterInfo(body []byte) { s.cluster.Store(&body) }

// Close stops the name server and closes its connections.
func (s *Scripted) Close() { s.held.close(s.ln) }

func (s *Scripted) serve(nc net.Conn) {
	defer nc.Close()
	fr := remoting.NewFrameReader(nc, 0, 0)
	fw := remoting.NewFrameWriter(nc, 30*time.Second)
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			return
		}
		if fw.WriteCommand(s.answer(req), true) != nil {
			return
		}
	}
}

// answer is the scripted response to one request.
func (s *Scripted) answer(req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	switch req.Code {
	case remoting.GetRouteInfoByTopic:
		if e := s.routeErr.Load(); e != nil {
			resp.Code, resp.Remark = e.Code, e.Remark
		} else if b := s.route.Load(); b != nil && *b != nil {
			resp.Body = *b
		} else {
			resp.Code, resp.Remark = remoting.TopicNotExist, "No topic route info in name server for the topic: "+req.ExtFields["topic"]
		}
	case remoting.GetBrokerClusterInfo:
		resp.Body = []byte(`{"brokerAddrTable":{},"clusterAddrTable":{}}`)
		if b := s.cluster.Load(); b != nil && *b != nil {
			resp.Body = *b
		}
	default:
		resp.Code = remoting.RequestCodeNotSupported
	}
	return resp
}

// Silent takes connections and reads nothing and answers nothing until released, as a name
// server whose process is stopped (SIGSTOP) or behind a black hole that still completes
// handshakes.
type Silent struct {
	ln       net.Listener
	accepted atomic.Int32
	held     conns
	once     sync.Once
}

// StartSilent starts a silent name server; it is released when the test ends.
func StartSilent(t testing.TB) *Silent {
	t.Helper()
	s := &Silent{ln: listen(t)}
	s.held.wg.Add(1)
	go s.held.accept(s.ln, func(net.Conn) { s.accepted.Add(1) })
	t.Cleanup(s.Release)
	return s
}

// Addr is the name server's host:port.
func (s *Silent) Addr() string { return s.ln.Addr().String() }

// Accepted counts the connections taken so far.
func (s *Silent) Accepted() int { return int(s.accepted.Load()) }

// Release closes the listener and every held connection: requests in flight fail at once, and
// later ones are refused.
func (s *Silent) Release() { s.once.Do(func() { s.held.close(s.ln) }) }

// conns accepts connections, hands each to a handler on its own goroutine and holds it open
// until the handler returns (a handler that returns at once leaves the connection held) or close.
type conns struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	open []net.Conn
}

func (c *conns) accept(ln net.Listener, handle func(net.Conn)) {
	defer c.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.open = append(c.open, nc)
		c.mu.Unlock()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			handle(nc)
		}()
	}
}

func (c *conns) close(ln net.Listener) {
	_ = ln.Close()
	c.mu.Lock()
	for _, nc := range c.open {
		_ = nc.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// RouteBody is a standard-JSON route of n brokers named broker-0 .. broker-(n-1) with write (and
// as many read) queues each, every master at addr; slaves adds that many slave addresses to each
// broker, to reach a body size.
func RouteBody(n int, write int32, addr string, slaves int) []byte {
	var b strings.Builder
	b.WriteString(`{"queueDatas":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"brokerName":"broker-%d","readQueueNums":%d,"writeQueueNums":%d,"perm":6}`, i, write, write)
	}
	b.WriteString(`],"brokerDatas":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"cluster":"c","brokerName":"broker-%d","brokerAddrs":{"0":%q`, i, addr)
		for s := 1; s <= slaves; s++ {
			fmt.Fprintf(&b, `,"%d":"10.0.%d.%d:10911"`, s, s/256, s%256)
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// ClusterInfoBody is a GET_BROKER_CLUSTER_INFO body of n brokers named broker-0 .. broker-(n-1)
// in cluster "c", every master at addr.
func ClusterInfoBody(n int, addr string) []byte {
	var b strings.Builder
	b.WriteString(`{"brokerAddrTable":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"broker-%d":{"cluster":"c","brokerName":"broker-%d","brokerAddrs":{0:%q}}`, i, i, addr)
	}
	b.WriteString(`},"clusterAddrTable":{"c":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"broker-%d"`, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}
