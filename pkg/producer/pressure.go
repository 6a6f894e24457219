package producer

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// The pressure poll: with Pressure.Enabled, each probe round of a policy also asks the brokers its
// routes send to for their runtime table (GET_BROKER_RUNTIME_INFO) and their busy limits
// (GET_BROKER_CONFIG), and holds out for a while those whose send path is pressed. What each
// broker said is kept for status and metrics (Pressure, AllPressure).

// pollPressure asks every broker in brokers for its runtime table, in parallel (each on wg), and
// holds out for hold those whose send path's figures cross the policy's thresholds, tightened to
// halfway to the broker's own busy limits (see pressed), and those pressed within the last
// pressureCalmPolls polls (see polledBroker.stillHeld). What each broker said is kept for
// Pressure, the figures of one poll replacing the last's; a broker that does not answer in time,
// or answers what cannot be read, is left to the probes.
func (r *Runtime) pollPressure(ctx context.Context, wg *sync.WaitGroup, policy string, ps *policyState, brokers []Broker, timeout, hold time.Duration) {
	figures := make(map[string]BrokerPressure, len(brokers))
	limits := r.limitsToKeep(policy, brokers)
	var mu sync.Mutex
	var polled sync.WaitGroup
	for _, b := range brokers {
		polled.Add(1)
		go func() {
			defer polled.Done()
			pctx, done := context.WithTimeout(ctx, timeout)
			defer done()
			mu.Lock()
			known := limits[b.Name]
			mu.Unlock()
			fig, learnt, ok := r.pollBroker(pctx, policy, ps, b, known)
			held := learnt.recentlyPressed()
			if ok {
				held = learnt.stillHeld(fig.Pressed)
			}
			mu.Lock()
			limits[b.Name] = learnt
			if ok {
				figures[b.Name] = fig
			}
			mu.Unlock()
			if held {
				if fig.Pressed {
					// Published before they hold the broker out, so whoever sees the isolation
					// (status, metrics) finds the figures that caused it.
					r.notePressure(policy, fig)
				}
				ps.tol.Pressured(b.Name, hold)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		polled.Wait()
		r.pressureMu.Lock()
		r.pressure[policy] = figures
		r.limits[policy] = limits
		r.pressureMu.Unlock()
	}()
}

// pollBroker asks one broker for its runtime table and, when due (see polledBroker.due), for its
// busy limits, and judges its figures against the policy's thresholds and those limits; a broker
// with a limit of 0 is sampled up to zeroLimitSamples times. It returns the figures (false when
// no table could be had) and what to keep of the broker.
func (r *Runtime) pollBroker(ctx context.Context, policy string, ps *policyState, b Broker, known polledBroker) (BrokerPressure, polledBroker, bool) {
	learnt := known.aged()
	p, ok := r.runtimeFigures(ctx, policy, b)
	if !ok {
		return BrokerPressure{}, learnt, false
	}
	if learnt.due(p) {
		learnt = r.readLimits(ctx, policy, b, learnt)
	}
	fig := BrokerPressure{Broker: b.Name, BrokerPressure: p, Limits: learnt.limits}
	fig.Pressed = ps.Pressure.pressed(p, fig.Limits)
sampling:
	for i := 1; i < zeroLimitSamples && !fig.Pressed && refusesAnyWait(fig.Limits); i++ {
		t := time.NewTimer(zeroLimitSpacing)
		select {
		case <-ctx.Done():
			t.Stop()
			break sampling
		case <-t.C:
		}
		if p, ok = r.runtimeFigures(ctx, policy, b); !ok {
			break
		}
		fig.BrokerPressure, fig.Pressed = p, ps.Pressure.pressed(p, fig.Limits)
	}
	fig.At = time.Now()
	return fig, learnt, true
}

// runtimeFigures asks b for its runtime table and reads its send path's figures; false when it
// does not answer in time or answers what cannot be read.
func (r *Runtime) runtimeFigures(ctx context.Context, policy string, b Broker) (remoting.BrokerPressure, bool) {
	resp, err := r.client.Invoke(ctx, b.Addr, remoting.NewGetBrokerRuntimeInfoRequest())
	if err != nil {
		return remoting.BrokerPressure{}, false
	}
	r.noteAnswer("", b.Addr, b.Name, "", remoting.GetBrokerRuntimeInfo, resp)
	table, err := remoting.ParseBrokerRuntimeInfo(resp)
	if err != nil {
		r.log.V(1).Info("runtime info refused", "policy", policy, "broker", b.Name, "error", err)
		return remoting.BrokerPressure{}, false
	}
	return remoting.PressureOf(table), true
}

// notePressure records one broker's figures at once, ahead of the poll's replacing the policy's
// figures as a whole when every broker has answered or timed out.
func (r *Runtime) notePressure(policy string, fig BrokerPressure) {
	r.pressureMu.Lock()
	defer r.pressureMu.Unlock()
	if r.pressure[policy] == nil {
		r.pressure[policy] = make(map[string]BrokerPressure)
	}
	r.pressure[policy][fig.Broker] = fig
}

// BrokerPressure is what a broker last said of its send path (GET_BROKER_RUNTIME_INFO), for
// status and metrics.
type BrokerPressure struct {
	Broker string
	remoting.BrokerPressure
	// Limits are the broker's own busy limits as last read (GET_BROKER_CONFIG); a limit never
	// read is -1, and the policy's thresholds alone judge its figure.
	Limits remoting.BrokerLimits
	// At is when the figures came; Pressed says whether they crossed the policy's thresholds,
	// tightened to halfway to Limits.
	At      time.Time
	Pressed bool
}

// Pressure returns what the routed brokers of a policy with Pressure.Enabled said in the last
// poll, by broker name; brokers that did not answer are missing.
func (r *Runtime) Pressure(policy string) []BrokerPressure {
	r.pressureMu.Lock()
	defer r.pressureMu.Unlock()
	out := make([]BrokerPressure, 0, len(r.pressure[policy]))
	for _, f := range r.pressure[policy] {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Broker < out[j].Broker })
	return out
}

// AllPressure returns Pressure for every policy that polls, by policy name.
func (r *Runtime) AllPressure() map[string][]BrokerPressure {
	r.pressureMu.Lock()
	names := make([]string, 0, len(r.pressure))
	for name := range r.pressure {
		names = append(names, name)
	}
	r.pressureMu.Unlock()
	out := make(map[string][]BrokerPressure, len(names))
	for _, name := range names {
		out[name] = r.Pressure(name)
	}
	return out
}

// limitsRereadPolls is how many pressure polls a broker's busy limits are trusted for before they
// are read again. They change only through updateBrokerConfig, so they are read every other poll;
// a broker whose figures show sends waiting has them read at every poll (see due), where a limit
// lowered at run time matters at once. Every fourth poll was too seldom for a limit lowered under
// load: a loaded broker shows an empty queue in most snapshots, and the busy benchmark's watch
// took 1.0-1.8 s from the change to the hold.
const limitsRereadPolls = 2

// polledBroker is what the pressure poll keeps of one broker between polls: its busy limits as
// last read and how many polls in a row found it calm.
type polledBroker struct {
	limits remoting.BrokerLimits
	// read says whether a read was ever tried; sinceRead counts the polls since the last try.
	read      bool
	sinceRead int
	// pressedBefore says the broker was ever found pressed; calm counts the polls since.
	pressedBefore bool
	calm          int
}

// pressureCalmPolls is how many polls after a pressed one renew the broker's hold even though they
// find it calm; the next calm poll in a row leaves the hold to run out. A broker refusing as busy
// empties its queue between a poll's snapshots (a broker whose limit is 0 sweeps it every 10 ms:
// a real 5.5.0 broker under the busy benchmark's load, 32 senders of 4 KiB, showed an empty
// queue in about 7 snapshots in 10), so one calm poll says little.
const pressureCalmPolls = 2

// stillHeld notes whether this poll found the broker pressed and reports whether its hold should
// be extended: pressed now, or pressed within the last pressureCalmPolls polls.
func (l *polledBroker) stillHeld(pressed bool) bool {
	if pressed {
		l.pressedBefore, l.calm = true, 0
		return true
	}
	l.calm++
	return l.recentlyPressed()
}

// recentlyPressed reports whether the broker was found pressed within the last pressureCalmPolls
// polls. A poll the broker left unanswered counts neither way: a broker short of CPU under load
// answers its runtime table late, which says nothing of calm, so its hold is extended.
func (l *polledBroker) recentlyPressed() bool {
	return l.pressedBefore && l.calm <= pressureCalmPolls
}

// zeroLimitSamples is how many snapshots of its runtime table a poll takes of a broker with a
// limit of 0, zeroLimitSpacing apart, until one shows pressure: such a broker refuses whatever
// waits, and its fast-failure sweep empties the queue every 10 ms, so one snapshot an interval
// sees its waits only at an instant.
const (
	zeroLimitSamples = 4
	zeroLimitSpacing = 25 * time.Millisecond
)

// refusesAnyWait reports whether a limit of the broker is 0.
func refusesAnyWait(l remoting.BrokerLimits) bool {
	return l.SendQueueWaitMillis == 0 || l.PageCacheBusyMillis == 0
}

// unknownLimits are the limits of a broker whose configuration was never read.
var unknownLimits = remoting.BrokerLimits{SendQueueWaitMillis: -1, PageCacheBusyMillis: -1}

// aged returns l one poll older; a broker never read has unknown limits.
func (l polledBroker) aged() polledBroker {
	if !l.read {
		l.limits = unknownLimits
	}
	l.sinceRead++
	return l
}

// due reports whether the limits should be read in this poll: never tried, trusted for
// limitsRereadPolls polls already, or the figures show something waiting, where a lowered limit
// would make the broker refuse what the policy's thresholds let through.
func (l polledBroker) due(p remoting.BrokerPressure) bool {
	waiting := p.SendQueueSize > 0 || p.SendQueueHeadWaitMillis > 0 || p.PageCacheLockMillis > 0
	return !l.read || l.sinceRead >= limitsRereadPolls || waiting
}

// readLimits asks b for its configuration (GET_BROKER_CONFIG) and returns the limits it gives. A
// read that fails keeps the limits last read (they change only when someone changes them), or
// leaves them unknown, so the policy's thresholds alone apply; either way the next try waits
// limitsRereadPolls polls unless the figures show sends waiting.
func (r *Runtime) readLimits(ctx context.Context, policy string, b Broker, known polledBroker) polledBroker {
	next := known
	next.read, next.sinceRead = true, 0
	if !known.read {
		next.limits = unknownLimits
	}
	resp, err := r.client.Invoke(ctx, b.Addr, remoting.NewGetBrokerConfigRequest())
	if err == nil {
		r.noteAnswer("", b.Addr, b.Name, "", remoting.GetBrokerConfig, resp)
		var cfg remoting.BrokerConfig
		if cfg, err = remoting.ParseBrokerConfig(resp); err == nil {
			next.limits = remoting.LimitsOf(cfg)
		}
	}
	switch {
	case err != nil:
		r.log.V(1).Info("broker config unread", "policy", policy, "broker", b.Name, "error", err)
	case next.limits != known.limits:
		r.log.V(1).Info("broker busy limits", "policy", policy, "broker", b.Name,
			"sendQueueWaitMillis", next.limits.SendQueueWaitMillis, "pageCacheBusyMillis", next.limits.PageCacheBusyMillis)
	}
	return next
}

// limitsToKeep returns the policy's limits of the brokers it is about to poll, so limits of
// brokers that left its routes are dropped with the poll.
func (r *Runtime) limitsToKeep(policy string, brokers []Broker) map[string]polledBroker {
	r.pressureMu.Lock()
	defer r.pressureMu.Unlock()
	out := make(map[string]polledBroker, len(brokers))
	for _, b := range brokers {
		if l, ok := r.limits[policy][b.Name]; ok {
			out[b.Name] = l
		}
	}
	return out
}
