package producer

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// offsetBroker answers every GET_MAX_OFFSET with SUCCESS and ext as its header, and counts them.
type offsetBroker struct {
	ln     net.Listener
	ext    map[string]string
	probes atomic.Int64
}

func startOffsetBroker(t *testing.T, ext map[string]string) *offsetBroker {
	t.Helper()
	b := &offsetBroker{ext: ext}
	b.ln = startAnsweringBroker(t, 1<<20, func(req, resp *remoting.Command) {
		if req.Code == remoting.GetMaxOffset {
			resp.ExtFields = b.ext
			b.probes.Add(1)
		}
	})
	return b
}

// startAnsweringBroker listens on a loopback port, closed when the test ends, and answers every
// request read on its connections (frames up to maxFrame bytes) with SUCCESS, after answer has
// filled in the response for that request. A connection ends at the first read or write error.
func startAnsweringBroker(t *testing.T, maxFrame int, answer func(req, resp *remoting.Command)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go answerEachRequest(nc, maxFrame, answer)
		}
	}()
	return ln
}

// answerEachRequest serves one connection of startAnsweringBroker until it fails or closes.
func answerEachRequest(nc net.Conn, maxFrame int, answer func(req, resp *remoting.Command)) {
	defer nc.Close()
	fr := remoting.NewFrameReader(bufio.NewReader(nc), 4096, maxFrame)
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			return
		}
		resp := remoting.NewResponse(req, remoting.Success, "")
		answer(req, resp)
		frame, err := remoting.Encode(resp)
		if err != nil {
			return
		}
		if _, err := nc.Write(frame); err != nil {
			return
		}
	}
}

// A probe is good only if the broker answers SUCCESS with the offset it was asked for, as
// RocketMQ's detector requires (getMaxOffset decodes GetMaxOffsetResponseHeader, whose offset
// must be present, and a decoding error fails the detection): an isolated broker that answers
// SUCCESS without a readable offset stays isolated however often it is probed.
func TestProbeReadmitsOnlyABrokerThatAnswersItsOffset(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ext        map[string]string
		readmitted bool
	}{
		{"offset", map[string]string{"offset": "7"}, true},
		{"no offset", nil, false},
		{"offset not a number", map[string]string{"offset": "seven"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startOffsetBroker(t, tc.ext)
			r := New(Options{ExpiryInterval: 10 * time.Millisecond, HeartbeatInterval: -1})
			t.Cleanup(func() { r.Close() })
			p := plainPolicy("p")
			p.Probe = ProbePolicy{Enabled: true, Interval: 20 * time.Millisecond, Timeout: 5 * time.Second}
			if err := r.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
			r.SetBroker(Broker{Name: "broker-a", Addr: b.ln.Addr().String(), Ready: true})
			if err := r.SetRoute(Route{Topic: "T", Policy: "p", Brokers: []BrokerQueues{{Broker: "broker-a", WriteQueues: 1}}}); err != nil {
				t.Fatal(err)
			}
			tol := r.tolerance("p")
			tol.Update("broker-a", 0, fault.TransportError)
			if tol.Available("broker-a") {
				t.Fatal("a failed send did not isolate broker-a")
			}
			if tc.readmitted {
				waitFor(t, "a good probe to readmit broker-a", func() bool { return tol.Available("broker-a") })
				return
			}
			waitFor(t, "three probes or a readmission", func() bool { return b.probes.Load() >= 3 || tol.Available("broker-a") })
			if tol.Available("broker-a") {
				t.Errorf("broker-a was readmitted by probes answered with %v", tc.ext)
			}
		})
	}
}
