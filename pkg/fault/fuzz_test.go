package fault

import (
	"slices"
	"testing"
	"time"
)

var (
	fuzzBrokers   = []string{"A", "B", "C", "D", "E"}
	fuzzLatencies = []int64{-1, 0, 10, 60, 120, 600, 1900, 3100, 5200, 16000}
	fuzzSteps     = []time.Duration{0, time.Millisecond, 500 * time.Millisecond, 2 * time.Second,
		5 * time.Second, 10 * time.Second, 31 * time.Second, 10 * time.Minute}
	fuzzCaps = []int{0, 10, 25, 34, 50, 67, 99, 100}
)

// fuzzOptions decodes a policy from one byte.
func fuzzOptions(b byte, tables [2]*Table) Options {
	sem := SemanticsRocketMQ5
	if b&0x80 != 0 {
		sem = SemanticsRocketMQ4
	}
	return Options{
		Semantics:          sem,
		Probing:            b&1 != 0,
		GrowOnRepeat:       b&2 != 0,
		RespectPodHealth:   b&4 != 0,
		MaxIsolatedPercent: fuzzCaps[(b>>3)&7],
		Table:              tables[(b>>6)&1],
	}
}

// FuzzUpdates runs random sequences of updates, probes, pod marks, removals, policy switches,
// restores and clock steps, and checks after every step that:
//   - an isolation end never moves earlier, except by a successful probe while probing (with
//     GrowOnRepeat, of a broker with at most one isolation episode), by a release the cap
//     reports, because the broker was removed, or by any update under RocketMQ 4.x's rules;
//   - Available, Entry.Available and Isolated agree;
//   - under a cap, no more brokers are unavailable than it allows unless all of them are
//     pod-marked, and a broker without a pod mark is always selectable;
//   - the changes reported through OnChange (with Expire) add up to Isolated;
//   - each outcome leaves the reachable flag RocketMQ 5.x gives it (4.x has none: reachable
//     unless probing marks a failure).
func FuzzUpdates(f *testing.F) {
	f.Add([]byte{0x00, 1, 0, 9, 4, 0, 5, 1, 1, 0})
	f.Add([]byte{0x18, 1, 0, 0, 1, 1, 0, 2, 2, 0, 0, 3, 5})
	f.Add([]byte{0x07, 6, 0, 1, 1, 0, 0, 4, 0, 7, 5, 0, 0, 5, 0, 1})
	f.Add([]byte{0x2c, 6, 1, 2, 6, 2, 1, 1, 3, 1, 8, 0, 0x0f, 9, 0, 0})
	f.Add([]byte{0xc9, 1, 0, 9, 0, 0, 5, 4, 0, 7, 0, 0, 2, 1, 1, 5, 0, 0, 8, 0, 0x18, 3, 2, 4})
	tables := [2]*Table{mustPreset(f, PresetRocketMQ5), mustPreset(f, PresetRocketMQ4)}

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		clk := NewManualClock(t0)
		rec := &recorder{}
		opts := fuzzOptions(data[0], tables)
		opts.Clock = clk
		opts.OnChange = rec.on
		tol := New(opts)
		isolated := map[string]bool{} // what the changes say
		until := map[string]time.Time{}

		for i := 1; i+2 < len(data); i += 3 {
			op, broker, arg := data[i]%10, fuzzBrokers[int(data[i+1])%len(fuzzBrokers)], data[i+2]
			mayShorten := ""
			switch op {
			case 0, 1, 2, 3:
				outcome := Outcome(op)
				before := tol.Reachable(broker)
				tol.Update(broker, ms(fuzzLatencies[int(arg)%len(fuzzLatencies)]), outcome)
				want := outcome != BrokerError && !(opts.Probing && outcome == TransportError)
				if opts.Semantics == SemanticsRocketMQ4 {
					want = !opts.Probing || outcome == Success
					mayShorten = broker // 4.x sets the end on every update
				}
				if opts.Probing && outcome == ClientError {
					want = before // probing leaves the flag alone
				}
				if got := tol.Reachable(broker); got != want {
					t.Fatalf("step %d: %v left reachable %v, want %v", i, outcome, got, want)
				}
			case 4:
				clk.Advance(fuzzSteps[int(arg)%len(fuzzSteps)])
			case 5:
				ok := arg&1 == 0
				tol.ProbeResult(broker, ok, ms(int64(arg)))
				// With growth, only a first offender's isolation may end by a probe.
				if it, known := tol.Lookup(broker); ok && opts.Probing && known &&
					(!opts.GrowOnRepeat || it.ConsecutiveFailures <= 1) {
					mayShorten = broker
				}
			case 6:
				tol.SetPodState(broker, PodState(arg%4))
			case 7:
				tol.Remove(broker)
			case 8:
				next := fuzzOptions(arg, tables)
				next.OnChange = rec.on
				opts.Probing, opts.GrowOnRepeat, opts.Semantics = next.Probing, next.GrowOnRepeat, next.Semantics
				opts.RespectPodHealth, opts.MaxIsolatedPercent = next.RespectPodHealth, next.MaxIsolatedPercent
				tol.Configure(next)
			case 9:
				if arg&1 == 0 {
					tol.Restore(tol.Isolated())
				} else {
					tol.Entry(broker)
				}
			}
			tol.Expire()

			released := map[string]bool{}
			for _, c := range rec.take() {
				if c.Released {
					released[c.Broker] = true
					if _, capped := capOf(opts); !capped {
						t.Fatalf("step %d: %s released without a cap", i, c.Broker)
					}
				}
				isolated[c.Broker] = c.Isolated
			}

			items := tol.Isolated()
			var listed []string
			pods := 0
			for _, it := range items {
				listed = append(listed, it.Broker)
				if it.Reason == ReasonPodNotReady || it.Reason == ReasonPodTerminating {
					pods++
				}
			}
			var fromChanges []string
			for b, iso := range isolated {
				if iso {
					fromChanges = append(fromChanges, b)
				}
			}
			slices.Sort(fromChanges)
			if !slices.Equal(listed, fromChanges) {
				t.Fatalf("step %d: Isolated() = %v, changes say %v", i, listed, fromChanges)
			}

			known := tol.Brokers()
			for _, b := range fuzzBrokers {
				av := tol.Available(b)
				if e := tol.lookup(b); e != nil && e.Available() != av {
					t.Fatalf("step %d: Entry(%s).Available() = %v, Available = %v", i, b, !av, av)
				}
				if av == slices.Contains(listed, b) {
					t.Fatalf("step %d: %s available %v but Isolated() = %v", i, b, av, listed)
				}
				it, ok := tol.Lookup(b)
				if !ok {
					delete(until, b)
					continue
				}
				if prev, seen := until[b]; seen && it.Until.Before(prev) && mayShorten != b && !released[b] {
					t.Fatalf("step %d: %s isolated until %v, earlier than %v", i, b, it.Until, prev)
				}
				until[b] = it.Until
			}

			if limit, capped := capOf(opts); capped {
				limit = max(min(max(len(known)*limit/100, 1), len(known)-1), 0)
				if len(items) > limit && len(items) != pods {
					t.Fatalf("step %d: %d of %d brokers unavailable (%d pod-marked) under a %d%% cap: %v",
						i, len(items), len(known), pods, opts.MaxIsolatedPercent, listed)
				}
				if pods < len(known) && len(items) == len(known) {
					t.Fatalf("step %d: no broker selectable under a cap: %v", i, listed)
				}
			}
		}
	})
}

func capOf(o Options) (int, bool) {
	return o.MaxIsolatedPercent, o.MaxIsolatedPercent > 0 && o.MaxIsolatedPercent < 100
}
