package producer

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// probeLoop is one policy's recovery prober.
type probeLoop struct {
	interval, timeout time.Duration
	stop              chan struct{}
}

// syncProbe starts, restarts or stops a policy's probe loop to match its settings. Callers hold r.mu.
func (r *Runtime) syncProbe(ps *policyState) {
	cur := r.probes[ps.Name]
	if !ps.Probe.Enabled || r.closed.Load() {
		r.stopProbe(ps.Name)
		return
	}
	if cur != nil && cur.interval == ps.Probe.Interval && cur.timeout == ps.Probe.Timeout {
		return // the loop reads the policy's table from the current snapshot every round
	}
	r.stopProbe(ps.Name)
	pl := &probeLoop{interval: ps.Probe.Interval, timeout: ps.Probe.Timeout, stop: make(chan struct{})}
	r.probes[ps.Name] = pl
	r.wg.Add(1)
	go r.runProbe(ps.Name, pl)
}

// stopProbe ends a policy's probe loop without waiting for a round in progress. Callers hold r.mu.
func (r *Runtime) stopProbe(name string) {
	if pl := r.probes[name]; pl != nil {
		close(pl.stop)
		delete(r.probes, name)
	}
	r.pressureMu.Lock()
	delete(r.pressure, name) // figures of a loop that stopped would only grow stale
	delete(r.limits, name)
	r.pressureMu.Unlock()
}

// followUpDivisor sets how soon a suspect broker is probed again: after a mean of the probe
// interval divided by it (spread ±50 % as rounds are), instead of a whole interval.
const followUpDivisor = 4

// runProbe runs a policy's probe rounds until its loop is stopped: a full round about every
// interval and, while the last round found suspects, follow-up rounds of only those brokers
// about four times as often.
func (r *Runtime) runProbe(policy string, pl *probeLoop) {
	defer r.wg.Done()
	nextFull := time.Now().Add(jittered(pl.interval))
	t := time.NewTimer(time.Until(nextFull))
	defer t.Stop()
	var suspects map[string]bool
	for {
		select {
		case <-pl.stop:
			return
		case <-t.C:
			start := time.Now()
			if len(suspects) == 0 || !start.Before(nextFull) {
				suspects = r.probeRound(policy, pl, nil)
				// The next round is timed from this one's start: timed from its end, it would
				// start in step with a pausing broker, whose answer ends the round when its
				// pause ends.
				nextFull = start.Add(jittered(pl.interval))
			} else {
				suspects = r.probeRound(policy, pl, suspects)
			}
			wait := time.Until(nextFull)
			if len(suspects) > 0 {
				wait = min(wait, time.Until(start.Add(jittered(pl.interval/followUpDivisor))))
			}
			t.Reset(max(0, wait))
		}
	}
}

// jittered draws the time between two probe rounds from interval ±50 %. A broker that pauses
// periodically (a GC pause every second, say) would otherwise be probed at the same phase of its
// cycle every time and, if that phase is a healthy one, never be found silent; with a spread of a
// whole interval, a pause whose period is the interval is probed at independent phases.
func jittered(interval time.Duration) time.Duration {
	return interval/2 + rand.N(interval+1)
}

// probeVerdict is what one probe found: whether the broker answered at all (silent: a transport
// error or no answer in time), whether the answer was a success, and how long it took.
type probeVerdict struct {
	silent, good bool
	// refused: the broker refused the probe's credentials (see credentials.go).
	refused bool
	latency time.Duration
}

// probeRound sends GET_MAX_OFFSET to every broker the policy's table holds out of selection, in
// parallel, and feeds each outcome back (RocketMQ's detector, which also clears reachability on a
// failed probe so a dead broker stays out). With Probe.Routed it also watches the brokers the
// policy's routes use that the table does not hold out: silent ones count as failed attempts,
// slow ones as slow sends. With only set, it probes those brokers alone, held or not (a
// follow-up). It returns the suspects: brokers whose answer was silent, slow or not a success,
// and brokers a probe just readmitted, whose next probe comes early.
func (r *Runtime) probeRound(policy string, pl *probeLoop, only map[string]bool) map[string]bool {
	st := r.state.Load()
	ps, ok := st.policies[policy]
	if !ok {
		return nil
	}
	held, watched := st.probeTargets(policy, ps, only)
	pressure := only == nil && ps.Pressure.Enabled
	holds := only == nil && ps.tol.HasTopicHolds()
	if len(held) == 0 && len(watched) == 0 && !pressure && !holds {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-pl.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	suspects := &suspectSet{}
	topics := st.probeTopics(append(slices.Clone(held), watched...)) // set before any probe starts
	probe := func(b Broker, timeout time.Duration, judge func(probeVerdict)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, ok := r.probeOnce(ctx, pl, policy, b, topics[b.Name], timeout); ok {
				judge(v)
			}
		}()
	}
	// Under PresetDetour a probe refused for its credentials is no proof either way: the broker
	// answered, so it is up, but what the answer says is about the caller. RocketMQ's detector
	// counts it as a failed probe.
	noProof := func(v probeVerdict) bool { return v.refused && !ps.Preset.rocketMQ() }
	for _, b := range held {
		probe(b, pl.timeout, func(v probeVerdict) {
			if !noProof(v) {
				judgeHeld(ps, b.Name, v, suspects)
			}
		})
	}
	// A watched broker is given as long to answer as a send attempt.
	attempt := ps.Retry.SendTimeout
	if ps.Retry.PerAttemptTimeout > 0 {
		attempt = ps.Retry.PerAttemptTimeout
	}
	if holds {
		r.checkTopicHolds(ctx, &wg, st, ps, pl.timeout)
	}
	if pressure {
		r.pollPressure(ctx, &wg, policy, ps, st.routedBrokers(policy, nil), attempt, 2*pl.interval)
	}
	for _, b := range watched {
		probe(b, attempt, func(v probeVerdict) {
			if !noProof(v) {
				judgeWatched(ps, b.Name, v, suspects)
			}
		})
	}
	wg.Wait()
	if len(suspects.names) > 0 {
		r.log.V(1).Info("probe suspects", "policy", policy, "brokers", len(suspects.names), "followUp", only != nil)
	}
	return suspects.names
}

// suspectSet collects, from a round's concurrent probes, the brokers whose next probe comes early.
type suspectSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func (s *suspectSet) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = make(map[string]bool)
	}
	s.names[name] = true
}

// slowAnswer reports whether v is an answer slower than a threshold of the policy's table.
func slowAnswer(ps *policyState, v probeVerdict) bool {
	return v.good && ps.Table.IsolationFor(v.latency) > 0
}

// judgeHeld feeds a held broker's probe to the table; a failed or slow answer, or one that
// readmitted the broker, makes it a suspect.
func judgeHeld(ps *policyState, broker string, v probeVerdict, suspects *suspectSet) {
	ps.tol.ProbeResult(broker, v.good, v.latency)
	if !v.good || slowAnswer(ps, v) || ps.tol.Available(broker) {
		suspects.add(broker)
	}
}

// judgeWatched feeds a watched broker's probe to the table: silence counts as a failed attempt
// and slowness as a slow send; a busy or refusing answer isolates nothing (the sends see what it
// means for a message). Any of the three makes the broker a suspect, and so does a good answer
// that took the table's proof latency or more (50 ms in both presets) without isolating: a probe
// sent late in a pause is answered when the pause ends, and the follow-up, a quarter of an
// interval later, likely lands in the next pause, where silence isolates.
func judgeWatched(ps *policyState, broker string, v probeVerdict, suspects *suspectSet) {
	switch {
	case v.silent:
		ps.tol.WatchFailed(broker, v.latency)
	case slowAnswer(ps, v):
		ps.tol.WatchSlow(broker, v.latency)
	case v.good && v.latency < ps.Table.ProofLatency():
		return
	}
	suspects.add(broker)
}

// probeOnce sends one GET_MAX_OFFSET to b and reports what it found; false when the policy's
// probe loop stopped meanwhile, so the verdict no longer applies.
func (r *Runtime) probeOnce(ctx context.Context, pl *probeLoop, policy string, b Broker, topic string, timeout time.Duration) (probeVerdict, bool) {
	pctx, done := context.WithTimeout(ctx, timeout)
	defer done()
	req := remoting.NewGetMaxOffsetRequest(topic, 0)
	start := time.Now()
	resp, err := r.client.Invoke(pctx, b.Addr, req)
	silent := err != nil
	var refused bool
	if err == nil {
		refused = r.noteAnswer("", b.Addr, b.Name, topic, remoting.GetMaxOffset, resp) != remoting.NotACLRefusal
		// As RocketMQ's detector: a good answer is SUCCESS with the offset asked for, which
		// getMaxOffset must decode; anything else is a failed probe.
		_, err = remoting.ParseMaxOffsetResponse(resp)
	}
	v := probeVerdict{silent: silent, good: err == nil, refused: refused, latency: time.Since(start)}
	select {
	case <-pl.stop:
		return v, false // the policy changed or went away mid-round
	default:
	}
	if !v.good {
		r.log.V(1).Info("probe failed", "policy", policy, "broker", b.Name, "addr", b.Addr, "error", err)
	}
	return v, true
}

// probeTargets lists what a round probes: held, the brokers the policy's table holds out (each
// with an address to probe; one without has no pod or route left), and watched, the routed
// brokers the table does not hold out when the policy watches them. With only set, both are
// restricted to those brokers, and a suspect that is not held is watched whatever the policy
// says: a broker just readmitted, or one that answered oddly, is checked once more.
func (s *snapshot) probeTargets(policy string, ps *policyState, only map[string]bool) (held, watched []Broker) {
	items := ps.tol.Isolated()
	for _, it := range items {
		// A broker held only by another replica's claim is that replica's to probe: its
		// readmission is the claimant's decision, and a probe here proves nothing the claim
		// depends on.
		if (only != nil && !only[it.Broker]) || it.Peer {
			continue
		}
		if b := (Broker{Name: it.Broker, Addr: s.sendAddr(it.Broker)}); b.Addr != "" {
			held = append(held, b)
		}
	}
	if only == nil {
		if ps.Probe.Routed {
			watched = s.routedBrokers(policy, items)
		}
		return held, watched
	}
	isHeld := make(map[string]bool, len(items))
	for _, it := range items {
		isHeld[it.Broker] = true
	}
	for name := range only {
		if b := (Broker{Name: name, Addr: s.sendAddr(name)}); !isHeld[name] && b.Addr != "" {
			watched = append(watched, b)
		}
	}
	sort.Slice(watched, func(i, j int) bool { return watched[i].Name < watched[j].Name })
	return held, watched
}

// routedBrokers lists, by name, the brokers the routes of policy send to, less those in held
// (the table's isolated brokers, which the recovery probes visit).
func (s *snapshot) routedBrokers(policy string, held []fault.Item) []Broker {
	seen := make(map[string]bool, len(held))
	for _, it := range held {
		seen[it.Broker] = true
	}
	var out []Broker
	for _, rt := range s.routes.All() {
		if rt.policy == nil || rt.policy.Name != policy {
			continue
		}
		for i := range rt.queues {
			// Queues are grouped by broker: look a broker up once per group.
			if b := rt.queues[i].b; (i == 0 || rt.queues[i-1].b.name != b.name) && !seen[b.name] && b.addr != "" {
				seen[b.name] = true
				out = append(out, Broker{Name: b.name, Addr: b.addr})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sendAddr is where sends to a broker go: the address a compiled route carries (a name server's,
// for routes resolved from one), else the address of the pushed Broker. A broker known only from
// a name server has no pushed Broker, and must be probed all the same.
func (s *snapshot) sendAddr(broker string) string {
	for _, rt := range s.routes.All() {
		for i := range rt.queues {
			if b := rt.queues[i].b; b.name == broker {
				return b.addr
			}
		}
	}
	return s.brokers[broker].Addr
}

// probeTopics picks, for each broker, the topic its probes ask about: the first (by name) routed
// to it, as RocketMQ's detector asks about a topic it publishes to; the broker answers for unknown
// topics too, which is what a broker no route uses gets. One pass over the routes serves a whole
// round.
func (s *snapshot) probeTopics(brokers []Broker) map[string]string {
	topics := make(map[string]string, len(brokers))
	for _, b := range brokers {
		topics[b.Name] = ""
	}
	for _, spec := range s.specs.All() {
		for _, bq := range spec.Brokers {
			if cur, ok := topics[bq.Broker]; ok && (cur == "" || spec.Topic < cur) {
				topics[bq.Broker] = spec.Topic
			}
		}
	}
	for name, topic := range topics {
		if topic == "" {
			topics[name] = defaultTopicKey
		}
	}
	return topics
}
