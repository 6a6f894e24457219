package facade

import (
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/remoting"
)

// waitFor is how long a test waits for state it expects; generous, for a machine whose cores
// are busy with other work.
const waitFor = 20 * time.Second

// eventually polls cond until it holds, failing the test after waitFor.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, waitFor, 5*time.Millisecond, what, poll.True(cond))
}

// openConns returns how many client connections the server holds.
func openConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// peer is a raw client connection that writes and reads real frames.
type peer struct {
	net.Conn
	fr *remoting.FrameReader
}

// dial connects to addr, closed at the end of the test.
func dial(t testing.TB, addr string) *peer { return dialWith(t, net.Dialer{Timeout: waitFor}, addr) }

// dialFrom connects to addr from the loopback address ip.
func dialFrom(t testing.TB, ip, addr string) *peer {
	return dialWith(t, net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: waitFor}, addr)
}

func dialWith(t testing.TB, d net.Dialer, addr string) *peer {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{Conn: c, fr: remoting.NewFrameReader(c, 0, 0)}
}

// send writes cmd as one frame.
func (p *peer) send(t testing.TB, cmd *remoting.Command) {
	t.Helper()
	frame, err := remoting.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// answer reads the next frame, waiting at most waitFor.
func (p *peer) answer(t testing.TB) *remoting.Command {
	t.Helper()
	_ = p.SetReadDeadline(time.Now().Add(waitFor))
	resp, err := p.fr.ReadCommand()
	if err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
	return resp
}

// closedByFacade reports whether the facade closed c, waiting for it up to waitFor; anything c
// receives meanwhile counts as not closed.
func closedByFacade(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(waitFor))
	n, err := c.Read(make([]byte, 1))
	return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// request returns a request with the given code, opaque and ext fields.
func request(code int16, opaque int32, ext map[string]string) *remoting.Command {
	req := remoting.NewRequest(code, ext, nil)
	req.Opaque = opaque
	return req
}

// routeRequest returns a GET_ROUTEINFO_BY_TOPIC request for topic.
func routeRequest(topic string, opaque int32) *remoting.Command {
	req := remoting.NewGetRouteInfoRequest(topic)
	req.Opaque = opaque
	return req
}

// countingMetrics records what the facade reports.
type countingMetrics struct {
	mu                  sync.Mutex
	refused, answered   map[int16]int
	connRefused         map[bool]int
	coalesced, panicked int
}

func newCountingMetrics() *countingMetrics {
	return &countingMetrics{refused: map[int16]int{}, answered: map[int16]int{}, connRefused: map[bool]int{}}
}

func (m *countingMetrics) RouteServed(string, bool)  {}
func (m *countingMetrics) BrokersHidden(string, int) {}

func (m *countingMetrics) Refused(code int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused[code]++
}

func (m *countingMetrics) Coalesced(int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.coalesced++
}

func (m *countingMetrics) Answered(code int16, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answered[code]++
}

func (m *countingMetrics) ConnectionRefused(perSource bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connRefused[perSource]++
}

func (m *countingMetrics) Panicked() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.panicked++
}

// get reads a count under the lock.
func (m *countingMetrics) get(read func(*countingMetrics) int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return read(m)
}

// fakeNameServer answers real frames on loopback and counts requests by code. Route requests
// wait until release when it holds them, so a test can have many in flight at once.
type fakeNameServer struct {
	ln      net.Listener
	hold    chan struct{}
	release func()

	mu    sync.Mutex
	seen  map[int16]int
	conns []net.Conn
	wg    sync.WaitGroup
}

// fakeRoute is a route over two brokers, both writable, in standard JSON.
const fakeRoute = `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:1"},"brokerName":"broker-a","cluster":"c"},` +
	`{"brokerAddrs":{"0":"127.0.0.1:2"},"brokerName":"broker-b","cluster":"c"}],"filterServerTable":{},` +
	`"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},` +
	`{"brokerName":"broker-b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`

// startFakeNameServer listens on loopback; holdRoutes makes route requests wait for release.
func startFakeNameServer(t testing.TB, holdRoutes bool) *fakeNameServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNameServer{ln: ln, seen: map[int16]int{}, hold: make(chan struct{})}
	var once sync.Once
	n.release = func() { once.Do(func() { close(n.hold) }) }
	if !holdRoutes {
		n.release()
	}
	n.wg.Add(1)
	go n.accept()
	t.Cleanup(func() {
		n.release()
		_ = ln.Close()
		n.mu.Lock()
		for _, c := range n.conns {
			_ = c.Close()
		}
		n.mu.Unlock()
		n.wg.Wait()
	})
	return n
}

func (n *fakeNameServer) addr() string { return n.ln.Addr().String() }

// count returns how many requests with code arrived.
func (n *fakeNameServer) count(code int16) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[code]
}

func (n *fakeNameServer) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		n.conns = append(n.conns, c)
		n.mu.Unlock()
		n.wg.Add(1)
		go n.serve(c)
	}
}

func (n *fakeNameServer) serve(c net.Conn) {
	defer n.wg.Done()
	fr, fw := remoting.NewFrameReader(c, 0, 0), remoting.NewFrameWriter(c, waitFor)
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			return
		}
		n.mu.Lock()
		n.seen[req.Code]++
		n.mu.Unlock()
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			resp := remoting.NewResponse(req, remoting.Success, "fake")
			if req.Code == remoting.GetRouteInfoByTopic {
				<-n.hold
				resp.Body = []byte(fakeRoute)
			}
			_ = fw.WriteCommand(resp, true)
		}()
	}
}
