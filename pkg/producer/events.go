package producer

import (
	"sync"
	"sync/atomic"

	"github.com/detourmq/detour/pkg/fault"
)

// IsolationEvent reports that a broker entered or left isolation in one policy's fault table.
type IsolationEvent struct {
	// Policy is the policy's name ("" for the default policy).
	Policy string
	// Broker is the broker name.
	Broker string
	// Isolated is true when the broker entered isolation, false when it left.
	Isolated bool
	// Item is the broker's fault state at the time of the change.
	Item fault.Item
	// Seq orders the changes of one policy's table; events that arrive after a later one for the
	// same broker are dropped, so a reader never goes back to an older state.
	Seq uint64
}

// EventBuffer is the capacity of the Events channel.
const EventBuffer = 256

// eventKey identifies one broker in one policy's table. The table's generation is part of the
// key: a policy removed and pushed again gets a new table whose sequence numbers start over.
type eventKey struct {
	gen            uint64
	policy, broker string
}

type pendingEvent struct {
	key eventKey
	ev  IsolationEvent
}

// eventQueue delivers isolation events without ever blocking the sender that caused them.
//
// Events go straight into the buffered channel while it has room. Once the reader falls behind,
// events wait in a pending list that holds at most one event per (policy, broker): a newer event
// for the same broker replaces the waiting one in place (counted as coalesced). A reader therefore
// may miss intermediate flips but always ends with every broker's latest state, in the order the
// brokers first changed, and the memory held is bounded by policies × brokers.
type eventQueue struct {
	out     chan IsolationEvent
	metrics Metrics

	mu       sync.Mutex
	pending  []pendingEvent
	index    map[eventKey]int
	lastSeq  map[eventKey]uint64 // highest Seq accepted per broker
	inflight bool                // the pump holds an event it took from pending and has not delivered yet
	closed   bool

	wake      chan struct{}
	done      chan struct{}
	stopped   chan struct{}
	coalesced atomic.Uint64
}

func newEventQueue(m Metrics) *eventQueue {
	q := &eventQueue{
		out:     make(chan IsolationEvent, EventBuffer),
		metrics: m,
		index:   make(map[eventKey]int),
		lastSeq: make(map[eventKey]uint64),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go q.pump()
	return q
}

func (q *eventQueue) push(gen uint64, ev IsolationEvent) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	k := eventKey{gen, ev.Policy, ev.Broker}
	// Fault tables call back outside their lock, so two changes of one broker can arrive in
	// either order; the later state wins.
	if last, ok := q.lastSeq[k]; ok && ev.Seq <= last {
		q.mu.Unlock()
		return
	}
	q.lastSeq[k] = ev.Seq
	// The direct path is only safe when nothing older is waiting, or the new event would overtake it.
	if len(q.pending) == 0 && !q.inflight {
		select {
		case q.out <- ev:
			q.mu.Unlock()
			return
		default:
		}
	}
	if i, ok := q.index[k]; ok {
		q.pending[i].ev = ev
		q.mu.Unlock()
		q.coalesced.Add(1)
		q.metrics.EventCoalesced(ev.Policy, ev.Broker)
		return
	}
	q.index[k] = len(q.pending)
	q.pending = append(q.pending, pendingEvent{k, ev})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pump moves pending events into the channel, blocking on the reader instead of on senders.
func (q *eventQueue) pump() {
	defer close(q.stopped)
	for {
		select {
		case <-q.wake:
		case <-q.done:
			return
		}
		for {
			q.mu.Lock()
			if len(q.pending) == 0 {
				q.mu.Unlock()
				break
			}
			next := q.pending[0]
			ev := next.ev
			copy(q.pending, q.pending[1:])
			q.pending = q.pending[:len(q.pending)-1]
			delete(q.index, next.key)
			for k, i := range q.index {
				q.index[k] = i - 1
			}
			q.inflight = true
			q.mu.Unlock()

			select {
			case q.out <- ev:
			case <-q.done:
				return
			}
			q.mu.Lock()
			q.inflight = false
			q.mu.Unlock()
		}
	}
}

// forgetPolicy drops what the queue remembers about a removed policy's table.
func (q *eventQueue) forgetPolicy(policy string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k := range q.lastSeq {
		if k.policy == policy {
			delete(q.lastSeq, k)
		}
	}
}

// close stops delivery and closes the channel; later pushes are dropped.
func (q *eventQueue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	close(q.done)
	<-q.stopped
	close(q.out)
}
