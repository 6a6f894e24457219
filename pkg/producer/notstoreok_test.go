package producer

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/detourmq/detour/pkg/remoting"
)

// degradedBroker answers every send with a "stored but" code (FLUSH_DISK_TIMEOUT and friends) and
// a complete send header, as a Java broker does when the store is slow to flush. brokersim's Code
// fault answers without a header, which is a failure, not a degraded success.
type degradedBroker struct {
	ln    net.Listener
	code  int16
	mu    sync.Mutex
	sends int
	conns []net.Conn
}

func startDegradedBroker(t *testing.T, code int16) *degradedBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &degradedBroker{ln: ln, code: code}
	t.Cleanup(func() {
		ln.Close()
		d.mu.Lock()
		for _, c := range d.conns {
			c.Close()
		}
		d.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.mu.Lock()
			d.conns = append(d.conns, c)
			d.mu.Unlock()
			go d.serve(c)
		}
	}()
	return d
}

func (d *degradedBroker) serve(c net.Conn) {
	fr := remoting.NewFrameReader(c, 4096, remoting.DefaultMaxFrameSize)
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			return
		}
		h, err := remoting.ParseSendHeader(req)
		if err != nil {
			return
		}
		d.mu.Lock()
		d.sends++
		off := int64(d.sends)
		d.mu.Unlock()
		frame, err := remoting.Encode(remoting.NewSendResponse(req, remoting.SendResponse{
			Code: d.code, MsgID: "7F00000100002A9F0000000000000000", QueueID: h.QueueID, QueueOffset: off,
		}))
		if err != nil {
			return
		}
		if _, err := c.Write(frame); err != nil && !errors.Is(err, io.EOF) {
			return
		}
	}
}

func (d *degradedBroker) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sends
}

func TestStoredButNotOKStatus(t *testing.T) {
	for _, tc := range []struct {
		code   int16
		status string
	}{
		{remoting.FlushDiskTimeout, StatusFlushDiskTimeout},
		{remoting.FlushSlaveTimeout, StatusFlushSlaveTimeout},
		{remoting.SlaveNotAvailable, StatusSlaveNotAvailable},
	} {
		for _, retry := range []bool{false, true} {
			t.Run(tc.status+map[bool]string{false: "/returned", true: "/retried"}[retry], func(t *testing.T) {
				r, a, b := degradedPair(t, tc.code, retry)
				res, err := r.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")})
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != tc.status {
					t.Fatalf("status %q", res.Status)
				}
				want := 1
				if retry {
					want = 3 // every broker answers the same, so all attempts run and the last result is returned
				}
				if res.Attempts != want || a.count()+b.count() != want {
					t.Fatalf("attempts %d, brokers saw %d sends, want %d", res.Attempts, a.count()+b.count(), want)
				}
				// A stored message is a success for the fault table.
				if iso := r.Isolated("p"); len(iso) != 0 {
					t.Fatalf("isolated %+v", iso)
				}
			})
		}
	}
}

// degradedPair is a runtime whose topic T is routed to two brokers, a and b, that store every
// message and answer code, under a policy that sends such messages to another broker as well when
// retry is set.
func degradedPair(t *testing.T, code int16, retry bool) (*Runtime, *degradedBroker, *degradedBroker) {
	t.Helper()
	a := startDegradedBroker(t, code)
	b := startDegradedBroker(t, code)
	r := New(Options{})
	t.Cleanup(func() { r.Close() })
	p := DefaultPolicy("p")
	p.Retry.RetryAnotherBrokerWhenNotStoreOK = retry
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	r.SetBroker(Broker{Name: "a", Addr: a.ln.Addr().String(), Ready: true})
	r.SetBroker(Broker{Name: "b", Addr: b.ln.Addr().String(), Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Policy: "p", Brokers: []BrokerQueues{{Broker: "a", WriteQueues: 1}, {Broker: "b", WriteQueues: 1}}}); err != nil {
		t.Fatal(err)
	}
	return r, a, b
}
