package facade

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// staticView hides fixed brokers of governed topics.
type staticView struct {
	ns      []string
	mu      sync.Mutex
	hidden  map[string]map[string]string // topic -> broker -> reason; a topic present is governed
	panicOn string                       // a topic whose route makes Hide panic, as a bug would
}

func (v *staticView) NameServers() []string { return v.ns }

func (v *staticView) Hide(topic string, _ []string) (map[string]string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if topic != "" && topic == v.panicOn {
		panic("view failed for " + topic)
	}
	h, ok := v.hidden[topic]
	return h, ok
}

func (v *staticView) set(topic string, h map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hidden[topic] = h
}

type fixture struct {
	ns     *brokersim.NameServer
	view   *staticView
	srv    *Server
	client *remoting.Client
	mu     sync.Mutex
	change []Change
}

func start(t testing.TB, opts Options) *fixture {
	t.Helper()
	var bs []*brokersim.Broker
	for _, n := range []string{"broker-a", "broker-b"} {
		b, err := brokersim.StartBroker(n, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.CreateTopic("Governed", 4)
		b.CreateTopic("Other", 2)
		bs = append(bs, b)
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", bs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	f := &fixture{ns: ns, view: &staticView{ns: []string{ns.Addr()}, hidden: map[string]map[string]string{}}}
	opts.Addr, opts.View = "127.0.0.1:0", f.view
	opts.OnChange = func(c Change) { f.mu.Lock(); f.change = append(f.change, c); f.mu.Unlock() }
	if f.srv, err = Start(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.Close() })
	f.client = remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { f.client.Close() })
	return f
}

func (f *fixture) route(t testing.TB, addr, topic string, version int16) *remoting.Command {
	t.Helper()
	req := remoting.NewGetRouteInfoRequest(topic)
	req.Version = version
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := f.client.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func perms(t testing.TB, resp *remoting.Command) map[string]int32 {
	t.Helper()
	rt, err := remoting.ParseRouteResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, q := range rt.QueueDatas {
		out[q.BrokerName] = q.Perm
	}
	return out
}

func TestRoutesOfUngovernedTopicsAndOtherAnswersPassThroughByteForByte(t *testing.T) {
	f := start(t, Options{})
	f.view.set("Governed", map[string]string{"broker-a": "BrokerError"})
	for _, version := range []int16{remoting.DefaultVersion, 300} { // standard JSON and fastjson's legacy form
		direct := f.route(t, f.ns.Addr(), "Other", version)
		through := f.route(t, f.srv.Addr(), "Other", version)
		if !bytes.Equal(direct.Body, through.Body) || through.Code != remoting.Success {
			t.Errorf("version %d: route through the facade differs:\n%s\n%s", version, direct.Body, through.Body)
		}
	}
	missing := f.route(t, f.srv.Addr(), "NoSuchTopic", remoting.DefaultVersion)
	if missing.Code != remoting.TopicNotExist {
		t.Errorf("unknown topic answered %d %q, want the name server's TOPIC_NOT_EXIST", missing.Code, missing.Remark)
	}
}

func TestGovernedRoutesLoseTheWriteBitOfHiddenBrokersOnly(t *testing.T) {
	f := start(t, Options{})
	f.view.set("Governed", map[string]string{"broker-a": "BrokerError"})
	for _, version := range []int16{remoting.DefaultVersion, 300} {
		got := perms(t, f.route(t, f.srv.Addr(), "Governed", version))
		if got["broker-a"] != 4 || got["broker-b"] != 6 {
			t.Errorf("version %d: perms %v, want broker-a read only (4), broker-b untouched (6)", version, got)
		}
	}
	f.view.set("Governed", nil)
	if got := perms(t, f.route(t, f.srv.Addr(), "Governed", remoting.DefaultVersion)); got["broker-a"] != 6 {
		t.Errorf("perms after the broker recovered: %v", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.change) != 2 || !f.change[0].Hidden || f.change[1].Hidden || f.change[1].Broker != "broker-a" {
		t.Errorf("changes %+v, want broker-a hidden then shown", f.change)
	}
}

func TestAMalformedFrameClosesItsConnectionOnly(t *testing.T) {
	f := start(t, Options{})
	bad, err := net.Dial("tcp", f.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Write([]byte{0, 0, 0, 2, 0xff, 0xff}); err != nil { // length shorter than a header
		t.Fatal(err)
	}
	_ = bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := bad.Read(make([]byte, 16)); err == nil {
		t.Fatalf("read %d bytes from a connection that sent garbage; want it closed", n)
	}
	if resp := f.route(t, f.srv.Addr(), "Other", remoting.DefaultVersion); resp.Code != remoting.Success {
		t.Fatalf("another connection after the garbage: %d %s", resp.Code, resp.Remark)
	}
}

func TestConnectionsBeyondTheLimitAreClosed(t *testing.T) {
	f := start(t, Options{MaxConns: 2})
	for range 2 {
		dial(t, f.srv.Addr())
	}
	// The two held connections are accepted in order; wait until both count.
	eventually(t, "both connections accepted", func() bool { return openConns(f.srv) == 2 })
	if extra := dial(t, f.srv.Addr()); !closedByFacade(extra) {
		t.Fatal("a third connection was kept open with MaxConns 2")
	}
}
