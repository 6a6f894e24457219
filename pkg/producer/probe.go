package producer

import (
	"context"
	"math/rand/v2"
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
}

func (r *Runtime) runProbe(policy string, pl *probeLoop) {
	defer r.wg.Done()
	t := time.NewTimer(jittered(pl.interval))
	defer t.Stop()
	for {
		select {
		case <-pl.stop:
			return
		case <-t.C:
			start := time.Now()
			r.probeRound(policy, pl)
			// The next round is timed from this one's start: timed from its end, it would start
			// in step with a stalling broker, whose answer ends the round when its stall ends.
			t.Reset(max(0, time.Until(start.Add(jittered(pl.interval)))))
		}
	}
}

// jittered draws the time between two probe rounds from interval ±50 %. A broker that stalls
// periodically (a GC pause every second, say) would otherwise be probed at the same phase of its
// cycle every time and, if that phase is a healthy one, never be found silent; with a spread of a
// whole interval, a stall whose period is the interval is probed at independent phases.
func jittered(interval time.Duration) time.Duration {
	return interval/2 + rand.N(interval+1)
}

// probeRound sends GET_MAX_OFFSET to every broker the policy's table holds out of selection, in
// parallel, and feeds each outcome back (RocketMQ's detector, which also clears reachability on a
// failed probe so a dead broker stays out). With Probe.Routed it also probes the brokers the
// policy's routes use that the table does not hold out, and reports the silent ones.
func (r *Runtime) probeRound(policy string, pl *probeLoop) {
	st := r.state.Load()
	ps, ok := st.policies[policy]
	if !ok {
		return
	}
	items := ps.tol.Isolated()
	var watched []Broker
	if ps.Probe.Routed {
		watched = st.routedBrokers(policy, items)
	}
	if len(items) == 0 && len(watched) == 0 {
		return
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
	var topics map[string]string // what each broker's probe asks about, set before any probe starts
	// probe reports whether the broker answered at all (silent: a transport error or no answer in
	// time) and whether the answer was a success.
	probe := func(b Broker, timeout time.Duration, verdict func(silent, good bool, latency time.Duration)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, done := context.WithTimeout(ctx, timeout)
			defer done()
			req := remoting.NewGetMaxOffsetRequest(topics[b.Name], 0)
			start := time.Now()
			resp, err := r.client.Invoke(pctx, b.Addr, req)
			latency := time.Since(start)
			select {
			case <-pl.stop:
				return // the policy changed or went away mid-round; its verdict no longer applies
			default:
			}
			good := err == nil && resp.Code == remoting.Success
			if !good {
				r.log.V(1).Info("probe failed", "policy", policy, "broker", b.Name, "addr", b.Addr, "error", err)
			}
			verdict(err != nil, good, latency)
		}()
	}
	held := make([]Broker, 0, len(items))
	for _, it := range items {
		if b := (Broker{Name: it.Broker, Addr: st.sendAddr(it.Broker)}); b.Addr != "" {
			held = append(held, b) // no address: nothing to probe, or the pod is gone
		}
	}
	topics = st.probeTopics(append(held, watched...))
	for _, b := range held {
		probe(b, pl.timeout, func(_, good bool, latency time.Duration) { ps.tol.ProbeResult(b.Name, good, latency) })
	}
	// A watched broker is given as long to answer as a send attempt. Only silence counts (no
	// connection, or no answer in time): busy or refusing answers are left to the sends, which
	// see what they mean for a message.
	attempt := ps.Retry.SendTimeout
	if ps.Retry.PerAttemptTimeout > 0 {
		attempt = ps.Retry.PerAttemptTimeout
	}
	for _, b := range watched {
		probe(b, attempt, func(silent, _ bool, latency time.Duration) {
			if silent {
				ps.tol.WatchFailed(b.Name, latency)
			}
		})
	}
	wg.Wait()
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

// every runs fn every interval until the runtime closes; the caller has added to r.wg.
func (r *Runtime) every(interval time.Duration, fn func()) {
	defer r.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// expireIsolations lets every fault table end isolations whose time ran out, so that "left
// isolation" events arrive without waiting for a send to touch the broker.
func (r *Runtime) expireIsolations() {
	for _, p := range r.state.Load().policies {
		p.tol.Expire()
	}
}
