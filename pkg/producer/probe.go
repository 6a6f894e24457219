package producer

import (
	"context"
	"sort"
	"sync"
	"time"

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
	t := time.NewTicker(pl.interval)
	defer t.Stop()
	for {
		select {
		case <-pl.stop:
			return
		case <-t.C:
			r.probeRound(policy, pl)
		}
	}
}

// probeRound sends GET_MAX_OFFSET to every broker the policy's table holds out of selection, in
// parallel, and feeds each outcome back (RocketMQ's detector, which also clears reachability on a
// failed probe so a dead broker stays out).
func (r *Runtime) probeRound(policy string, pl *probeLoop) {
	st := r.state.Load()
	ps, ok := st.policies[policy]
	if !ok {
		return
	}
	items := ps.tol.Isolated()
	if len(items) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), pl.timeout)
	defer cancel()
	go func() {
		select {
		case <-pl.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, it := range items {
		b := Broker{Name: it.Broker, Addr: st.sendAddr(it.Broker)}
		if b.Addr == "" {
			continue // nothing to probe: no address, or the pod is gone
		}
		topic := st.probeTopic(b.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := remoting.NewGetMaxOffsetRequest(topic, 0)
			start := time.Now()
			resp, err := r.client.Invoke(ctx, b.Addr, req)
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
			ps.tol.ProbeResult(b.Name, good, latency)
		}()
	}
	wg.Wait()
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

// probeTopic picks the topic a probe asks about: the first (by name) routed to the broker, as
// RocketMQ's detector asks about a topic it publishes to; the broker answers for unknown topics too.
func (s *snapshot) probeTopic(broker string) string {
	var topics []string
	for _, spec := range s.specs.All() {
		if routeUsesBroker(broker)(spec) {
			topics = append(topics, spec.Topic)
		}
	}
	if len(topics) == 0 {
		return defaultTopicKey
	}
	sort.Strings(topics)
	return topics[0]
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
