package brokersim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

func TestDrawDelayStaysInItsRange(t *testing.T) {
	tests := []struct {
		name     string
		f        Fault
		min, max time.Duration
		varies   bool
	}{
		{"no delay", Fault{}, 0, 0, false},
		{"fixed delay", Fault{Delay: 800 * time.Millisecond}, 800 * time.Millisecond, 800 * time.Millisecond, false},
		{"range", Fault{Delay: 10 * time.Millisecond, DelayMax: 20 * time.Millisecond}, 10 * time.Millisecond, 20 * time.Millisecond, true},
		{"max below delay means fixed", Fault{Delay: 10 * time.Millisecond, DelayMax: time.Millisecond}, 10 * time.Millisecond, 10 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for i := 0; i < 1000; i++ {
				d := tt.f.drawDelay()
				if d < tt.min || d > tt.max {
					t.Fatalf("draw %v outside [%v, %v]", d, tt.min, tt.max)
				}
				seen[d] = true
			}
			if tt.varies != (len(seen) > 1) {
				t.Fatalf("%d distinct draws", len(seen))
			}
		})
	}
}

func TestDelayFaultHoldsAnswersBack(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	b.SetFault(Fault{Delay: 300 * time.Millisecond})
	req, key := sendReq("T", 0, "x", true)
	_, err := c.Invoke(timeout(t, 50*time.Millisecond), b.Addr(), req)
	if !errors.Is(err, remoting.ErrTimeout) {
		t.Fatalf("err = %v, want a timeout against a 300ms delay", err)
	}
	// The slow broker still stores the message when it gets round to answering, as a real one
	// does: this is how timeouts turn into duplicates.
	waitFor(t, "late store", func() bool { return b.StoredByUniqKey()[key] == 1 })

	start := time.Now()
	if resp := invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c")); resp.Code != remoting.Success {
		t.Fatalf("%v", resp)
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the 300ms delay", elapsed)
	}
	b.SetFault(Fault{})
	if resp := invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c")); resp.Code != remoting.Success {
		t.Fatalf("%v", resp)
	}
}

func TestDelayedAnswersDoNotBlockOthersOnTheConnection(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	b.SetFault(Fault{Delay: time.Hour})
	slow := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), b.Addr(), remoting.NewHeartbeatRequest("c"))
		slow <- err
	}()
	waitFor(t, "slow request read", func() bool { return b.Stats().Heartbeats == 0 && b.Stats().Requests == 1 })
	b.SetFault(Fault{})
	if resp := invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c")); resp.Code != remoting.Success {
		t.Fatalf("%v", resp)
	}
	select {
	case err := <-slow:
		t.Fatalf("the delayed request finished early: %v", err)
	default:
	}
	_ = b.Close() // cancels the hour-long timer
	if err := <-slow; !errors.Is(err, remoting.ErrClosed) {
		t.Fatalf("delayed request after close: %v", err)
	}
}

func TestBlackHoleReadsButNeverAnswers(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c"))
	b.SetFault(Fault{BlackHole: true})
	if !b.Down() {
		t.Fatal("Down() is false in a black hole")
	}
	req, key := sendReq("T", 0, "x", true)
	// Cancelled rather than timed out: a client retires a connection a request timed out on.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Invoke(ctx, b.Addr(), req)
		done <- err
	}()
	waitFor(t, "the request dropped", func() bool { return b.Stats().Dropped == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it cancelled unanswered", err)
	}
	s := b.Stats()
	if s.Dropped != 1 || s.MessagesReceived != 1 || s.MessagesStored != 0 || b.StoredByUniqKey()[key] != 0 {
		t.Fatalf("stats %+v", s)
	}
	if !c.Connected(b.Addr()) || s.Connections != 1 {
		t.Fatal("a black hole keeps connections open")
	}
	b.SetFault(Fault{})
	if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.Success {
		t.Fatalf("after healing: %v", resp)
	}
	if n := b.Stats().Connections; n != 1 {
		t.Fatalf("%d connections, want the same one", n)
	}
}

func TestStrandKeepsAConnectionSilentAfterTheHeal(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c"))
	b.SetFault(Fault{BlackHole: true, Strand: true})
	if _, err := c.Invoke(timeout(t, 100*time.Millisecond), b.Addr(), remoting.NewHeartbeatRequest("c")); !errors.Is(err, remoting.ErrTimeout) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	b.SetFault(Fault{})
	// The connection that timed out is retired; one raw connection stranded now stays silent.
	stranded, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer stranded.Close()
	b.SetFault(Fault{BlackHole: true, Strand: true})
	frame, err := remoting.Encode(remoting.NewHeartbeatRequest("c"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranded.Write(frame); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the raw connection's request dropped", func() bool { return b.Stats().Dropped == 2 })
	b.SetFault(Fault{})
	if _, err := stranded.Write(frame); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the healed broker dropping on the stranded connection", func() bool { return b.Stats().Dropped == 3 })
	if resp := invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c")); resp.Code != remoting.Success {
		t.Fatalf("a new connection after the heal: %v", resp)
	}
	_ = stranded.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := stranded.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stranded connection read %d bytes, %v; want silence", n, err)
	}
}

func TestRefuseClosesTheListenerAndConnections(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	addr := b.Addr()
	c := newClient(t)
	invoke(t, c, addr, remoting.NewHeartbeatRequest("c"))
	b.SetFault(Fault{Refuse: true})
	if b.Listening() {
		t.Fatal("still listening")
	}
	waitFor(t, "client sees the connection drop", func() bool { return !c.Connected(addr) })
	if _, err := c.Invoke(timeout(t, 2*time.Second), addr, remoting.NewHeartbeatRequest("c")); !errors.Is(err, remoting.ErrConnect) {
		t.Fatalf("err = %v, want ErrConnect", err)
	}
	b.SetFault(Fault{})
	if !b.Listening() || b.Addr() != addr || b.Err() != nil {
		t.Fatalf("healed broker listening=%v addr=%s err=%v", b.Listening(), b.Addr(), b.Err())
	}
	if resp := invoke(t, c, addr, remoting.NewHeartbeatRequest("c")); resp.Code != remoting.Success {
		t.Fatalf("%v", resp)
	}
}

func TestCloseMidRequestBreaksTheConnection(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	b.SetFault(Fault{CloseMidRequest: true})
	req, key := sendReq("T", 0, "x", true)
	_, err := c.Invoke(timeout(t, 5*time.Second), b.Addr(), req)
	if !errors.Is(err, remoting.ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	if b.StoredByUniqKey()[key] != 0 {
		t.Fatal("stored a message whose connection was cut")
	}
	b.SetFault(Fault{})
	if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.Success {
		t.Fatalf("%v", resp)
	}
	if n := b.Stats().Connections; n != 2 {
		t.Fatalf("%d connections, want a reconnect", n)
	}
}

func TestCodeFaultAnswersEveryRequestWithTheCode(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	b.SetFault(Fault{Code: remoting.SystemBusy})
	req, _ := sendReq("T", 0, "x", true)
	for _, r := range []*remoting.Command{req, remoting.NewHeartbeatRequest("c"), remoting.NewGetMaxOffsetRequest("T", 0)} {
		resp := invoke(t, c, b.Addr(), r)
		if resp.Code != remoting.SystemBusy || !strings.Contains(resp.Remark, "injected fault on broker-a") {
			t.Fatalf("%v answered %v", r, resp)
		}
	}
	if s := b.Stats(); s.MessagesStored != 0 {
		t.Fatalf("stored %d", s.MessagesStored)
	}
	b.SetFault(Fault{Code: remoting.SystemError, Delay: 100 * time.Millisecond})
	start := time.Now()
	if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.SystemError || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("delayed code: %v after %v", resp, time.Since(start))
	}
}

// A broker told to refuse messages answers every send, single or batch, as a Java broker answers
// a put its store refused (MESSAGE_ILLEGAL with the store's remark, the one the conformance suite
// holds against a real broker) and stores nothing, while it serves every other request, probes
// and heartbeats included: only a send can tell it from a healthy broker.
func TestIllegalMessagesFaultRefusesEverySendAndServesTheRest(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 4)
	c := newClient(t)
	b.SetFault(Fault{IllegalMessages: true})
	single, _ := sendReq("T", 0, "x", true)
	v1, _ := sendReq("T", 1, "x", false)
	batch := sendWithProps("T", 2, batchBody(t, 3), nil, func(h *remoting.SendHeader) { h.Batch = true })
	for name, req := range map[string]*remoting.Command{"single": single, "v1": v1, "batch": batch} {
		if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.MessageIllegal || resp.Remark != remarkMessageIllegal {
			t.Errorf("%s send answered %d %q, want MESSAGE_ILLEGAL %q", name, resp.Code, resp.Remark, remarkMessageIllegal)
		}
	}
	if s := b.Stats(); s.MessagesStored != 0 {
		t.Fatalf("stored %d messages", s.MessagesStored)
	}
	for _, req := range []*remoting.Command{remoting.NewHeartbeatRequest("c"), remoting.NewGetMaxOffsetRequest("T", 0)} {
		if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.Success {
			t.Errorf("%v answered %d %q, want it served", req, resp.Code, resp.Remark)
		}
	}
	b.SetFault(Fault{})
	if resp := invoke(t, c, b.Addr(), single); resp.Code != remoting.Success {
		t.Fatalf("healed broker answered %d %q", resp.Code, resp.Remark)
	}
}

// TestFlapAlternatesBetweenUpAndDown watches a flapping broker through its observable phase and
// through requests: during down phases requests are swallowed, during up phases answered.
func TestFlapAlternatesBetweenUpAndDown(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	b.SetFault(Fault{FlapUp: 100 * time.Millisecond, FlapDown: 100 * time.Millisecond})
	var sawDown, sawUpAfterDown bool
	deadline := time.Now().Add(10 * time.Second)
	for !(sawDown && sawUpAfterDown && b.FlapTransitions() >= 2) {
		if time.Now().After(deadline) {
			t.Fatalf("no full flap cycle: down=%v upAfterDown=%v transitions=%d", sawDown, sawUpAfterDown, b.FlapTransitions())
		}
		_, err := c.Invoke(timeout(t, 40*time.Millisecond), b.Addr(), remoting.NewHeartbeatRequest("c"))
		switch {
		case errors.Is(err, remoting.ErrTimeout):
			sawDown = sawDown || b.Stats().Dropped > 0
		case err == nil && sawDown:
			sawUpAfterDown = true
		case err != nil:
			t.Fatal(err)
		}
	}
	b.SetFault(Fault{})
	if b.Down() {
		t.Fatal("healed broker still down")
	}
	n := b.FlapTransitions()
	invoke(t, c, b.Addr(), remoting.NewHeartbeatRequest("c"))
	if b.FlapTransitions() != n {
		t.Fatal("flapping continued after healing")
	}
}

func TestFlapWithRefuseTogglesTheListener(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.SetFault(Fault{FlapUp: 30 * time.Millisecond, FlapDown: 30 * time.Millisecond, Refuse: true})
	waitFor(t, "listener closed while down", func() bool { return !b.Listening() })
	waitFor(t, "listener back while up", func() bool { return b.Listening() })
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
}

func TestFaultString(t *testing.T) {
	tests := []struct {
		f    Fault
		want string
	}{
		{Fault{}, "none"},
		{Fault{Delay: 800 * time.Millisecond}, "delay:800ms"},
		{Fault{Delay: time.Millisecond, DelayMax: time.Second}, "delay:1ms-1s"},
		{Fault{BlackHole: true}, "blackhole"},
		{Fault{BlackHole: true, Strand: true}, "blackhole,strand"},
		{Fault{Refuse: true, Code: 14}, "refuse,code:14"},
		{Fault{FlapUp: time.Second, FlapDown: 2 * time.Second}, "flap:1s/2s"},
		{Fault{FlapUp: time.Second, FlapDown: 2 * time.Second, Refuse: true, CloseMidRequest: true}, "flap:1s/2s:refuse,close"},
		{Fault{IllegalMessages: true, Delay: time.Second}, "delay:1s,illegal"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestCloseStopsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	b, err := StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := StartNameServer("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	c := remoting.NewClient(remoting.ClientOptions{})
	for _, addr := range []string{b.Addr(), ns.Addr()} {
		if _, err := c.Invoke(timeout(t, 5*time.Second), addr, remoting.NewHeartbeatRequest("c")); err != nil {
			t.Fatal(err)
		}
	}
	b.SetFault(Fault{FlapUp: time.Hour, FlapDown: time.Hour, Delay: time.Hour})
	go func() { _, _ = c.Invoke(context.Background(), b.Addr(), remoting.NewHeartbeatRequest("c")) }()
	waitFor(t, "delayed request read", func() bool { return b.Stats().Requests == 2 })
	_ = c.Close()
	_ = b.Close()
	_ = ns.Close()
	waitFor(t, "goroutines gone", func() bool { return runtime.NumGoroutine() <= before })
}

// A client that pipelines requests to a delaying broker without reading cannot make it hold
// unbounded memory: beyond its queue's bounds (RocketMQ's send queue capacity, and a byte bound)
// the broker answers SYSTEM_BUSY at once with RocketMQ's overload remark, and every queued request
// is released when it is answered or its connection closes. The delay is an hour, so nothing
// leaves the queue by time while the test fills it: what is refused depends on what the queue
// holds, not on how fast a loaded machine reads 80 MiB (with a delay of seconds, the first
// requests were answered and released before the last arrived, and none was refused).
func TestDelayedRequestsAreBoundedLikeTheBrokersQueue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		requests int
		body     int
		refused  int
	}{
		{"by count", MaxDelayedRequests + 50, 1, 50},
		{"by bytes", 20, 4 << 20, 20 - MaxDelayedBytes/(4<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, "broker-a", Options{})
			b.CreateTopic("T", 4)
			b.SetFault(Fault{Delay: time.Hour})
			nc, err := net.Dial("tcp", b.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			fw := remoting.NewFrameWriter(nc, 30*time.Second)
			body := make([]byte, tc.body)
			for i := range tc.requests {
				req := remoting.NewSendRequest(&remoting.SendHeader{ProducerGroup: "g", Topic: "T", Properties: ""}, body, true)
				req.Opaque = int32(i)
				if err := fw.WriteCommand(req, tc.body > 1 || i == tc.requests-1); err != nil {
					t.Fatal(err)
				}
			}

			// A connection's requests are handled in order, each queued or refused: the queue
			// takes the first ones up to its bound and refuses the rest.
			queued := int64(tc.requests - tc.refused)
			waitFor(t, "every request read", func() bool { return b.Stats().Requests == int64(tc.requests) })
			waitFor(t, fmt.Sprintf("%d requests queued", queued), func() bool { return b.delayedCount.Load() == queued })
			if got, want := b.delayedBytes.Load(), queued*int64(tc.body); got != want {
				t.Errorf("queue holds %d bytes, want %d", got, want)
			}
			_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			fr := remoting.NewFrameReader(nc, 0, 0)
			for range tc.refused {
				resp, err := fr.ReadCommand()
				if err != nil {
					t.Fatalf("reading the refusals: %v", err)
				}
				if resp.Code != remoting.SystemBusy || resp.Remark != remarkOverload || int64(resp.Opaque) < queued {
					t.Fatalf("answer to request %d: %d %q, want SYSTEM_BUSY %q for requests beyond the first %d",
						resp.Opaque, resp.Code, resp.Remark, remarkOverload, queued)
				}
			}

			_ = nc.Close()
			waitFor(t, "the queue released by the closed connection", func() bool {
				return b.delayedCount.Load() == 0 && b.delayedBytes.Load() == 0
			})

			// An answered request leaves the queue too.
			b.SetFault(Fault{Delay: time.Millisecond})
			req, _ := sendReq("T", 0, "x", true)
			if resp := invoke(t, newClient(t), b.Addr(), req); resp.Code != remoting.Success {
				t.Fatalf("delayed send answered %d %q", resp.Code, resp.Remark)
			}
			waitFor(t, "the queue released by the answer", func() bool {
				return b.delayedCount.Load() == 0 && b.delayedBytes.Load() == 0
			})
		})
	}
}

// TestRuntimeInfoReportsTheSendPathsFigures proves GET_BROKER_RUNTIME_INFO answers an idle
// broker's figures (an empty send queue of RocketMQ's default capacity) and, with the Pressure
// fault, the figures it sets, in a table detour's parser reads.
func TestRuntimeInfoReportsTheSendPathsFigures(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	ask := func() remoting.BrokerPressure {
		t.Helper()
		resp, err := c.Invoke(timeout(t, 5*time.Second), b.Addr(), remoting.NewGetBrokerRuntimeInfoRequest())
		if err != nil {
			t.Fatal(err)
		}
		table, err := remoting.ParseBrokerRuntimeInfo(resp)
		if err != nil {
			t.Fatal(err)
		}
		return remoting.PressureOf(table)
	}
	if got, want := ask(), (remoting.BrokerPressure{SendQueueCapacity: 10000}); got != want {
		t.Fatalf("idle figures %+v, want %+v", got, want)
	}
	pressed := remoting.BrokerPressure{SendQueueSize: 9000, SendQueueCapacity: 10000, SendQueueHeadWaitMillis: 180,
		PageCacheLockMillis: 700, PutLatency99Millis: 12.5}
	b.SetFault(Fault{Pressure: &pressed})
	if got := ask(); got != pressed {
		t.Fatalf("figures %+v, want %+v", got, pressed)
	}
}

// TestBusyFaultRefusesSendsAndServesTheRest proves the Busy fault refuses sends with SYSTEM_BUSY
// and a Java broker's "[TIMEOUT_CLEAN_QUEUE]" remark and stores nothing, while probes are served.
func TestBusyFaultRefusesSendsAndServesTheRest(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 1)
	c := newClient(t)
	b.SetFault(Fault{Busy: true})
	req, _ := sendReq("T", 0, "x", true)
	resp, err := c.Invoke(timeout(t, 5*time.Second), b.Addr(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.SystemBusy || !strings.HasPrefix(resp.Remark, "[TIMEOUT_CLEAN_QUEUE]broker busy") {
		t.Fatalf("send answered %d %q, want SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE]", resp.Code, resp.Remark)
	}
	probe, err := c.Invoke(timeout(t, 5*time.Second), b.Addr(), remoting.NewGetMaxOffsetRequest("T", 0))
	if err != nil || probe.Code != remoting.Success {
		t.Fatalf("probe answered %v, %v", probe, err)
	}
	if b.Stats().MessagesStored != 0 {
		t.Fatal("a busy broker stored the message")
	}
}

// TestBrokerConfigReportsTheBusyLimitsSetLimitsChanges proves GET_BROKER_CONFIG answers
// RocketMQ's default busy limits, then the limits SetLimits gives with a data version that moved,
// and leaves out a limit set negative, in an answer detour's parser reads.
func TestBrokerConfigReportsTheBusyLimitsSetLimitsChanges(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	ask := func() remoting.BrokerConfig {
		t.Helper()
		resp, err := c.Invoke(timeout(t, 5*time.Second), b.Addr(), remoting.NewGetBrokerConfigRequest())
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := remoting.ParseBrokerConfig(resp)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	first := ask()
	if got, want := remoting.LimitsOf(first), (remoting.BrokerLimits{SendQueueWaitMillis: 200, PageCacheBusyMillis: 1000}); got != want {
		t.Fatalf("default limits %v, want %v", got, want)
	}
	if first.Entries["brokerName"] != "broker-a" {
		t.Errorf("brokerName %q", first.Entries["brokerName"])
	}
	for _, set := range []remoting.BrokerLimits{{SendQueueWaitMillis: 0, PageCacheBusyMillis: 1000}, {SendQueueWaitMillis: 50, PageCacheBusyMillis: -1}} {
		b.SetLimits(set)
		cfg := ask()
		if got := remoting.LimitsOf(cfg); got != set {
			t.Errorf("after SetLimits(%v): %v", set, got)
		}
		if cfg.Version == first.Version {
			t.Errorf("after SetLimits(%v) the data version %s did not move", set, cfg.Version)
		}
	}
}
