package producer

import (
	"context"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

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
