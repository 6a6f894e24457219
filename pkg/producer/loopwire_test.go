package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// wireBehaviour is how a scripted broker answers a send: ok (SEND_OK), stored (a "stored but"
// code), code (a refusal), reset (the connection drops), refuse (no connection), hang (no answer),
// each after latency milliseconds.
type wireBehaviour struct {
	kind    string
	code    int16
	latency int64
	// late is how long after its limit a request that times out returns, as a real timer fires
	// after its deadline.
	late int64
}

// scriptedWire stands in for the network between the send loop and its brokers on a virtual
// clock, with the edges of RocketMQ's NettyRemotingClient.invokeSync: a request with no time left
// times out at once; an answer latency ms away arrives if that is less than the time left, else
// the request times out when the time left is up. The time left is what the attempt's context
// allows on the virtual clock. The loop differential's Java driver (LoopScript) stands in for the
// same network the same way, so both loops see the same brokers.
type scriptedWire struct {
	clk      *fault.ManualClock
	byAddr   map[string]string        // broker by address
	behave   map[string]wireBehaviour // by broker; absent means ok at once
	attempts []string                 // broker/queue of every request seen since the last take
}

func newScriptedWire(clk *fault.ManualClock) *scriptedWire {
	return &scriptedWire{clk: clk, byAddr: map[string]string{}, behave: map[string]wireBehaviour{}}
}

// take returns the attempts seen since the last take.
func (w *scriptedWire) take() []string {
	a := w.attempts
	w.attempts = nil
	return a
}

// Invoke answers one send as its broker's behaviour says.
func (w *scriptedWire) Invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	broker, ok := w.byAddr[addr]
	if !ok {
		return nil, fmt.Errorf("%w: no scripted broker at %s", remoting.ErrConnect, addr)
	}
	h, err := remoting.ParseSendHeader(req)
	if err != nil {
		return nil, err
	}
	w.attempts = append(w.attempts, fmt.Sprintf("%s/%d", broker, h.QueueID))
	left := int64(-1)
	if d, ok := ctx.Deadline(); ok {
		left = d.Sub(w.clk.Now()).Milliseconds()
	}
	b := w.behave[broker]
	if b.kind == "refuse" {
		return nil, fmt.Errorf("%w: %s refuses connections", remoting.ErrConnect, broker)
	}
	if left <= 0 || b.kind == "hang" || b.latency >= left {
		w.clk.Advance(time.Duration(max(left, 0)+b.late) * time.Millisecond)
		return nil, fmt.Errorf("%w: %s did not answer in %d ms", remoting.ErrTimeout, broker, max(left, 0))
	}
	w.clk.Advance(time.Duration(b.latency) * time.Millisecond)
	switch b.kind {
	case "reset":
		return nil, fmt.Errorf("%w: %s reset the connection", remoting.ErrClosed, broker)
	case "code":
		return remoting.NewResponse(req, b.code, "scripted refusal"), nil
	}
	code := remoting.Success
	if b.kind == "stored" {
		code = b.code
	}
	return remoting.NewSendResponse(req, remoting.SendResponse{Code: code, MsgID: "7F00000100002A9F0000000000000000",
		QueueID: h.QueueID, QueueOffset: 0}), nil
}

// InvokeOneway is never used: the loop differential sends synchronously.
func (w *scriptedWire) InvokeOneway(context.Context, string, *remoting.Command) error {
	return errors.New("scriptedWire: oneway sends are not scripted")
}

// scriptedRuntime is a runtime under preset whose send loop runs on clk over w, with one route "T"
// over brokers given as name:queues (":noaddr" appended for a broker the route names without an
// address).
func scriptedRuntime(t testing.TB, preset Preset, timeoutMs int64, attempts int, clk *fault.ManualClock, w *scriptedWire, brokers ...string) (*Runtime, *route) {
	t.Helper()
	r := New(Options{Clock: clk, ExpiryInterval: time.Hour, HeartbeatInterval: -1})
	r.wire, r.sendClock = w, clk
	p := mustPresetPolicy(t, "p", preset)
	p.Retry.SendTimeout = time.Duration(timeoutMs) * time.Millisecond
	p.Retry.Attempts = attempts
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	spec := Route{Topic: "T", Policy: "p"}
	for i, b := range brokers {
		f := strings.Split(b, ":")
		name := f[0]
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("broker %q: %v", b, err)
		}
		if len(f) < 3 || f[2] != "noaddr" {
			addr := fmt.Sprintf("10.0.0.%d:10911", 1+i)
			r.SetBroker(Broker{Name: name, Addr: addr, Ready: true})
			w.byAddr[addr] = name
		}
		spec.Brokers = append(spec.Brokers, BrokerQueues{Broker: name, WriteQueues: n})
	}
	if err := r.SetRoute(spec); err != nil {
		t.Fatal(err)
	}
	return r, r.state.Load().index.get("T")
}

// Under RocketMQ's presets the budget is spent only once more whole milliseconds than it holds
// have passed (sendDefaultImpl's timeout < costTime): a first attempt that hangs for exactly the
// budget leaves a second attempt with no time left, which times out at once and counts against
// the broker, and so on until the attempts run out. PresetDetour ends the send when nothing is
// left.
func TestBudgetRunsOutAsRocketMQCountsIt(t *testing.T) {
	for _, tc := range []struct {
		preset   Preset
		attempts int
		timeout  bool
	}{
		{PresetRocketMQ5, 3, false},
		{PresetRocketMQ4, 3, false},
		{PresetDisabled, 3, false},
		{PresetDetour, 1, true},
	} {
		t.Run(string(tc.preset), func(t *testing.T) {
			clk := fault.NewManualClock(time.Unix(1_700_000_000, 0))
			w := newScriptedWire(clk)
			w.behave["broker-a"] = wireBehaviour{kind: "hang"}
			r, _ := scriptedRuntime(t, tc.preset, 3000, 3, clk, w, "broker-a:2")
			t.Cleanup(func() { r.Close() })
			_, err := r.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")})
			var se *SendError
			if !errors.As(err, &se) {
				t.Fatalf("send ended with %v, want a SendError", err)
			}
			if se.Attempts != tc.attempts || se.Timeout != tc.timeout || len(w.take()) != tc.attempts {
				t.Errorf("%d attempts, timeout %v; want %d, %v (%v)", se.Attempts, se.Timeout, tc.attempts, tc.timeout, err)
			}
		})
	}
}
