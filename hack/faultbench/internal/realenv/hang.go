package realenv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/pkg/remoting"
)

// Where the gate sits and what it reads.
const (
	// hangBind is the loopback address the bad broker listens on while the gate sits at its
	// published address (127.0.0.1 and the same port) in front of it.
	hangBind = "127.0.0.2"
	// hangMaxFrame bounds a frame the gate reads, as a broker bounds it.
	hangMaxFrame = 16 << 20
)

// hangGate is a remoting-aware TCP relay in front of the bad broker for the hang scenario. It passes
// every frame on in both directions, except that while it is armed it holds every
// every-th send request (the scenario's HangEvery) (SEND_MESSAGE, V2 or batch) for a while (scenario.HangFor in
// the scenario) before passing it on: remoting matches responses to requests by opaque, so the
// requests behind a held one go on at once. Frames are relayed
// whole, never parsed past their header.
type hangGate struct {
	ln       net.Listener
	upstream string
	every    int64
	hold     time.Duration
	armed    atomic.Bool
	sends    atomic.Int64
	held     atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startHangGate listens on addr and relays to upstream until close, holding one send in every
// for hold while armed.
func startHangGate(addr, upstream string, every int, hold time.Duration) (*hangGate, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hang gate: %w", err)
	}
	g := &hangGate{ln: ln, upstream: upstream, every: int64(max(every, 1)), hold: hold, conns: map[net.Conn]struct{}{}}
	g.wg.Add(1)
	go g.accept()
	return g, nil
}

func (g *hangGate) accept() {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", g.upstream, 3*time.Second)
		if err != nil {
			// The broker is down: the client sees its connection end, as with a refused one.
			_ = c.Close()
			continue
		}
		if !g.track(c, up) {
			return
		}
		g.wg.Add(2)
		go g.relayRequests(c, up)
		go g.relayResponses(up, c)
	}
}

// track records a connection pair so close can end it; false once the gate is closed.
func (g *hangGate) track(cs ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		g.conns[c] = struct{}{}
	}
	return true
}

// untrack closes a connection pair and forgets it.
func (g *hangGate) untrack(cs ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(g.conns, c)
	}
}

// relayRequests passes the client's frames to the broker, holding every scenario.HangEvery-th send while
// armed. Writes to the broker are serialised, so a held frame goes out whole between others.
func (g *hangGate) relayRequests(client, broker net.Conn) {
	defer g.wg.Done()
	defer g.untrack(client, broker)
	var wmu sync.Mutex
	write := func(frame []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = broker.Write(frame)
	}
	for {
		frame, err := readFrame(client)
		if err != nil {
			return
		}
		if g.armed.Load() && isSend(frame) && g.sends.Add(1)%g.every == 0 {
			g.held.Add(1)
			time.AfterFunc(g.hold, func() { write(frame) })
			continue
		}
		write(frame)
	}
}

// relayResponses passes the broker's bytes back to the client as they come.
func (g *hangGate) relayResponses(broker, client net.Conn) {
	defer g.wg.Done()
	defer client.Close()
	_, _ = io.Copy(client, broker)
}

// readFrame reads one whole remoting frame, its length word included.
func readFrame(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 4 || n > hangMaxFrame {
		return nil, errors.New("hang gate: bad frame length")
	}
	frame := make([]byte, 4+n)
	copy(frame, head[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// isSend reports whether a frame is a send request.
func isSend(frame []byte) bool {
	c, err := remoting.Decode(frame[4:])
	if err != nil || c.IsResponse() {
		return false
	}
	switch c.Code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
		return true
	}
	return false
}

// Close stops listening and ends every relayed connection.
func (g *hangGate) Close() {
	g.mu.Lock()
	g.closed = true
	for c := range g.conns {
		_ = c.Close()
	}
	g.mu.Unlock()
	_ = g.ln.Close()
	g.wg.Wait()
}

// ArmHangGate puts the gate in front of the bad broker before the hang scenario's runs: the broker
// is restarted listening on hangBind (same port, same store) and the gate takes its published
// address, unarmed, so the runs start from a healthy broker one relay away.
func (e *Env) ArmHangGate(every int) error {
	addr := e.bad.Addr
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if err := e.harness(e.bad.Stop); err != nil {
		return err
	}
	g, err := startHangGate(addr, net.JoinHostPort(hangBind, port), every, scenario.HangFor)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.gate = g
	e.mu.Unlock()
	return e.harness(func() { e.bad.BootWith(map[string]string{"bindAddress": hangBind}) })
}

// RemoveHangGate takes the gate away after the hang scenario: the broker listens on its published
// address again.
func (e *Env) RemoveHangGate() error {
	e.mu.Lock()
	g := e.gate
	e.gate = nil
	e.mu.Unlock()
	if g == nil {
		return nil
	}
	if err := e.harness(e.bad.Stop); err != nil {
		return err
	}
	e.log("hang gate: held %d of %d send requests while armed", g.held.Load(), g.sends.Load())
	g.Close()
	return e.harness(func() { e.bad.BootWith(map[string]string{"bindAddress": ""}) })
}
