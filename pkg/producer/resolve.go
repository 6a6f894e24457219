package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/producer/nameserver"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// Route refresh bounds. RocketMQ clients poll their name servers every 30 s
// (pollNameServerInterval); a shorter interval follows drains and master moves sooner.
const (
	DefaultRouteRefresh = 30 * time.Second
	MinRouteRefresh     = time.Second
	// DefaultNameServerTimeout bounds one request to a name server, as RocketMQ's client waits
	// for GET_ROUTEINFO_BY_TOPIC.
	DefaultNameServerTimeout = 3 * time.Second
)

// NameServerRoute asks the runtime to keep a topic's route as RocketMQ's name servers publish it,
// as a RocketMQ client does: asked on first use and every Refresh, name servers tried in turn from
// the one that answered last, the last good route kept while none answers.
type NameServerRoute struct {
	// Key identifies the route as Route.Key does; "" means Topic.
	Key   string
	Topic string
	// Brokers is the scope the runtime names the route's brokers in: a broker the name servers
	// publish is Brokers.Broker(its name), so that brokers of different clusters or tenants that
	// share a name stay apart; the zero Scope uses the names as published.
	Brokers scope.Scope
	// NameServers are host:port addresses of one cluster's name servers.
	NameServers []string
	// Policy names the fault policy; "" means the default policy.
	Policy string
	// Refresh is the interval between route queries; 0 means DefaultRouteRefresh. Shorter than
	// MinRouteRefresh is refused.
	Refresh time.Duration
	// Async makes SetNameServerRoute return at once rather than after the first query, which
	// then runs on the route's own goroutine: a caller that serves many routes (a controller) is
	// not held by name servers that never answer.
	Async bool
	// MetricsTopic, when set, is the topic label of the route's sends (see Route.MetricsTopic).
	MetricsTopic string
	// OnChange, when set, is called after every refresh that changed the route's RouteStatus
	// (LastResolved aside), on the goroutine that ran the refresh; it must not block.
	OnChange func()
}

// PublishedBroker is one broker of a topic's route as a name server publishes it.
type PublishedBroker struct {
	Name string
	// MasterAddr is the master's (brokerId 0) address; "" when the broker has no master.
	MasterAddr              string
	ReadQueues, WriteQueues int
	Perm                    int
	// Routed is true when the runtime sends to it: writable, with a master.
	Routed bool
}

// RouteStatus says how a name-server route resolves.
type RouteStatus struct {
	// Resolved is true once a name server answered with a route.
	Resolved bool
	// LastResolved is when the route was last received; NameServer is who sent it.
	LastResolved time.Time
	NameServer   string
	// Brokers are the brokers of the last route received, sorted by name.
	Brokers []PublishedBroker
	// Err is the last refresh's error; nil when it succeeded.
	Err error
}

// sameStatus reports whether two statuses tell the same, LastResolved aside.
func sameStatus(a, b RouteStatus) bool {
	return a.Resolved == b.Resolved && a.NameServer == b.NameServer && slices.Equal(a.Brokers, b.Brokers) &&
		(a.Err == nil) == (b.Err == nil) && (a.Err == nil || a.Err.Error() == b.Err.Error())
}

// key is the route's identity.
func (spec NameServerRoute) key() string {
	if spec.Key != "" {
		return spec.Key
	}
	return spec.Topic
}

// unresolvedRetry is the first wait before asking again for a route that has never resolved; it
// doubles up to the route's refresh period.
const unresolvedRetry = time.Second

// resolver refreshes one route from name servers.
type resolver struct {
	kick chan struct{} // buffered(1): ask for a refresh now
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	spec   NameServerRoute
	next   int // index of the name server to ask first
	status RouteStatus
	// waiting are closed when the next refresh to start has ended (see awaitRefresh); a refresh
	// takes the list as it starts, so a waiter never gets a query sent before it asked.
	waiting []chan struct{}
	// lastStart is when the last refresh started, which spaces refreshes asked for by sends.
	lastStart time.Time
	// ended is set once the loop has returned (or a cached resolver was dropped): nobody closes
	// a channel added after it.
	ended bool
	// refreshNow, set on the resolvers of undeclared topics (which have no loop and no kick),
	// asks their cache for a refresh.
	refreshNow func()
}

// SetNameServerRoute starts (or updates) resolving a topic's route from name servers and returns
// once the first query finished, so a caller that sends right after finds the route in place
// (or sees the failure in RouteStatus); with spec.Async it returns at once. Setting a static route
// with SetRoute or removing the route stops resolving.
func (r *Runtime) SetNameServerRoute(spec NameServerRoute) error {
	if err := checkResolvable(&spec); err != nil {
		return err
	}
	spec.NameServers = slices.Clone(spec.NameServers)

	key := spec.key()
	r.mu.Lock()
	// Close marks the runtime closed before it takes r.mu and waits for r.wg after: checked and
	// added to under the lock, a resolver either counts in that wait or is never started.
	if r.closed.Load() {
		r.mu.Unlock()
		return ErrClosed
	}
	res, ok := r.resolvers[key]
	if ok {
		res.mu.Lock()
		changed := !slices.Equal(res.spec.NameServers, spec.NameServers) || res.spec.Policy != spec.Policy ||
			res.spec.Refresh != spec.Refresh || res.spec.Topic != spec.Topic || res.spec.Brokers != spec.Brokers
		res.spec = spec
		if res.next >= len(spec.NameServers) {
			res.next = 0
		}
		res.mu.Unlock()
		r.mu.Unlock()
		if changed {
			res.poke()
		}
		return nil
	}
	res = &resolver{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), spec: spec}
	r.resolvers[key] = res
	r.wg.Add(1)
	r.mu.Unlock()

	if spec.Async {
		res.poke() // the loop's first turn queries at once
	} else {
		r.refresh(res)
	}
	go r.resolveLoop(res)
	return nil
}

// RouteStatus returns how a name-server route resolves, by its key; false when the route is not
// resolved from name servers.
func (r *Runtime) RouteStatus(key string) (RouteStatus, bool) {
	r.mu.Lock()
	res, ok := r.resolvers[key]
	r.mu.Unlock()
	if !ok {
		return RouteStatus{}, false
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	st := res.status
	st.Brokers = slices.Clone(st.Brokers)
	return st, true
}

// ResolvedRoutes returns the keys of the routes resolved from name servers, sorted, for callers
// that report on every one (RouteStatus gives each one's state).
func (r *Runtime) ResolvedRoutes() []string {
	r.mu.Lock()
	keys := make([]string, 0, len(r.resolvers))
	for k := range r.resolvers {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	slices.Sort(keys)
	return keys
}

// RefreshRoute asks for an immediate refresh of a name-server route by its key (no-op for other
// routes), for example after a broker refused a send in a way that suggests the route is stale.
func (r *Runtime) RefreshRoute(key string) {
	r.mu.Lock()
	res := r.sourceOf(key)
	r.mu.Unlock()
	if res != nil {
		res.poke()
	}
}

// awaitRefresh asks for an immediate refresh of a name-server route by its key and returns a
// channel closed once a refresh that started after the call has ended, whatever it found; nil for
// a route not resolved from name servers. A send that finds only brokers that refused its
// connection waits on it: a broker restarted at a new address is then tried at that address, not
// at the one the route had.
func (r *Runtime) awaitRefresh(key string) <-chan struct{} {
	r.mu.Lock()
	res := r.sourceOf(key)
	r.mu.Unlock()
	if res == nil {
		return nil
	}
	ch := make(chan struct{})
	res.mu.Lock()
	if res.ended {
		res.mu.Unlock()
		return nil
	}
	res.waiting = append(res.waiting, ch)
	res.mu.Unlock()
	res.poke()
	return ch
}

// sourceOf is the resolver of a route asked of name servers, declared or not; nil for another
// route. r.mu is held.
func (r *Runtime) sourceOf(key string) *resolver {
	if res := r.resolvers[key]; res != nil {
		return res
	}
	return r.cached[key]
}

// releaseWaiters closes the channels of sends waiting for a refresh.
func releaseWaiters(waiting []chan struct{}) {
	for _, ch := range waiting {
		close(ch)
	}
}

func (res *resolver) poke() {
	if res.kick == nil {
		if res.refreshNow != nil {
			res.refreshNow()
		}
		return
	}
	select {
	case res.kick <- struct{}{}:
	default:
	}
}

// stopResolvingLocked ends a route's resolver; r.mu must be held. It does not wait for the loop.
func (r *Runtime) stopResolvingLocked(key string) {
	if res, ok := r.resolvers[key]; ok {
		delete(r.resolvers, key)
		close(res.stop)
	}
}

// minKickSpacing is the least time between the starts of two refreshes, so sends that keep
// meeting a broker that refuses them ask a name server at most a few times a second per route.
const minKickSpacing = 200 * time.Millisecond

func (r *Runtime) resolveLoop(res *resolver) {
	defer r.wg.Done()
	defer close(res.done)
	defer func() {
		res.mu.Lock()
		waiting := res.waiting
		res.waiting, res.ended = nil, true
		res.mu.Unlock()
		releaseWaiters(waiting)
	}()
	retry := unresolvedRetry
	for {
		res.mu.Lock()
		every := res.spec.Refresh
		if !res.status.Resolved && retry < every {
			// Never routed yet: the topic may be moments from being published (another replica
			// creating it on the brokers, a name server still starting), so ask again soon,
			// backing off to the refresh period so a topic nobody creates costs little.
			every = retry
			retry *= 2
		}
		res.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-res.stop:
			t.Stop()
			return
		case <-r.stop:
			t.Stop()
			return
		case <-res.kick:
			t.Stop()
			if !r.spaceKick(res) {
				return
			}
		case <-t.C:
		}
		r.refresh(res)
	}
}

// spaceKick waits until minKickSpacing has passed since the last refresh started; it reports
// false when the resolver or the runtime stopped meanwhile.
func (r *Runtime) spaceKick(res *resolver) bool {
	res.mu.Lock()
	wait := minKickSpacing - time.Since(res.lastStart)
	res.mu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-res.stop:
		return false
	case <-r.stop:
		return false
	case <-t.C:
		return true
	}
}

// refresh queries the name servers once and installs the route when one answers with a route
// within the bounds; otherwise the last good route stays and the status says why.
func (r *Runtime) refresh(res *resolver) {
	res.mu.Lock()
	spec, start := res.spec, res.next
	waiting := res.waiting
	res.waiting = nil
	res.lastStart = time.Now()
	res.mu.Unlock()
	defer releaseWaiters(waiting)

	var errs nameserver.Errors
	for i := range spec.NameServers {
		k := (start + i) % len(spec.NameServers)
		addr := spec.NameServers[k]
		published, route, err := r.resolveFrom(spec, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			if errors.Is(err, ErrTopicNotPublished) {
				// A definitive answer: another name server of the same cluster would say the same.
				break
			}
			continue
		}
		st := RouteStatus{Resolved: true, LastResolved: time.Now(), NameServer: addr, Brokers: published}
		if !r.setRouteStatus(res, spec, k, st) {
			return // removed or replaced while the query ran
		}
		r.installResolved(res, route)
		return
	}
	err := fmt.Errorf("route of %s from name servers: %w", spec.Topic, errs)
	res.mu.Lock()
	st := res.status
	res.mu.Unlock()
	st.Err = err
	r.setRouteStatus(res, spec, -1, st)
	r.log.V(1).Info("route refresh failed; keeping the last route", "topic", spec.Topic, "error", err.Error())
}

// setRouteStatus records a refresh's outcome, and the name server to ask first next time (k >= 0),
// unless the resolver was stopped meanwhile; it reports whether it did. A changed status is
// reported to spec.OnChange.
func (r *Runtime) setRouteStatus(res *resolver, spec NameServerRoute, k int, st RouteStatus) bool {
	res.mu.Lock()
	select {
	case <-res.stop:
		res.mu.Unlock()
		return false
	default:
	}
	if k >= 0 {
		res.next = k
	}
	changed := !sameStatus(res.status, st)
	res.status = st
	res.mu.Unlock()
	if changed && spec.OnChange != nil {
		spec.OnChange()
	}
	return true
}

// resolveFrom asks one name server for the route and turns its answer into the runtime's; an
// answer beyond the bounds wraps ErrAnswerRefused.
func (r *Runtime) resolveFrom(spec NameServerRoute, addr string) ([]PublishedBroker, Route, error) {
	data, err := r.ns.Route(context.Background(), addr, spec.Topic)
	if err != nil {
		return nil, Route{}, err
	}
	published, route := routeFromNameServer(spec, data)
	if err := route.checkBounds(); err != nil {
		return nil, Route{}, fmt.Errorf("%w: %w", ErrAnswerRefused, err)
	}
	return published, route, nil
}

// routeFromNameServer turns a name server's route into the runtime's: writable queues of brokers
// with a master, as RocketMQ's client builds its publish info (topicRouteData2TopicPublishInfo).
// A broker listed twice counts once, as first listed.
func routeFromNameServer(spec NameServerRoute, data *remoting.TopicRouteData) ([]PublishedBroker, Route) {
	masters := make(map[string]string, len(data.BrokerDatas))
	for _, bd := range data.BrokerDatas {
		masters[bd.BrokerName] = bd.MasterAddr()
	}
	route := Route{Key: spec.Key, Topic: spec.Topic, Policy: spec.Policy, MetricsTopic: spec.MetricsTopic}
	published := make([]PublishedBroker, 0, len(data.QueueDatas))
	seen := make(map[string]bool, len(data.QueueDatas))
	for _, q := range data.QueueDatas {
		if seen[q.BrokerName] {
			continue
		}
		seen[q.BrokerName] = true
		pb := PublishedBroker{Name: q.BrokerName, MasterAddr: masters[q.BrokerName], ReadQueues: int(q.ReadQueueNums),
			WriteQueues: int(q.WriteQueueNums), Perm: int(q.Perm)}
		pb.Routed = q.Perm&remoting.PermWrite != 0 && pb.MasterAddr != "" && q.WriteQueueNums > 0
		if pb.Routed {
			route.Brokers = append(route.Brokers, BrokerQueues{Broker: spec.Brokers.Broker(q.BrokerName).String(), WriteQueues: pb.WriteQueues, Addr: pb.MasterAddr})
		}
		published = append(published, pb)
	}
	slices.SortFunc(published, func(a, b PublishedBroker) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(route.Brokers, func(a, b BrokerQueues) int { return strings.Compare(a.Broker, b.Broker) })
	return published, route
}

// installResolved publishes a resolved route unless it equals the one in force.
func (r *Runtime) installResolved(res *resolver, rt Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := rt.key()
	if r.resolvers[key] != res && r.cached[key] != res {
		return // replaced by a static route or removed meanwhile
	}
	if cur, ok := r.state.Load().specs.Get(key); ok && cur.Topic == rt.Topic && cur.Policy == rt.Policy && cur.MetricsTopic == rt.MetricsTopic && slices.Equal(cur.Brokers, rt.Brokers) {
		return
	}
	r.update(func(s *snapshot) ([]string, bool) {
		s.specs = s.specs.With(key, rt)
		return []string{key}, false
	})
	r.log.V(1).Info("route from name servers", "topic", rt.Topic, "brokers", rt.Brokers)
}
