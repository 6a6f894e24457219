package producer

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer/nameserver"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/routecache"
)

// DefaultProducerGroup is the producer group the runtime announces when Options.ProducerGroup is empty.
const DefaultProducerGroup = "detour-producer"

// DefaultMaxAsyncInFlight bounds SendAsync calls that have not completed yet.
const DefaultMaxAsyncInFlight = 10000

// Options configures a Runtime.
type Options struct {
	// Client is the remoting client used for every request to a broker; nil means a client with
	// default options, owned (and closed) by the Runtime, which alone receives brokers'
	// transaction checks (AddTransactionChecker). Name servers are asked on a client of
	// the Runtime's own whose frames are bounded by remoting.NameServerMaxFrameSize, so an answer
	// beyond it is refused on its length alone.
	Client *remoting.Client
	// Clock drives the fault tables' isolation timers; nil means real time. Send latencies and
	// deadlines are always measured on the monotonic wall clock.
	Clock fault.Clock
	// Logger receives isolation changes and probe failures; the zero value discards.
	Logger logr.Logger
	// Metrics receives send, attempt and isolation measurements; nil means NopMetrics.
	Metrics Metrics
	// ProducerGroup is put into every send header; "" means DefaultProducerGroup.
	ProducerGroup string
	// MaxAsyncInFlight bounds SendAsync calls in flight; SendAsync waits for a slot (or for its
	// context) beyond it. 0 means DefaultMaxAsyncInFlight.
	MaxAsyncInFlight int
	// HeartbeatInterval is how often every routed broker gets a HEART_BEAT; 0 means
	// DefaultHeartbeatInterval, negative turns heartbeats off.
	HeartbeatInterval time.Duration
	// ExpiryInterval is how often the runtime asks each fault table to expire isolations whose
	// time ran out, so that "left isolation" events are emitted without a send touching the broker;
	// 0 means 100ms.
	ExpiryInterval time.Duration
	// NameServerTimeout bounds one request to a name server (a route query, a look at the
	// cluster); 0 means DefaultNameServerTimeout.
	NameServerTimeout time.Duration
	// CompressThreshold is the body size in bytes from which a message body is sent
	// zlib-compressed, as RocketMQ's compressMsgBodyOverHowmuch; 0 means
	// DefaultCompressThreshold (4 KiB) and a negative value never compresses. A send under
	// WithBodyAsIs never compresses, whatever this says.
	CompressThreshold int
	// UndeclaredTopics bounds the routes kept for topics nobody declared (UseRoute).
	UndeclaredTopics UndeclaredTopicOptions
}

// policyState is a policy's settings (immutable once published) and its long-lived fault table.
type policyState struct {
	Policy
	tol *fault.Tolerance
	gen uint64 // identifies tol in events
}

// snapshot is the runtime state the send path reads. It is never modified after publication;
// writers build a new one under Runtime.mu and swap the pointer.
type snapshot struct {
	brokers map[string]Broker
	// moved holds, by broker, the last move of its pod to a new address (see SetBroker), which
	// routes from name servers that still publish the old address follow (see brokerAddr).
	moved    map[string]addrMove
	policies map[string]*policyState // always holds the default policy under ""
	specs    topicMap[Route]         // routes as pushed, for rebuilding
	routes   topicMap[*route]        // compiled routes by topic
	index    routeIndex              // routes again, for the send path
}

// Runtime is the embedded producer: it holds brokers, routes and policies pushed by the
// controllers and sends messages with RocketMQ 5.x's selection, retry and fault semantics.
type Runtime struct {
	client     *remoting.Client
	ownsClient bool
	// wire carries the send loop's requests: client, or in tests a scripted broker on a virtual
	// clock.
	wire brokerWire
	// sendClock, when set, is the send loop's clock instead of the wall clock, for replays of
	// RocketMQ runs on a virtual clock.
	sendClock fault.Clock
	// tweakRules, when set, alters the rules of every send: the loop differential's canary, a
	// deliberately wrong loop that the differential must tell from RocketMQ's.
	tweakRules func(retryRules) retryRules
	// ns asks name servers, each request waiting at most Options.NameServerTimeout.
	ns         *nameserver.Client
	clock      fault.Clock
	log        logr.Logger
	metrics    Metrics
	group      string
	asyncSlots chan struct{}
	compressAt int // body size from which to compress; negative: never
	// hedges is the budget every policy with hedging on spends its hedges from (hedge.go).
	hedges hedgeBudget

	state  atomic.Pointer[snapshot]
	gens   atomic.Uint64 // numbers fault tables for the event queue
	mu     sync.Mutex    // serialises writers of state and owns probes and restores
	probes map[string]*probeLoop

	// lines caches each broker address's RocketMQ line for timed sends (see lineOf).
	lines sync.Map

	pressureMu sync.Mutex
	pressure   map[string]map[string]BrokerPressure // by policy, by broker: the last poll's figures
	limits     map[string]map[string]polledBroker   // by policy, by broker: busy limits read (pressure.go)
	// restores holds items handed to Restore for a policy not pushed yet; SetPolicy applies them.
	restores map[string][]fault.Item
	// peers holds other replicas' claims by policy (SetPeerClaims), applied again to a table
	// SetPolicy creates.
	peers map[string]map[string]fault.PeerClaim
	// resolvers keep routes of topics resolved from name servers, by topic.
	resolvers map[string]*resolver
	// undeclared keeps the routes of topics nobody declared, in use (UseRoute); cached are their
	// resolvers by key, as installResolved and the refresh kicks find them.
	undeclared *routecache.Cache[*resolver]
	cached     map[string]*resolver
	// refused are the undeclared topics whose first use was refused lately, for reports.
	refused refusalLog
	// podAddrs is the last address pushed for each broker, kept after RemoveBroker, so a pod
	// replaced under the same name (a StatefulSet's restart) is seen to have moved.
	podAddrs map[string]string

	// acl holds the credentials requests are signed with and the brokers' refusals of them.
	acl aclState
	// checks is the transaction check-back: the checkers, the groups heartbeats name, the queue.
	checks checkBack

	events *eventQueue
	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
}

// New creates a Runtime with only the default policy and no brokers or routes.
func New(opts Options) *Runtime {
	r := &Runtime{
		client:    opts.Client,
		clock:     opts.Clock,
		log:       opts.Logger,
		metrics:   opts.Metrics,
		group:     opts.ProducerGroup,
		probes:    make(map[string]*probeLoop),
		pressure:  make(map[string]map[string]BrokerPressure),
		limits:    make(map[string]map[string]polledBroker),
		restores:  make(map[string][]fault.Item),
		peers:     make(map[string]map[string]fault.PeerClaim),
		resolvers: make(map[string]*resolver),
		cached:    make(map[string]*resolver),
		podAddrs:  make(map[string]string),
		stop:      make(chan struct{}),
		checks:    newCheckBack(),
	}
	r.compressAt = compressThreshold(opts.CompressThreshold)
	r.undeclared = r.newUndeclaredCache(opts.UndeclaredTopics)
	if r.client == nil {
		r.client = remoting.NewClient(remoting.ClientOptions{OnRequest: r.serveBrokerRequest})
		r.ownsClient = true
	}
	r.wire = r.client
	r.client.SetCredentials(r.credentialsFor)
	nsTimeout := opts.NameServerTimeout
	if nsTimeout <= 0 {
		nsTimeout = DefaultNameServerTimeout
	}
	r.ns = nameserver.New(nsTimeout)
	if r.metrics == nil {
		r.metrics = NopMetrics{}
	}
	if r.group == "" {
		r.group = DefaultProducerGroup
	}
	slots := opts.MaxAsyncInFlight
	if slots <= 0 {
		slots = DefaultMaxAsyncInFlight
	}
	r.asyncSlots = make(chan struct{}, slots)
	r.events = newEventQueue(r.metrics)

	def, err := DefaultPolicy("").normalize()
	if err != nil {
		// The default policy is built from constants and the RocketMQ5 preset; failing here is a
		// programming error, not an input error.
		panic(fmt.Sprintf("producer: default policy: %v", err))
	}
	r.state.Store(&snapshot{
		brokers:  map[string]Broker{},
		policies: map[string]*policyState{"": r.newPolicyState(def)},
	})

	interval := opts.ExpiryInterval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	r.wg.Add(1)
	go r.every(interval, r.sweepFaultTables)
	r.wg.Add(1)
	go r.checkWorker()
	if hb := opts.HeartbeatInterval; hb >= 0 {
		if hb == 0 {
			hb = DefaultHeartbeatInterval
		}
		r.wg.Add(1)
		id := clientID()
		// A round runs at once, too, when a transaction checker names a new group.
		go r.every(hb, func() { r.heartbeatRound(id) }, r.checks.kick)
	}
	return r
}

// newPolicyState creates a policy's fault table.
func (r *Runtime) newPolicyState(p Policy) *policyState {
	ps := &policyState{Policy: p, gen: r.gens.Add(1)}
	ps.tol = fault.New(r.faultOptions(p, ps.gen))
	return ps
}

// faultOptions translates a policy into fault-table options, tagging changes with the policy name
// and the table's generation.
func (r *Runtime) faultOptions(p Policy, gen uint64) fault.Options {
	name := p.Name
	// The Detour preset's probation after silence: a stall hold ends by probation, not at the
	// next answer, and lasts as long as the broker's trouble (RocketMQ's presets have no
	// probation, and keep their own rules).
	detour := p.Preset == PresetDetour
	var span time.Duration
	if detour {
		span = DetourProbationSpan
	}
	return fault.Options{
		Semantics:          p.Preset.semantics(),
		Table:              p.Table,
		Clock:              r.clock,
		Probing:            p.Probe.Enabled,
		GrowOnRepeat:       p.GrowOnRepeat,
		MaxIsolatedPercent: p.MaxIsolatedPercent,
		RespectPodHealth:   p.RespectPodHealth,
		ProbationProbes:    p.Probe.ProbationProbes,
		StallAfter:         p.StallAfter,
		StallFactor:        fault.StallThresholdFactor,
		StallProbation:     detour,
		ProbationSpan:      span,
		OnChange:           func(c fault.Change) { r.onChange(name, gen, c) },
	}
}

func (r *Runtime) onChange(policy string, gen uint64, c fault.Change) {
	r.metrics.IsolationChanged(policy, c.Broker, c.Isolated, c.Item.Reason)
	if c.Isolated {
		r.log.V(1).Info("broker isolated", "policy", policy, "broker", c.Broker, "reason", c.Item.Reason,
			"latency", c.Item.Latency, "until", c.Item.Until, "reachable", c.Item.Reachable)
	} else {
		r.log.V(1).Info("broker left isolation", "policy", policy, "broker", c.Broker)
	}
	r.events.push(gen, IsolationEvent{Policy: policy, Broker: c.Broker, Isolated: c.Isolated, Item: c.Item, Seq: c.Seq})
}

// update builds and publishes a new snapshot. fn receives a copy whose maps it may replace but must
// not mutate in place (they are shared with the published snapshot); it returns the topics whose
// compiled routes must be rebuilt, or all=true. Callers hold r.mu.
func (r *Runtime) update(fn func(s *snapshot) (topics []string, all bool)) {
	old := r.state.Load()
	s := *old
	topics, all := fn(&s)
	if all || len(topics) > 0 {
		routes := old.routes.edit()
		rebuild := func(topic string) {
			spec, ok := s.specs.Get(topic)
			if !ok {
				routes.Delete(topic)
				return
			}
			var next *rrCounter
			if prev, _ := old.routes.Get(topic); prev != nil {
				next = prev.next // keep the round-robin position across swaps
			}
			routes.Set(topic, buildRoute(spec, s.policyFor(spec.Policy), s.brokers, s.moved, next))
		}
		if all {
			for topic := range s.specs.All() {
				rebuild(topic)
			}
		} else {
			for _, topic := range topics {
				rebuild(topic)
			}
		}
		s.routes = routes.Done()
		s.index = newRouteIndex(s.routes)
	}
	r.state.Store(&s)
	r.rebuildCredentials(&s)
	// Routes may have brought brokers other replicas claim: claims apply to known brokers only.
	for policy, claims := range r.peers {
		if p, ok := s.policies[policy]; ok {
			p.tol.SetPeerClaims(claims)
		}
	}
}

// policyFor resolves a route's policy name; unknown names use the default policy.
func (s *snapshot) policyFor(name string) *policyState {
	if p, ok := s.policies[name]; ok {
		return p
	}
	return s.policies[""]
}

// topicsWhere lists the topics whose route spec satisfies match.
func (s *snapshot) topicsWhere(match func(Route) bool) []string {
	var out []string
	for topic, spec := range s.specs.All() {
		if match(spec) {
			out = append(out, topic)
		}
	}
	return out
}

func routeUsesBroker(name string) func(Route) bool {
	return func(rt Route) bool {
		for _, b := range rt.Brokers {
			if b.Broker == name {
				return true
			}
		}
		return false
	}
}

// SetBroker adds or updates a broker. Its pod state is applied to every policy's fault table, and
// routes that use it are rebuilt, so a pod turning NotReady leaves selection with the next send.
//
// A broker whose pod comes back at a new address, or turns Ready, has its routes' name servers
// asked at once: a broker registers its address as it starts, and routes learn of a restart in
// a new pod without waiting for their next refresh. Until they do, a route that still publishes
// the pod's old address sends to its new one (see addrMove).
func (r *Runtime) SetBroker(b Broker) {
	if b.Name == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var pols []*policyState
	var users []string
	r.update(func(s *snapshot) ([]string, bool) {
		prev, known := s.brokers[b.Name]
		s.brokers = maps.Clone(s.brokers)
		s.brokers[b.Name] = b
		if from := r.podAddrs[b.Name]; from != "" && b.Addr != "" && from != b.Addr {
			s.moved = maps.Clone(s.moved)
			if s.moved == nil {
				s.moved = map[string]addrMove{}
			}
			s.moved[b.Name] = addrMove{from: from, to: b.Addr}
		}
		for _, p := range s.policies {
			pols = append(pols, p)
		}
		users = s.topicsWhere(routeUsesBroker(b.Name))
		if (!known || prev.Addr != b.Addr || (b.Ready && !prev.Ready)) && r.podAddrs[b.Name] != "" {
			r.refreshRoutes(users)
		}
		return users, false
	})
	if b.Addr != "" {
		r.podAddrs[b.Name] = b.Addr
	}
	for _, p := range pols {
		p.tol.SetPodState(b.Name, b.podState())
	}
}

// addrMove is a broker pod's move from one address to another, as SetBroker saw it.
type addrMove struct{ from, to string }

// refreshRoutes asks the name servers of the routes by these keys again at once; routes not
// resolved from name servers are left alone. Callers hold r.mu.
func (r *Runtime) refreshRoutes(keys []string) {
	for _, key := range keys {
		if res := r.sourceOf(key); res != nil {
			res.poke()
		}
	}
}

// RemoveBroker forgets a broker (its pod is gone): routes drop its queues and every fault table
// marks it gone.
func (r *Runtime) RemoveBroker(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pols []*policyState
	found := false
	r.update(func(s *snapshot) ([]string, bool) {
		if _, found = s.brokers[name]; !found {
			return nil, false
		}
		s.brokers = maps.Clone(s.brokers)
		delete(s.brokers, name)
		for _, p := range s.policies {
			pols = append(pols, p)
		}
		return s.topicsWhere(routeUsesBroker(name)), false
	})
	for _, p := range pols {
		p.tol.SetPodState(name, fault.PodGone)
	}
}

// SetRoute adds or replaces a route (by its key: Key, else Topic). It refuses invalid topics,
// duplicate brokers, negative queue counts and queue counts beyond MaxWriteQueues or
// MaxRouteQueues, leaving the previous route in force. A static route ends resolving the topic
// from name servers.
func (r *Runtime) SetRoute(rt Route) error {
	if err := rt.validate(); err != nil {
		return err
	}
	if err := rt.checkBounds(); err != nil {
		return err
	}
	rt.Brokers = append([]BrokerQueues(nil), rt.Brokers...)
	r.mu.Lock()
	defer r.mu.Unlock()
	key := rt.key()
	r.stopResolvingLocked(key)
	r.update(func(s *snapshot) ([]string, bool) {
		s.specs = s.specs.With(key, rt)
		return []string{key}, false
	})
	return nil
}

// RemoveRoute forgets a route by its key (and stops resolving it from name servers); later sends
// by it fail with ErrNoRoute. It reports whether there was a route to forget.
func (r *Runtime) RemoveRoute(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopResolvingLocked(key)
	removed := false
	r.update(func(s *snapshot) ([]string, bool) {
		if _, ok := s.specs.Get(key); !ok {
			return nil, false
		}
		s.specs = s.specs.Without(key)
		removed = true
		return []string{key}, false
	})
	return removed
}

// SetPolicy adds or changes a policy. A changed policy keeps its fault table and everything it has
// learnt; routes that reference it switch to the new settings with the next send. Setting the
// policy named "" replaces the default policy's settings.
func (r *Runtime) SetPolicy(p Policy) error {
	np, err := p.normalize()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps *policyState
	r.update(func(s *snapshot) ([]string, bool) {
		if old, ok := s.policies[np.Name]; ok {
			ps = &policyState{Policy: np, tol: old.tol, gen: old.gen}
			ps.tol.Configure(r.faultOptions(np, ps.gen))
		} else {
			ps = r.newPolicyState(np)
			// A new table learns the pod state of every known broker.
			for _, b := range s.brokers {
				ps.tol.SetPodState(b.Name, b.podState())
			}
		}
		// Routes naming this policy, routes that used the default while it was unknown, and (for
		// the default policy) routes that fall back to it compile against the new settings.
		old := *s
		topics := s.topicsWhere(func(rt Route) bool { return rt.Policy == np.Name || old.policyFor(rt.Policy).Name == np.Name })
		s.policies = maps.Clone(s.policies)
		s.policies[np.Name] = ps
		return topics, false
	})
	if items, ok := r.restores[np.Name]; ok {
		delete(r.restores, np.Name)
		ps.tol.Restore(items)
	}
	if claims, ok := r.peers[np.Name]; ok {
		ps.tol.SetPeerClaims(claims)
	}
	r.syncProbe(ps)
	return nil
}

// RemovePolicy forgets a policy and its fault table; routes that referenced it fall back to the
// default policy. Removing "" resets the default policy to DefaultPolicy("") and keeps its table.
func (r *Runtime) RemovePolicy(name string) {
	if name == "" {
		_ = r.SetPolicy(DefaultPolicy(""))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.restores, name)
	r.update(func(s *snapshot) ([]string, bool) {
		if _, ok := s.policies[name]; !ok {
			return nil, false
		}
		s.policies = maps.Clone(s.policies)
		delete(s.policies, name)
		return s.topicsWhere(func(rt Route) bool { return rt.Policy == name }), false
	})
	r.stopProbe(name)
	r.events.forgetPolicy(name)
}

// Policy returns a policy's effective settings (defaults filled in) and whether it is known.
func (r *Runtime) Policy(name string) (Policy, bool) {
	p, ok := r.state.Load().policies[name]
	if !ok {
		return Policy{}, false
	}
	return p.Policy, true
}

// Isolated lists the brokers a policy's fault table isolates now, sorted by name; nil for an
// unknown policy.
func (r *Runtime) Isolated(policy string) []fault.Item {
	p, ok := r.state.Load().policies[policy]
	if !ok {
		return nil
	}
	return p.tol.Isolated()
}

// OwnIsolated is Isolated without the brokers held only by other replicas' claims: what this
// replica learnt itself, which is what it tells the others.
func (r *Runtime) OwnIsolated(policy string) []fault.Item {
	items := r.Isolated(policy)
	own := items[:0]
	for _, it := range items {
		if !it.Peer {
			own = append(own, it)
		}
	}
	return own
}

// PolicyNames lists the policies the runtime knows, the default policy ("") included.
func (r *Runtime) PolicyNames() []string {
	pols := r.state.Load().policies
	names := make([]string, 0, len(pols))
	for name := range pols {
		names = append(names, name)
	}
	return names
}

// SetPeerClaims replaces what other replicas claim about a policy's brokers (broker identity to
// claim; nil withdraws them all): a claimed broker is out of selection, and listed by Isolated
// with Item.Peer, as long as the claim stands (see fault.Tolerance.SetPeerClaims). Claims for a
// policy not pushed yet apply when SetPolicy brings it.
func (r *Runtime) SetPeerClaims(policy string, claims map[string]fault.PeerClaim) {
	claims = maps.Clone(claims)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(claims) == 0 {
		delete(r.peers, policy)
	} else {
		r.peers[policy] = claims
	}
	if p, ok := r.state.Load().policies[policy]; ok {
		p.tol.SetPeerClaims(claims)
	}
}

// Brokers lists the brokers a policy's fault table knows.
func (r *Runtime) Brokers(policy string) []string {
	p, ok := r.state.Load().policies[policy]
	if !ok {
		return nil
	}
	return p.tol.Brokers()
}

// Restore re-applies isolations saved in status (unexpired ones only, as the fault table decides).
// Items for a policy not pushed yet are kept and applied when SetPolicy brings it.
func (r *Runtime) Restore(policy string, items []fault.Item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.state.Load().policies[policy]; ok {
		p.tol.Restore(items)
		return
	}
	r.restores[policy] = append(r.restores[policy], items...)
}

// RouteInfo describes a topic's compiled route: its queues in selection order, its brokers as
// selection sees them now, and the policy in force. The Topic controller reports it in status.
type RouteInfo struct {
	// Key identifies the route; Topic is the RocketMQ topic it publishes to.
	Key    string
	Topic  string
	Policy string
	Queues []Queue
	// Brokers lists the route's brokers in queue order.
	Brokers []RouteBroker
	// AvailableQueues counts the queues a first attempt may pick right now: pod healthy (when the
	// policy respects pod health) and the broker available in the policy's fault table.
	AvailableQueues int
}

// RouteBroker is one broker of a compiled route.
type RouteBroker struct {
	Name        string
	Addr        string
	WriteQueues int
	// PodOK is false when the policy respects pod health and the pod is not ready or terminating.
	PodOK bool
	// Available and Reachable are the policy's fault-table verdicts at the time of the call.
	Available, Reachable bool
}

// RouteInfo returns the compiled route of a key (a Route's Key, else its topic), as selection
// sees it.
func (r *Runtime) RouteInfo(key string) (RouteInfo, bool) {
	rt := r.state.Load().index.get(key)
	if rt == nil {
		return RouteInfo{}, false
	}
	info := RouteInfo{Key: rt.key, Topic: rt.topic, Policy: rt.policy.Name, Queues: make([]Queue, len(rt.queues))}
	for i, q := range rt.queues {
		info.Queues[i] = Queue{Topic: rt.topic, Broker: q.b.name, QueueID: int(q.id)}
		if i == 0 || rt.queues[i-1].b != q.b {
			info.Brokers = append(info.Brokers, RouteBroker{Name: q.b.name, Addr: q.b.addr, PodOK: q.b.podOK,
				Available: q.b.entry.Available(), Reachable: q.b.entry.Reachable()})
		}
		last := &info.Brokers[len(info.Brokers)-1]
		last.WriteQueues++
		if last.PodOK && last.Available {
			info.AvailableQueues++
		}
	}
	return info, true
}

// SelectQueue picks the queue the next send by key (a Route's Key, else its topic) would use,
// avoiding lastBroker as a retry would, without sending anything. It takes no lock and allocates
// nothing.
func (r *Runtime) SelectQueue(key, lastBroker string) (Queue, bool) {
	rt := r.state.Load().index.get(key)
	if rt == nil {
		return Queue{}, false
	}
	q := rt.pick(lastBroker, lastBroker != "")
	if q == nil {
		return Queue{}, false
	}
	return Queue{Topic: rt.topic, Broker: q.b.name, QueueID: int(q.id)}, true
}

// Events delivers isolation changes of every policy. The channel is buffered (EventBuffer) and is
// never allowed to block a sender: when the reader falls behind, waiting events of the same policy
// and broker coalesce to the latest one (counted by Metrics.EventCoalesced). It is closed by Close.
func (r *Runtime) Events() <-chan IsolationEvent { return r.events.out }

// ErrClosed is returned by sends on a closed Runtime.
var ErrClosed = errors.New("producer: runtime closed")

// Close stops probe and expiry loops, closes the Events channel and, when the Runtime created its
// own client, closes it. Sends in flight finish with whatever the client returns.
func (r *Runtime) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	r.mu.Lock()
	for name := range r.probes {
		r.stopProbe(name)
	}
	r.mu.Unlock()
	close(r.stop)
	r.undeclared.Close()
	r.wg.Wait()
	r.events.close()
	nsErr := r.ns.Close()
	if r.ownsClient {
		return errors.Join(r.client.Close(), nsErr)
	}
	return nsErr
}
