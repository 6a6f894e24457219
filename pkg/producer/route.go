package producer

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/detourmq/detour/pkg/fault"
)

// Broker is a broker master as the controllers see it: its RocketMQ name, its address and the
// state of its pod.
type Broker struct {
	// Name is the RocketMQ broker name; routes and fault tables key on it.
	Name string
	// Addr is host:port of the broker's main listener.
	Addr string
	// Ready mirrors the pod's Ready condition.
	Ready bool
	// Terminating is set once the pod has a deletion timestamp.
	Terminating bool
}

// podState maps a broker's pod flags to the fault package's pod state; terminating wins over ready.
func (b Broker) podState() fault.PodState {
	switch {
	case b.Terminating:
		return fault.PodTerminating
	case !b.Ready:
		return fault.PodNotReady
	default:
		return fault.PodReady
	}
}

// BrokerQueues says how many write queues a topic has on one broker.
type BrokerQueues struct {
	Broker      string
	WriteQueues int
	// Addr, when set, is the broker's address as the name server publishes it; it wins over the
	// address of a Broker pushed with SetBroker, which then only contributes pod health. Routes
	// resolved from name servers set it; a broker with neither is left out of the route.
	Addr string
}

// Route is a topic's publishing route: write queues on brokers and the policy that governs them.
type Route struct {
	// Key identifies the route; "" means Topic. Routes with distinct keys may publish to the same
	// RocketMQ topic with brokers and policies of their own (two tenants that both name their topic
	// TopicTest); SendRoute picks one by key.
	Key     string
	Topic   string
	Brokers []BrokerQueues
	// Policy names the fault policy; "" or a policy the runtime does not know means the default
	// policy.
	Policy string
	// MetricsTopic, when set, is the topic label the route's sends are counted under instead of
	// Topic: routes of undeclared topics share one per Cluster, so that the series stay as many
	// as the Clusters, however many topics clients use.
	MetricsTopic string
}

// key is the route's identity.
func (rt Route) key() string {
	if rt.Key != "" {
		return rt.Key
	}
	return rt.Topic
}

// validate refuses routes that RocketMQ could not publish to as given.
func (rt Route) validate() error {
	if err := CheckTopic(rt.Topic); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	seen := make(map[string]bool, len(rt.Brokers))
	for _, b := range rt.Brokers {
		if b.Broker == "" {
			return fmt.Errorf("route %s: empty broker name", rt.Topic)
		}
		if seen[b.Broker] {
			return fmt.Errorf("route %s: broker %s listed twice", rt.Topic, b.Broker)
		}
		seen[b.Broker] = true
		if b.WriteQueues < 0 {
			return fmt.Errorf("route %s: broker %s has negative write queues %d", rt.Topic, b.Broker, b.WriteQueues)
		}
	}
	return nil
}

// Queue names one write queue, as RocketMQ's MessageQueue does.
type Queue struct {
	Topic   string
	Broker  string
	QueueID int
}

// brokerSlot is one broker as a route sees it, frozen in an immutable snapshot.
type brokerSlot struct {
	name  string
	addr  string
	entry *fault.Entry
	// podOK is false when the policy respects pod health and the pod is not ready or terminating.
	podOK bool
}

// queueEntry is one write queue of a route.
type queueEntry struct {
	b  *brokerSlot
	id int32
	// rest counts the queues from this one to the end of its broker's block (itself included).
	// Every filter judges brokers, not queues, so a rejected queue rejects the rest of its block
	// and selection jumps over it: a pass costs one check per broker, not per queue.
	rest uint32
}

// rrCounter is a route's round-robin index, alone on its cache line so that counters of
// different routes never share one.
type rrCounter struct {
	_ [64]byte
	n atomic.Uint32
	// seed, when set, draws the values RocketMQ5 retries reset the index to (replays of RocketMQ
	// runs set it); nil means random draws.
	seed func() uint32
	_    [52]byte
}

// route is the immutable, precomputed form of a Route that the send path reads without locks.
type route struct {
	key   string
	topic string
	// metricTopic is the topic label of the route's sends (Route.MetricsTopic, else topic).
	metricTopic string
	spec        Route
	policy      *policyState
	queues      []queueEntry
	// podFiltered is true when some queue's pod is not OK; selection then needs the extra
	// pod-agnostic pass.
	podFiltered bool
	next        *rrCounter
}

// buildRoute orders queues as RocketMQ's topicRouteData2TopicPublishInfo does: brokers sorted by
// name, queue ids ascending. Brokers without a known address are left out, as RocketMQ leaves out
// brokers without a master.
func buildRoute(spec Route, pol *policyState, brokers map[string]Broker, moved map[string]addrMove, next *rrCounter) *route {
	bs := slices.Clone(spec.Brokers)
	slices.SortFunc(bs, func(a, b BrokerQueues) int { return cmp.Compare(a.Broker, b.Broker) })
	n := 0
	for _, b := range bs {
		if brokerAddr(b, brokers, moved) != "" {
			n += b.WriteQueues
		}
	}
	if next == nil {
		next = new(rrCounter)
		// RocketMQ starts each index at a random value so producers do not all hit queue 0 first.
		next.n.Store(rand.Uint32())
	}
	r := &route{key: spec.key(), topic: spec.Topic, metricTopic: cmp.Or(spec.MetricsTopic, spec.Topic), spec: spec, policy: pol,
		queues: make([]queueEntry, 0, n), next: next}
	for _, b := range bs {
		addr := brokerAddr(b, brokers, moved)
		if addr == "" || b.WriteQueues == 0 {
			continue
		}
		// A broker known only from the name server has no pod to judge: fault data alone routes it.
		br, known := brokers[b.Broker]
		slot := &brokerSlot{
			name:  b.Broker,
			addr:  addr,
			entry: pol.tol.Entry(b.Broker),
			podOK: !pol.RespectPodHealth || !known || (br.Ready && !br.Terminating),
		}
		if !slot.podOK {
			r.podFiltered = true
		}
		for i := 0; i < b.WriteQueues; i++ {
			r.queues = append(r.queues, queueEntry{b: slot, id: int32(i), rest: uint32(b.WriteQueues - i)})
		}
	}
	return r
}

// brokerAddr is where a route sends to a broker: the address the route carries (from a name
// server), else the address of the pushed Broker. A route that carries the address the broker's
// pod has moved away from is stale (its name servers have not been asked since the broker
// registered from its new pod): the pod's new address wins until they publish another. An
// address the name servers publish that no pod of the broker ever had (a broker that registers
// a host address or a Service) is never replaced.
func brokerAddr(b BrokerQueues, brokers map[string]Broker, moved map[string]addrMove) string {
	if b.Addr != "" {
		if m, ok := moved[b.Broker]; ok && m.from == b.Addr {
			return m.to
		}
		return b.Addr
	}
	return brokers[b.Broker].Addr
}

// Selection passes, in RocketMQ 5.x's order with pod health folded in. RocketMQ's last pass is
// plain round robin, which may hand a retry the broker that just failed although another broker
// is just as isolated; PresetDetour's passNotLast prefers a different broker there and changes
// nothing else (RocketMQ's presets skip it; PresetDisabled's first pass is passNotLast). A
// PresetDetour retry after a broker's connection failed in the send runs the passes in
// pickAvoiding, which puts that broker after every other, pod health notwithstanding.
const (
	passAvailable = iota // pod OK, available, not the last broker (PresetDetour: nor held for the topic)
	passReachable        // pod OK, reachable, not the last broker
	passNotLast          // pod OK, not the last broker
	passPodOK            // pod OK (RocketMQ's unfiltered pass, minus unhealthy pods)
	passAny              // anything, only when every healthy pod is gone from the route
)

func (q *queueEntry) accept(pass int, last string) bool {
	b := q.b
	switch pass {
	case passAvailable:
		return b.podOK && b.name != last && b.entry.Available()
	case passReachable:
		return b.podOK && b.name != last && b.entry.Reachable()
	case passNotLast:
		return b.podOK && b.name != last
	case passPodOK:
		return b.podOK
	default:
		return true
	}
}

// accepts is accept under PresetDetour, whose first pass also skips a broker held out for the
// route's topic (it refused the topic as TOPIC_NOT_EXIST: see fault.Tolerance.RefusedTopic). The
// later passes may still pick it, as they pick an isolated broker when nothing else is left.
func (r *route) accepts(q *queueEntry, pass int, last string) bool {
	return q.accept(pass, last) && (pass != passAvailable || !q.b.entry.HeldFor(r.topic))
}

// pick selects a write queue under the route's preset; what follows is PresetDetour's selection,
// RocketMQ 5.x's MQFaultStrategy with two differences. The first attempt of a send
// advances the route's shared index; like RocketMQ's per-thread index, every probe of a pass
// consumes one step, so queues behind an isolated broker do not absorb its share. Retries
// (random=true) start at a random position instead: RocketMQ resets its per-thread index there, and
// resetting a shared index would disturb every other sender's spread.
//
// One shared index per route (not one per goroutine or per P) keeps the spread within one message
// per queue across all concurrent senders, which a per-thread index cannot promise; the index
// lives alone on its cache line, so the only contention is that one atomic add.
//
// pick takes no lock and allocates nothing; it returns nil only for a route without queues.
func (r *route) pick(last string, random bool) *queueEntry {
	if p := r.policy.Preset; p != PresetDetour {
		return r.pickAs(p, last, random) // RocketMQ's own selection, see select.go
	}
	qs := r.queues
	n := uint32(len(qs))
	if n == 0 {
		return nil
	}
	var start uint32
	if random {
		start = rand.Uint32()
	} else {
		start = r.next.n.Add(1)
	}
	i := start % n
	// Fast path: the queue the index points at passes the first filter, which is every send while
	// no broker is isolated or unhealthy.
	if q := &qs[i]; q.b.podOK && q.b.name != last && q.b.entry.Available() && !q.b.entry.HeldFor(r.topic) {
		return q
	}
	return r.pickSlow(last, random, i)
}

// pickSlow finishes the first pass after queue i was rejected and runs the remaining passes.
// Jumping over a rejected broker's block counts every queue jumped as a probe, so the shared index
// moves exactly as if each had been checked.
func (r *route) pickSlow(last string, random bool, i uint32) *queueEntry {
	qs := r.queues
	n := uint32(len(qs))
	passes := passPodOK + 1
	if r.podFiltered {
		passes = passAny + 1
	}
	k := qs[i].rest // probes already made in this pass
	// Blocks end at queue boundaries and the last block ends at n, so a jump lands at most on n.
	if i += qs[i].rest; i == n {
		i = 0
	}
	for pass := passAvailable; pass < passes; pass++ {
		if pass == passNotLast && last == "" {
			continue // same as passPodOK on a first attempt
		}
		if pass > passAvailable {
			k = 0
			if random {
				i = rand.Uint32() % n
			} else {
				i = r.next.n.Add(1) % n
			}
		}
		for k < n {
			q := &qs[i]
			if r.accepts(q, pass, last) {
				if k > 0 && !random {
					r.next.n.Add(k)
				}
				return q
			}
			k += q.rest
			if i += q.rest; i == n {
				i = 0
			}
		}
		if !random {
			r.next.n.Add(n - 1)
		}
	}
	return nil
}

// pickAvoiding is PresetDetour's selection for a retry that must avoid brokers this send has
// already met at their worst: brokers that refused the message as MESSAGE_ILLEGAL, and broker
// addresses whose connection failed (disconnected: refused, reset or closed by the broker).
//
// A refusal of the message is answered by another broker's store and never by the same refusal
// again: those brokers are never picked, and pickAvoiding returns nil when every broker of the
// route refused the message. An address whose connection just failed is picked again only when no
// other broker is left, whatever the other brokers' pods say: a NotReady or terminating pod's
// broker may still answer (a pod turns NotReady when a slow probe misses, and a terminating
// broker serves until its process exits) and its refusal costs no more, while the disconnected
// address has just shown it will not. So a broker restarting behind a Ready pod does not take
// every retry of a send while another broker answers. Disconnection is judged by address, not
// by name: a broker the route now finds at a new address (restarted in a new pod) is tried there.
//
// The path is rare, so it walks the queues plainly.
func (r *route) pickAvoiding(last string, refusals []messageRefusal, disconnected []string) *queueEntry {
	if q := r.walkAvoiding(last, refusals, disconnected); q != nil || len(disconnected) == 0 {
		return q
	}
	// Only disconnected addresses (or refusers of the message) are left: they get pick's passes,
	// as a broker that failed for any other reason would.
	return r.walkAvoiding(last, refusals, nil)
}

// walkAvoiding runs pick's passes from a random position over the brokers that neither refused
// the message nor sit at a disconnected address; the last pass takes any pod.
func (r *route) walkAvoiding(last string, refusals []messageRefusal, disconnected []string) *queueEntry {
	qs := r.queues
	n := uint32(len(qs))
	if n == 0 {
		return nil
	}
	for pass := passAvailable; pass <= passAny; pass++ {
		i := rand.Uint32() % n
		// A random start may fall inside a block; a jump from there ends at the block's end, so
		// the walk still visits every broker once.
		for k := uint32(0); k < n; {
			q := &qs[i]
			if r.accepts(q, pass, last) && !refusedBy(refusals, q.b.name) && !slices.Contains(disconnected, q.b.addr) {
				return q
			}
			k += q.rest
			if i += q.rest; i == n {
				i = 0
			}
		}
	}
	return nil
}

// hasBrokerBesides reports whether the route has a broker that refused none of refusals.
func (r *route) hasBrokerBesides(refusals []messageRefusal) bool {
	for i := 0; i < len(r.queues); i += int(r.queues[i].rest) {
		if !refusedBy(refusals, r.queues[i].b.name) {
			return true
		}
	}
	return false
}

// smallRouteIndex is the most topics the route index scans linearly. Up to this size comparing
// strings (length first) beats hashing the topic for a map lookup, which costs about as much as a
// whole selection.
const smallRouteIndex = 8

// routeIndex finds a topic's compiled route on the send path.
type routeIndex struct {
	small []*route
	big   topicMap[*route]
	isBig bool
}

func newRouteIndex(routes topicMap[*route]) routeIndex {
	if routes.Len() > smallRouteIndex {
		return routeIndex{big: routes, isBig: true}
	}
	small := make([]*route, 0, routes.Len())
	for _, rt := range routes.All() {
		small = append(small, rt)
	}
	return routeIndex{small: small}
}

func (x *routeIndex) get(key string) *route {
	if x.isBig {
		rt, _ := x.big.Get(key)
		return rt
	}
	for _, rt := range x.small {
		if len(rt.key) == len(key) && rt.key == key {
			return rt
		}
	}
	return nil
}
