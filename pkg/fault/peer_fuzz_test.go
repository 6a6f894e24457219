package fault

import (
	"slices"
	"testing"
)

// FuzzPeerClaims mixes other replicas' claims (any brokers, known or not, with and without an
// end, withdrawn at any time) with updates, probes, pod marks, policy switches and clock steps,
// and checks after every step that:
//   - a claim never adds a broker to the table;
//   - Available and Isolated agree, and a broker listed as a peer's is one a live claim names;
//   - the changes reported through OnChange (with Expire) add up to Isolated;
//   - under a cap, no more brokers are unavailable than it allows unless all are pod-marked.
func FuzzPeerClaims(f *testing.F) {
	f.Add([]byte{0x00, 5, 0x03, 4, 2, 0, 1, 6, 0, 0})
	f.Add([]byte{0x20, 8, 0, 0, 8, 1, 0, 5, 0x1f, 1, 4, 5, 0, 1, 2, 9})
	f.Add([]byte{0x05, 1, 0, 9, 5, 0x3f, 0, 4, 7, 9, 6, 0, 0, 7, 0x18, 0})
	tables := [2]*Table{mustPreset(f, PresetRocketMQ5), mustPreset(f, PresetRocketMQ4)}
	names := append(slices.Clone(fuzzBrokers), "ghost")

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		clk := NewManualClock(t0)
		rec := &recorder{}
		opts := fuzzOptions(data[0], tables)
		opts.Clock, opts.OnChange = clk, rec.on
		tol := New(opts)
		isolated := map[string]bool{}
		claimed := map[string]PeerClaim{}
		for i := 1; i+2 < len(data); i += 3 {
			op, broker, arg := data[i]%10, fuzzBrokers[int(data[i+1])%len(fuzzBrokers)], data[i+2]
			knownBefore := tol.Brokers()
			switch op {
			case 0, 1, 2:
				tol.Update(broker, ms(fuzzLatencies[int(arg)%len(fuzzLatencies)]), Outcome(op))
			case 3:
				tol.ProbeResult(broker, arg&1 == 0, ms(int64(arg)))
			case 4:
				clk.Advance(fuzzSteps[int(arg)%len(fuzzSteps)])
			case 5:
				// arg's low six bits pick the brokers claimed (the sixth is one nobody knows); the
				// broker byte says whether the claims end and when.
				claimed = map[string]PeerClaim{}
				for j, name := range names {
					if arg&(1<<j) == 0 {
						continue
					}
					c := PeerClaim{Reason: ReasonSendFailed, Since: clk.Now()}
					if data[i+1]&1 == 0 {
						c.Until = clk.Now().Add(fuzzSteps[int(data[i+1]>>1)%len(fuzzSteps)])
					}
					claimed[name] = c
				}
				tol.SetPeerClaims(claimed)
				if known := tol.Brokers(); !slices.Equal(known, knownBefore) {
					t.Fatalf("step %d: claims changed the brokers known from %v to %v", i, knownBefore, known)
				}
			case 6:
				claimed = nil
				tol.SetPeerClaims(nil)
			case 7:
				tol.SetPodState(broker, PodState(arg%4))
			case 8:
				next := fuzzOptions(arg, tables)
				next.OnChange = rec.on
				opts.Semantics, opts.Probing, opts.GrowOnRepeat = next.Semantics, next.Probing, next.GrowOnRepeat
				opts.RespectPodHealth, opts.MaxIsolatedPercent = next.RespectPodHealth, next.MaxIsolatedPercent
				tol.Configure(next)
			case 9:
				tol.Entry(broker)
			}
			tol.Expire()
			for _, c := range rec.take() {
				isolated[c.Broker] = c.Isolated
			}

			items := tol.Isolated()
			var listed, fromChanges []string
			pods := 0
			for _, it := range items {
				listed = append(listed, it.Broker)
				if it.Reason == ReasonPodNotReady || it.Reason == ReasonPodTerminating {
					pods++
				}
				if c, ok := claimed[it.Broker]; it.Peer && (!ok || (!c.Until.IsZero() && !clk.Now().Before(c.Until))) {
					t.Fatalf("step %d: %s listed as a peer's without a live claim (%+v)", i, it.Broker, it)
				}
			}
			for b, iso := range isolated {
				if iso {
					fromChanges = append(fromChanges, b)
				}
			}
			slices.Sort(fromChanges)
			if !slices.Equal(listed, fromChanges) {
				t.Fatalf("step %d: Isolated() = %v, changes say %v", i, listed, fromChanges)
			}
			for _, b := range names {
				if tol.Available(b) == slices.Contains(listed, b) {
					t.Fatalf("step %d: %s available %v but Isolated() = %v", i, b, tol.Available(b), listed)
				}
			}
			if limit, capped := capOf(opts); capped {
				known := len(tol.Brokers())
				limit = max(min(max(known*limit/100, 1), known-1), 0)
				if len(items) > limit && len(items) != pods {
					t.Fatalf("step %d: %d of %d brokers unavailable (%d pod-marked) under a %d%% cap: %v",
						i, len(items), known, pods, opts.MaxIsolatedPercent, listed)
				}
			}
		}
	})
}
