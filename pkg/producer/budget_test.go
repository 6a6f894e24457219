package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
)

// budgetRuntime is a runtime under preset with one route, "T", on broker-a at addr (two queues),
// whose index starts at 7 and whose resets draw 1000; the policy's table also knows broker-x,
// which the route does not use, as healthy with a latency of 40ms.
func budgetRuntime(t *testing.T, preset Preset, addr string, budget time.Duration) (*Runtime, *route) {
	t.Helper()
	r := New(Options{Clock: fault.NewManualClock(time.Unix(1_700_000_000, 0)), ExpiryInterval: time.Hour})
	t.Cleanup(func() { r.Close() })
	p := mustPresetPolicy(t, "p", preset)
	p.Retry.SendTimeout = budget
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	r.SetBroker(Broker{Name: "broker-a", Addr: addr, Ready: true})
	if err := r.SetRoute(Route{Topic: "T", Policy: "p", Brokers: []BrokerQueues{{Broker: "broker-a", WriteQueues: 2}}}); err != nil {
		t.Fatal(err)
	}
	tol := r.tolerance("p")
	tol.Update("broker-x", 40*time.Millisecond, fault.Success)
	tol.SeedPickIndex(0)
	rt := r.state.Load().index.get("T")
	rt.next.n.Store(7)
	rt.next.seed = func() uint32 { return 1000 }
	return r, rt
}

// Under RocketMQ's presets a send whose budget runs out selects the queue of the attempt it will
// not make before it looks at the budget, as sendDefaultImpl does: the index moves as RocketMQ's
// does, and under RocketMQ 4.x that selection's pickOneAtLeast drops the record of a broker the
// route does not use. PresetDetour checks the budget first and leaves both alone. The expected
// index and records come from a twin runtime that makes the same two selections and the same
// fault update by hand.
func TestExhaustedBudgetSelectsAsRocketMQDoes(t *testing.T) {
	hung, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	hung.CreateTopic("T", 2)
	hung.SetFault(brokersim.Fault{BlackHole: true})
	const budget = 300 * time.Millisecond
	for _, tc := range []struct {
		preset Preset
		// selectsAfter: the send selects once more after its budget ran out.
		selectsAfter bool
	}{
		{PresetRocketMQ5, true},
		{PresetRocketMQ4, true},
		{PresetDisabled, true},
		{PresetDetour, false},
	} {
		t.Run(string(tc.preset), func(t *testing.T) {
			r, rt := budgetRuntime(t, tc.preset, hung.Addr(), budget)
			_, err := r.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")})
			var se *SendError
			if !errors.As(err, &se) || !se.Timeout || se.Attempts != 1 {
				t.Fatalf("a send to a hung broker ended with %v, want a timeout after one attempt", err)
			}

			twin, trt := budgetRuntime(t, tc.preset, "127.0.0.1:1", budget)
			first := trt.pick("", false)
			twin.tolerance("p").Update(first.b.name, budget, fault.TransportError)
			if tc.selectsAfter {
				trt.pick(first.b.name, true)
			}
			if got, want := int32(rt.next.n.Load()), int32(trt.next.n.Load()); got != want {
				t.Errorf("index after the send %d, want %d", got, want)
			}
			// pickOneAtLeast's removal (LatencyFaultToleranceImpl.remove) clears what was learnt.
			got, _ := r.tolerance("p").Lookup("broker-x")
			want, _ := twin.tolerance("p").Lookup("broker-x")
			if got.Latency != want.Latency || !got.Until.Equal(want.Until) {
				t.Errorf("broker-x's record %+v, want %+v", got, want)
			}
			if tc.preset == PresetRocketMQ4 && want.Latency != 0 {
				t.Errorf("the twin's record of broker-x %+v: the test no longer covers what it means to", want)
			}
		})
	}
}
