package producer

import (
	"math"
	"math/rand/v2"
)

// Queue selection of RocketMQ's own presets. PresetDetour's selection is route.pick's own (see
// route.go); the presets here reproduce RocketMQ's MQFaultStrategy.selectOneMessageQueue and
// TopicPublishInfo step by step, index arithmetic included, so that a replay of RocketMQ's calls
// picks the same queue at every step (the differential tests prove it against the Java classes).
//
// RocketMQ keeps one index per sending thread and TopicPublishInfo; detour keeps one per route,
// shared by every sender. For one sender the two are the same; for many, RocketMQ's threads each
// walk the queues on their own while detour's senders take turns, which keeps the spread even.

// indexMask clears the sign bit of an index value, as RocketMQ's ThreadLocalIndex does.
const indexMask = 0x7fffffff

// position maps an index value to a queue, as TopicPublishInfo does with the value
// ThreadLocalIndex.incrementAndGet returns.
func position(v, n uint32) uint32 { return (v & indexMask) % n }

// resetValue is what a retry resets the index to: RocketMQ 5.x's ThreadLocalIndex.reset draws
// Math.abs(random.nextInt(Integer.MAX_VALUE)). Replays set rrCounter.seed to RocketMQ's draws.
func (c *rrCounter) resetValue() uint32 {
	if c.seed != nil {
		return c.seed()
	}
	return uint32(rand.Int32N(math.MaxInt32))
}

// pickAs selects a write queue under one of RocketMQ's presets. retry says the attempt is a
// synchronous retry (the send loop passes false for async retries, which RocketMQ does not reset
// the index for).
func (r *route) pickAs(p Preset, last string, retry bool) *queueEntry {
	if len(r.queues) == 0 {
		return nil
	}
	switch p {
	case PresetRocketMQ4:
		return r.pickRocketMQ4()
	case PresetDisabled:
		return r.pickDisabled(last)
	default:
		return r.pickRocketMQ5(last, retry)
	}
}

// pickRocketMQ5 is MQFaultStrategy.selectOneMessageQueue of RocketMQ 5.1.4 to 5.3.x with fault
// tolerance on: on a retry the index is reset at random; then queues whose broker is available and
// not the previous one, then reachable and not the previous one, then any queue (one index step,
// no filter: it may be the previous broker). With pod health respected, brokers whose pods are
// not OK are skipped in the filtered passes, and a pass over healthy pods comes before the last.
func (r *route) pickRocketMQ5(last string, retry bool) *queueEntry {
	if retry {
		r.next.n.Store(r.next.resetValue())
	}
	if q := r.walk(passAvailable, last); q != nil {
		return q
	}
	if q := r.walk(passReachable, last); q != nil {
		return q
	}
	return r.lastPass()
}

// pickDisabled is the same method with fault tolerance off (RocketMQ's default), which never
// resets the index: queues not on the previous broker, then any queue.
func (r *route) pickDisabled(last string) *queueEntry {
	if q := r.walk(passNotLast, last); q != nil {
		return q
	}
	return r.lastPass()
}

// lastPass is RocketMQ's unfiltered round robin, one index step; with pod health respected a pass
// over healthy pods comes first.
func (r *route) lastPass() *queueEntry {
	if r.podFiltered {
		if q := r.walk(passPodOK, ""); q != nil {
			return q
		}
	}
	return &r.queues[position(r.next.n.Add(1), uint32(len(r.queues)))]
}

// walk is one filtered pass of TopicPublishInfo.selectOneMessageQueue(filters...): up to one probe
// per queue, each taking the next index step, returning the first queue that passes. The shared
// index moves by one for the first probe and by the rest when the pass ends, which for one sender
// is the same and for many costs one atomic add per pass. Filters judge brokers, so a rejected
// queue rejects the rest of its broker's block and the walk jumps over it, as long as the index's
// sign bit does not flip inside the block (positions then restart from the masked value).
func (r *route) walk(pass int, last string) *queueEntry {
	qs := r.queues
	n := uint32(len(qs))
	v := r.next.n.Add(1)
	for k := uint32(0); k < n; {
		q := &qs[position(v+k, n)]
		if q.accept(pass, last) {
			if k > 0 {
				r.next.n.Add(k)
			}
			return q
		}
		step := uint32(1)
		if (v+k)&indexMask <= indexMask-(q.rest-1) {
			step = q.rest
		}
		k += step
	}
	r.next.n.Add(n - 1)
	return nil
}

// pickRocketMQ4 is MQFaultStrategy.selectOneMessageQueue of RocketMQ 4.9.x with fault tolerance
// on. It takes one index step and walks the queues from there on a local copy of the index, so
// queues after an isolated broker's block absorb its share, and returns the first whose broker is
// available, whichever broker the previous attempt used. If there is none it asks the table for
// pickOneAtLeast's broker: if the route has write queues on it, it takes one step for a plain
// selection it throws away and one more for a queue id on that broker; if not, the broker's item
// is dropped. Then plain round robin. With pod health respected, the walk skips brokers whose
// pods are not OK, pickOneAtLeast's broker is used only if its pod is OK, and a pass over healthy
// pods comes before the plain one.
func (r *route) pickRocketMQ4() *queueEntry {
	qs := r.queues
	n := int32(len(qs))
	idx := int32(r.next.n.Add(1) & indexMask)
	for i := int32(0); i < n; {
		// Math.abs(index++) % size, in int arithmetic: past MaxInt32 the index is negative and the
		// positions run backwards (Math.abs(MinInt32) is MinInt32, whose position is taken as 0).
		p := abs32(idx) % n
		if p < 0 {
			p = 0
		}
		q := &qs[p]
		if q.b.podOK && q.b.entry.Available() {
			return q
		}
		step := int32(1)
		if rest := int32(q.rest); idx >= 0 && idx <= math.MaxInt32-(rest-1) {
			step = rest
		}
		i += step
		idx += step
	}

	tol := r.policy.tol
	name, ok := tol.PickOneAtLeast()
	if wq := r.writeQueuesOf(name); ok && wq > 0 {
		plain := &qs[position(r.next.n.Add(1), uint32(n))]
		id := (r.next.n.Add(1) & indexMask) % uint32(wq)
		q := r.queueOn(name, id)
		if q == nil {
			// The route names the broker without an address: RocketMQ selects its queue all the
			// same, and the attempt fails (BrokerNotExistError) and isolates the broker.
			return r.addressless(name, id)
		}
		if q.b.podOK {
			return q
		}
		// Its pod is not OK: fall back to the queue RocketMQ drew first.
		if !r.podFiltered {
			return plain
		}
	} else if ok {
		tol.Forget(name)
	}
	return r.lastPass()
}

// addressless is queue id of broker, which the route names without an address. Only
// pickRocketMQ4's last resort selects one, so it is built when needed; it never goes through a
// selection pass, so it has no fault entry.
func (r *route) addressless(broker string, id uint32) *queueEntry {
	return &queueEntry{b: &brokerSlot{name: broker, podOK: true}, id: int32(id), rest: 1}
}

// abs32 is Java's Math.abs(int): the negation of MinInt32 is MinInt32.
func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// writeQueuesOf is the route's write queue count on broker, as TopicPublishInfo.getQueueIdByBroker
// reads it from the route (brokers without an address included), or -1 if the route does not
// name the broker.
func (r *route) writeQueuesOf(broker string) int {
	for _, b := range r.spec.Brokers {
		if b.Broker == broker {
			return b.WriteQueues
		}
	}
	return -1
}

// queueOn finds queue id of broker among the route's compiled queues, or nil.
func (r *route) queueOn(broker string, id uint32) *queueEntry {
	for i := range r.queues {
		if q := &r.queues[i]; q.b.name == broker {
			if id >= q.rest {
				return nil
			}
			return &r.queues[i+int(id)]
		}
	}
	return nil
}
