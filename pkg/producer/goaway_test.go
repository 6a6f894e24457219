package producer

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// goAwayFront stands where a broker's address points while the server there shuts down behind a
// load balancer: its first connection answers every request GO_AWAY, as a shutting-down RocketMQ
// 5.x server does; later connections are piped to the broker behind it.
type goAwayFront struct {
	ln      net.Listener
	goAways atomic.Int32
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func startGoAwayFront(t *testing.T, backend string) *goAwayFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &goAwayFront{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for n := 1; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.track(nc)
			f.wg.Add(1)
			if n == 1 {
				go f.goAway(nc)
			} else {
				go f.pipe(nc, backend)
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *goAwayFront) addr() string { return f.ln.Addr().String() }

func (f *goAwayFront) track(c net.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
}

func (f *goAwayFront) goAway(nc net.Conn) {
	defer f.wg.Done()
	defer nc.Close()
	fr := remoting.NewFrameReader(nc, 0, 0)
	fw := remoting.NewFrameWriter(nc, time.Second)
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			return
		}
		f.goAways.Add(1)
		if err := fw.WriteCommand(remoting.NewResponse(req, remoting.GoAway, "please go away"), true); err != nil {
			return
		}
	}
}

func (f *goAwayFront) pipe(nc net.Conn, backend string) {
	defer f.wg.Done()
	defer nc.Close()
	bc, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	f.track(bc)
	defer bc.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(bc, nc); done <- struct{}{} }()
	go func() { _, _ = io.Copy(nc, bc); done <- struct{}{} }()
	<-done
}

func withoutHeartbeats() clusterOpt {
	return func(o *Options, _ *Policy) { o.HeartbeatInterval = -1 }
}

func TestGoAwayIsResentOnANewConnectionWithoutAFailedAttempt(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a"}, withoutHeartbeats())
	b := c.brokers["broker-a"]
	front := startGoAwayFront(t, b.Addr())
	c.r.SetBroker(Broker{Name: "broker-a", Addr: front.addr(), Ready: true})

	for i := range 3 {
		res, err := c.send(t, fmt.Sprint("m", i))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Attempts != 1 || fmt.Sprint(res.BrokersTried) != "[broker-a]" {
			t.Fatalf("send %d: %d attempts on %v, want one on broker-a", i, res.Attempts, res.BrokersTried)
		}
	}
	if n := front.goAways.Load(); n != 1 {
		t.Fatalf("%d GO_AWAY answers, want exactly one (later sends use the new connection)", n)
	}
	for uniq, on := range c.storedByUniq() {
		if len(on) != 1 {
			t.Errorf("message %s stored %d times", uniq, len(on))
		}
	}
	if n := c.stored(); n != 3 {
		t.Fatalf("%d messages stored, want 3", n)
	}
	for _, a := range c.rec.snapshotAttempts() {
		if a.outcome != fault.Success {
			t.Errorf("attempt on %s recorded as %v, want every attempt a success", a.broker, a.outcome)
		}
	}
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	if len(c.rec.isolation) != 0 || c.rec.retries != 0 {
		t.Fatalf("isolation events %v and %d retries for a server going away", c.rec.isolation, c.rec.retries)
	}
}

func TestBrokerAnsweringGoAwayOnEveryConnectionRefusesTheAttemptAndTheSendMovesOn(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withoutHeartbeats())
	a := c.brokers["broker-a"]
	a.SetFault(brokersim.Fault{Code: remoting.GoAway})
	res, err := sendUntilFirstAttemptOn(t, c, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 || fmt.Sprint(res.BrokersTried) != "[broker-a broker-b]" {
		t.Fatalf("result %+v, want broker-a then broker-b", res)
	}
	// broker-a saw the send and its resend on a new connection, then nothing more.
	if n := a.Stats().RequestsByCode[remoting.SendMessageV2]; n != 2 {
		t.Fatalf("broker-a read %d sends, want the send and one resend", n)
	}
	var onA []fault.Outcome
	for _, at := range c.rec.snapshotAttempts() {
		if at.broker == "broker-a" {
			onA = append(onA, at.outcome)
		}
	}
	if len(onA) != 1 || onA[0] != fault.BrokerError {
		t.Fatalf("attempts on broker-a recorded as %v, want one broker refusal", onA)
	}
}
