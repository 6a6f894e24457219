package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/fault"
)

// budgetRuntime is scriptedRuntime under preset with route "T" on broker-a (two queues), whose
// index starts at 7 and whose resets draw 1000; the policy's table also knows broker-x, which the
// route does not use, as healthy with a latency of 40ms.
func budgetRuntime(t *testing.T, preset Preset, budget int64, clk *fault.ManualClock, w *scriptedWire) (*Runtime, *route) {
	t.Helper()
	r, rt := scriptedRuntime(t, preset, budget, 3, clk, w, "broker-a:2")
	t.Cleanup(func() { r.Close() })
	tol := r.tolerance("p")
	tol.Update("broker-x", 40*time.Millisecond, fault.Success)
	tol.SeedPickIndex(0)
	rt.next.n.Store(7)
	rt.next.seed = func() uint32 { return 1000 }
	return r, rt
}

// Under RocketMQ's presets a send whose budget runs out selects the queue of the attempt it will
// not make before it looks at the budget, as sendDefaultImpl does: the index moves as RocketMQ's
// does, and under RocketMQ 4.x that selection's pickOneAtLeast drops the record of a broker the
// route does not use. PresetDetour checks the budget first and leaves both alone. The broker
// hangs, and its timeout returns a millisecond past the budget. The expected index and records
// come from a twin runtime that makes the same selections and the same fault update by hand.
func TestExhaustedBudgetSelectsAsRocketMQDoes(t *testing.T) {
	const budget = 3000
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
			clk := fault.NewManualClock(time.Unix(1_700_000_000, 0))
			w := newScriptedWire(clk)
			w.behave["broker-a"] = wireBehaviour{kind: "hang", late: 1}
			r, rt := budgetRuntime(t, tc.preset, budget, clk, w)
			_, err := r.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")})
			var se *SendError
			if !errors.As(err, &se) || !se.Timeout || se.Attempts != 1 {
				t.Fatalf("a send to a hung broker ended with %v, want a timeout after one attempt", err)
			}

			tclk := fault.NewManualClock(time.Unix(1_700_000_000, 0))
			twin, trt := budgetRuntime(t, tc.preset, budget, tclk, newScriptedWire(tclk))
			first := trt.pick("", false)
			tclk.Advance((budget + 1) * time.Millisecond)
			twin.tolerance("p").Update(first.b.name, (budget+1)*time.Millisecond, fault.TransportError)
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
