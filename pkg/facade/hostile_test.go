package facade

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/nstest"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/remoting"
)

// startOn starts a facade in front of the name server at nsAddr, with a view that governs no
// topic until the test sets one.
func startOn(t testing.TB, nsAddr string, opts Options) (*Server, *staticView) {
	t.Helper()
	view := &staticView{ns: []string{nsAddr}, hidden: map[string]map[string]string{}}
	opts.Addr, opts.View = "127.0.0.1:0", view
	srv, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, view
}

// rest half-closes p and reads every frame the facade still sends until it closes p.
func (p *peer) rest(t testing.TB) []*remoting.Command {
	t.Helper()
	if err := p.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	return p.untilClosed()
}

// untilClosed reads every frame the facade sends until it closes p (or waitFor passes).
func (p *peer) untilClosed() []*remoting.Command {
	_ = p.SetReadDeadline(time.Now().Add(waitFor))
	var out []*remoting.Command
	for {
		cmd, err := p.fr.ReadCommand()
		if err != nil {
			return out
		}
		out = append(out, cmd)
	}
}

func TestOnewayRequestsAreDroppedUnansweredAndTheConnectionServesOn(t *testing.T) {
	m := newCountingMetrics()
	f := start(t, Options{Metrics: m})
	p := dial(t, f.srv.Addr())
	codes := []int16{remoting.GetRouteInfoByTopic, remoting.GetBrokerClusterInfo, remoting.GetKVConfig, remoting.RegisterBroker, 9999}
	for i, code := range codes {
		req := request(code, int32(100+i), map[string]string{"topic": "Other"})
		req.Flag = remoting.FlagOneway
		p.send(t, req)
	}
	p.send(t, routeRequest("Other", 7))
	if resp := p.answer(t); resp.Opaque != 7 || resp.Code != remoting.Success {
		t.Fatalf("first answer %v, want the route answer to opaque 7", resp)
	}
	if more := p.rest(t); len(more) > 0 {
		t.Errorf("oneway requests were answered: %v", more)
	}
	if q := f.ns.RouteQueries(); q != 1 {
		t.Errorf("name server saw %d route queries, want 1: oneway requests are not forwarded", q)
	}
	for _, code := range codes {
		if n := m.get(func(m *countingMetrics) int { return m.refused[code] }); n != 1 {
			t.Errorf("oneway code %d counted refused %d times, want 1", code, n)
		}
	}
	// Only the answered request is timed, once its answer is written.
	poll.Until(t, 5*time.Second, 10*time.Millisecond, "the route answer timed", func() error {
		if n := m.get(func(m *countingMetrics) int { return m.answered[remoting.GetRouteInfoByTopic] }); n != 1 {
			return fmt.Errorf("route answers timed %d times, want 1", n)
		}
		return nil
	})
	if n := m.get(func(m *countingMetrics) int { return len(m.answered) }); n != 1 {
		t.Errorf("answers timed for %d codes, want only the route query's", n)
	}
}

func TestAPanicServingARequestClosesThatConnectionOnly(t *testing.T) {
	m := newCountingMetrics()
	f := start(t, Options{Metrics: m})
	f.view.mu.Lock()
	f.view.panicOn = "Governed"
	f.view.mu.Unlock()
	bad, other := dial(t, f.srv.Addr()), dial(t, f.srv.Addr())
	bad.send(t, routeRequest("Governed", 1))
	if !closedByFacade(bad) {
		t.Fatal("the connection whose request panicked stayed open")
	}
	if n := m.get(func(m *countingMetrics) int { return m.panicked }); n != 1 {
		t.Errorf("panics counted %d, want 1", n)
	}
	other.send(t, routeRequest("Other", 2))
	if resp := other.answer(t); resp.Opaque != 2 || resp.Code != remoting.Success {
		t.Errorf("another connection after the panic: %v", resp)
	}
	if resp := f.route(t, f.srv.Addr(), "Other", remoting.DefaultVersion); resp.Code != remoting.Success {
		t.Errorf("a new connection after the panic: %v", resp)
	}
}

func TestSilentAndTricklingConnectionsAreClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		// conns connect; each then asks a route first when answered, and trickles a route
		// request a byte every 200 ms (28 s for the whole frame) when trickle.
		conns             int
		answered, trickle bool
	}{
		{name: "silent from the start", opts: Options{IdleTimeout: 200 * time.Millisecond, FrameTimeout: time.Minute}, conns: 1},
		{name: "silent after an answer", opts: Options{IdleTimeout: 200 * time.Millisecond, FrameTimeout: time.Minute}, conns: 1, answered: true},
		{name: "twenty frames trickled a byte at a time", opts: Options{IdleTimeout: time.Minute, FrameTimeout: 500 * time.Millisecond}, conns: 20, trickle: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, tc.opts)
			var trickling sync.WaitGroup
			defer trickling.Wait()
			peers := make([]*peer, tc.conns)
			for i := range peers {
				p := dial(t, f.srv.Addr())
				peers[i] = p
				if tc.answered {
					p.send(t, routeRequest("Other", 1))
					p.answer(t)
				}
				if tc.trickle {
					trickling.Add(1)
					go func() {
						defer trickling.Done()
						trickle(p, routeRequest("Other", 1), 200*time.Millisecond)
					}()
				}
			}
			for i, p := range peers {
				if !closedByFacade(p) {
					t.Fatalf("connection %d was not closed", i)
				}
			}
			eventually(t, "every connection released", func() bool { return openConns(f.srv) == 0 })
		})
	}
}

// trickle writes cmd's frame to p one byte per interval, until done or a write fails.
func trickle(p *peer, cmd *remoting.Command, interval time.Duration) {
	frame, err := remoting.Encode(cmd)
	if err != nil {
		panic(err)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for _, b := range frame {
		if _, err := p.Write([]byte{b}); err != nil {
			return
		}
		<-tick.C
	}
}

func TestAClientCutForIdlingReconnectsAtItsNextRequest(t *testing.T) {
	f := start(t, Options{IdleTimeout: 200 * time.Millisecond})
	if resp := f.route(t, f.srv.Addr(), "Other", remoting.DefaultVersion); resp.Code != remoting.Success {
		t.Fatalf("first route: %v", resp)
	}
	eventually(t, "the client saw its idle connection closed", func() bool { return !f.client.Connected(f.srv.Addr()) })
	if resp := f.route(t, f.srv.Addr(), "Other", remoting.DefaultVersion); resp.Code != remoting.Success {
		t.Fatalf("route after the idle close: %v", resp)
	}
}

func TestOneSourceAddressCannotTakeEveryConnection(t *testing.T) {
	for _, tc := range []struct {
		name        string
		perSource   int
		fifthServed bool
	}{
		{"a fifth connection from one address is closed", 4, false},
		{"with no share, only the total bounds one address", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, Options{MaxConns: 16, MaxConnsPerSource: tc.perSource})
			for i := range 4 {
				p := dial(t, f.srv.Addr())
				p.send(t, routeRequest("Other", int32(i)))
				p.answer(t)
			}
			fifth := dial(t, f.srv.Addr())
			if tc.fifthServed {
				fifth.send(t, routeRequest("Other", 5))
				if resp := fifth.answer(t); resp.Code != remoting.Success {
					t.Errorf("fifth connection: %v", resp)
				}
			} else if !closedByFacade(fifth) {
				t.Error("a fifth connection from one address stayed open with a share of 4")
			}
			other := dialFrom(t, "127.0.0.2", f.srv.Addr())
			other.send(t, routeRequest("Other", 6))
			if resp := other.answer(t); resp.Code != remoting.Success {
				t.Errorf("a connection from another address: %v", resp)
			}
		})
	}
}

func TestTheShareOfOneSourceDefaultsToASixteenthOfTheConnections(t *testing.T) {
	for _, tc := range []struct{ maxConns, perSource, want int }{
		{0, 0, 64}, {1024, 0, 64}, {4096, 0, 256}, {32, 0, 8}, {4, 0, 8}, {1024, 3, 3}, {1024, -1, -1},
	} {
		srv, _ := startOn(t, "127.0.0.1:1", Options{MaxConns: tc.maxConns, MaxConnsPerSource: tc.perSource})
		if got := srv.opts.MaxConnsPerSource; got != tc.want {
			t.Errorf("MaxConns %d, MaxConnsPerSource %d: share %d, want %d", tc.maxConns, tc.perSource, got, tc.want)
		}
	}
}

func TestOnlyTheReadsClientsSendToANameServerAreForwarded(t *testing.T) {
	ns := startFakeNameServer(t, false)
	m := newCountingMetrics()
	srv, _ := startOn(t, ns.addr(), Options{Metrics: m})
	p := dial(t, srv.Addr())
	type want int
	const (
		forwards want = iota
		refuses
	)
	cases := map[int16]want{}
	// MQClientAPIImpl's name-server reads.
	for _, code := range []int16{101, 105, 106, 206, 219, 224, 304, 311, 312, 313, 319} {
		cases[code] = forwards
	}
	// Writes, broker-to-name-server requests, controller codes, broker codes and nonsense.
	for _, code := range []int16{100, 102, 103, 104, 205, 216, 217, 318, 322, 327, 901, 904, 9999,
		0, 10, 34, 310, -1, -32768, 32767} {
		cases[code] = refuses
	}
	for code := int16(1001); code <= 1011; code++ {
		cases[code] = refuses
	}
	opaque := int32(0)
	for code, w := range cases {
		opaque++
		p.send(t, request(code, opaque, map[string]string{"topic": "T", "brokerName": "broker-a"}))
		resp := p.answer(t)
		if resp.Opaque != opaque {
			t.Fatalf("code %d: answer to opaque %d, want %d", code, resp.Opaque, opaque)
		}
		switch w {
		case forwards:
			if resp.Code != remoting.Success || resp.Remark != "fake" || ns.count(code) != 1 {
				t.Errorf("code %d: answered %d %q, name server saw it %d times; want it forwarded once", code, resp.Code, resp.Remark, ns.count(code))
			}
		case refuses:
			if resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "forwards only reads") || ns.count(code) != 0 {
				t.Errorf("code %d: answered %d %q, name server saw it %d times; want NO_PERMISSION, not forwarded", code, resp.Code, resp.Remark, ns.count(code))
			}
			if name, ok := writes[code]; ok && !strings.Contains(resp.Remark, name) {
				t.Errorf("code %d: remark %q does not name %s", code, resp.Remark, name)
			}
			if n := m.get(func(m *countingMetrics) int { return m.refused[code] }); n != 1 {
				t.Errorf("code %d: counted refused %d times, want 1", code, n)
			}
		}
	}
}

func TestIdenticalRequestsInFlightShareOneUpstreamRequest(t *testing.T) {
	route := func(topic string, version int16, language string, ext map[string]string) *remoting.Command {
		req := routeRequest(topic, 0)
		req.Version, req.Language = version, language
		for k, v := range ext {
			req.ExtFields[k] = v
		}
		return req
	}
	standard := map[string]string{"acceptStandardJsonOnly": "true"}
	for _, tc := range []struct {
		name          string
		first, second *remoting.Command
		upstream      int
	}{
		{"same topic and version, another language", route("T", 479, "JAVA", nil), route("T", 479, "GO", nil), 1},
		{"same topic in the binary header", route("T", 479, "JAVA", nil), func() *remoting.Command {
			r := route("T", 479, "JAVA", nil)
			r.SerializeType = remoting.RocketMQ
			return r
		}(), 1},
		{"another topic", route("T", 479, "JAVA", nil), route("U", 479, "JAVA", nil), 2},
		{"another version", route("T", 479, "JAVA", nil), route("T", 300, "JAVA", nil), 2},
		{"another ext field", route("T", 300, "JAVA", nil), route("T", 300, "JAVA", standard), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := startFakeNameServer(t, true)
			m := newCountingMetrics()
			srv, _ := startOn(t, ns.addr(), Options{Metrics: m})
			a, b := dial(t, srv.Addr()), dial(t, srv.Addr())
			tc.first.Opaque, tc.second.Opaque = 1, 2
			a.send(t, tc.first)
			eventually(t, "the first request upstream", func() bool { return ns.count(remoting.GetRouteInfoByTopic) == 1 })
			b.send(t, tc.second)
			eventually(t, "the second request waiting", func() bool {
				return m.get(func(m *countingMetrics) int { return m.coalesced }) == 1 || ns.count(remoting.GetRouteInfoByTopic) == 2
			})
			ns.release()
			for _, c := range []struct {
				p   *peer
				req *remoting.Command
			}{{a, tc.first}, {b, tc.second}} {
				resp := c.p.answer(t)
				if resp.Opaque != c.req.Opaque || resp.Code != remoting.Success || resp.SerializeType != c.req.SerializeType {
					t.Errorf("answer %v (%v), want success to opaque %d in %v", resp, resp.SerializeType, c.req.Opaque, c.req.SerializeType)
				}
			}
			if got := ns.count(remoting.GetRouteInfoByTopic); got != tc.upstream {
				t.Errorf("name server saw %d route requests, want %d", got, tc.upstream)
			}
		})
	}
}

func TestManyClientsAskingOneRouteAtOnceCostOneUpstreamRequest(t *testing.T) {
	const clients = 32
	ns := startFakeNameServer(t, true)
	m := newCountingMetrics()
	srv, view := startOn(t, ns.addr(), Options{Metrics: m})
	view.set("T", map[string]string{"broker-a": "BrokerError"})
	peers := make([]*peer, clients)
	for i := range peers {
		peers[i] = dial(t, srv.Addr())
		peers[i].send(t, routeRequest("T", int32(1000+i)))
	}
	eventually(t, "every request in flight", func() bool {
		return m.get(func(m *countingMetrics) int { return m.coalesced }) == clients-1 || ns.count(remoting.GetRouteInfoByTopic) == clients
	})
	ns.release()
	for i, p := range peers {
		resp := p.answer(t)
		if resp.Opaque != int32(1000+i) {
			t.Fatalf("client %d got the answer to opaque %d", i, resp.Opaque)
		}
		// Each client gets the rewrite of the current view.
		if got := perms(t, resp); got["broker-a"] != 4 || got["broker-b"] != 6 {
			t.Errorf("client %d: perms %v, want broker-a read only", i, got)
		}
	}
	upstream := ns.count(remoting.GetRouteInfoByTopic)
	t.Logf("amplification: %d upstream route requests for %d concurrent client requests", upstream, clients)
	if upstream != 1 {
		t.Errorf("name server saw %d route requests for %d identical ones in flight, want 1", upstream, clients)
	}
}

// TestANameServerAnswerBeyondTheBoundIsRefusedAndTheFacadeServesOn: a name server whose route is
// larger than the runtime's bound for name-server answers (remoting.MaxNameServerBody) gets its
// client a SYSTEM_ERROR, not a facade holding and rewriting megabytes per request; the next answer
// within the bound is served on the same connection.
func TestANameServerAnswerBeyondTheBoundIsRefusedAndTheFacadeServesOn(t *testing.T) {
	huge := nstest.RouteBody(1, 4, "127.0.0.1:10911", 200_000)
	if len(huge) <= remoting.MaxNameServerBody {
		t.Fatalf("the test route is %d bytes, not beyond the bound", len(huge))
	}
	ns := nstest.StartScripted(t, huge)
	srv, _ := startOn(t, ns.Addr(), Options{})
	p := dial(t, srv.Addr())
	p.send(t, routeRequest("Huge", 1))
	if resp := p.answer(t); resp.Opaque != 1 || resp.Code != remoting.SystemError {
		t.Fatalf("answer %v, want SYSTEM_ERROR to opaque 1", resp)
	}
	ns.AnswerRoute(nstest.RouteBody(1, 4, "127.0.0.1:10911", 0))
	p.send(t, routeRequest("Huge", 2))
	if resp := p.answer(t); resp.Opaque != 2 || resp.Code != remoting.Success {
		t.Fatalf("answer %v, want the route to opaque 2", resp)
	}
}
