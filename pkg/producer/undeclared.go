package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/routecache"
)

// UndeclaredTopicOptions bounds the routes the runtime keeps for topics nobody declared (see
// UseRoute). Zero fields take the defaults of RocketMQ Proxy's route cache where it has one.
type UndeclaredTopicOptions struct {
	// MaxTopics bounds the routes kept at once; 0 means routecache.DefaultMaxKeys (20,000, the
	// Proxy's bound). A new topic beyond it drops the least recently used.
	MaxTopics int
	// IdleAfter is how long a route stays unused before it is dropped; 0 means 300 s.
	IdleAfter time.Duration
	// LoadsPerSecond and LoadBurst bound the name-server queries for topics not yet in use: a
	// client naming random topics costs the name servers at most this many queries a second,
	// and its requests beyond it are answered ErrTooManyNewTopics. 0 means 200 a second after a
	// burst of 1,000.
	LoadsPerSecond float64
	LoadBurst      int
	// MissTTL is how long a topic the name servers do not know is answered from memory; 0 means
	// 5 s.
	MissTTL time.Duration
}

// ErrTooManyNewTopics is returned by UseRoute for a topic not in use while more new topics than
// UndeclaredTopicOptions allow were asked for: the caller should try again shortly.
var ErrTooManyNewTopics = routecache.ErrBusy

// newUndeclaredCache builds the runtime's cache of undeclared topics' routes.
func (r *Runtime) newUndeclaredCache(o UndeclaredTopicOptions) *routecache.Cache[*resolver] {
	return routecache.New(routecache.Options[*resolver]{
		MaxKeys:        o.MaxTopics,
		IdleAfter:      o.IdleAfter,
		MissTTL:        o.MissTTL,
		LoadsPerSecond: o.LoadsPerSecond,
		LoadBurst:      o.LoadBurst,
		RefreshAfter:   func(res *resolver) time.Duration { return res.spec.Refresh },
		Load:           r.loadUndeclared,
		IsMiss:         func(err error) bool { return errors.Is(err, ErrTopicNotPublished) },
		Drop:           r.dropUndeclared,
	})
}

// UseRoute makes sure the runtime holds the route of a topic nobody declared, by spec.Key, as
// spec's name servers publish it, and returns once it does: at once for a route in use, after
// one name-server query for the first use (callers asking for the same key meanwhile share it).
// Such routes are kept while in use (refreshed on use once older than spec.Refresh) and
// dropped after UndeclaredTopicOptions.IdleAfter unused; they are never listed by
// ResolvedRoutes. The error wraps ErrTopicNotPublished when the name servers do not know the
// topic (remembered for MissTTL), ErrTooManyNewTopics when new topics come faster than the
// bound, or says that no name server answered. spec.Async and spec.OnChange are ignored.
//
// spec.Key must not be a key SetRoute or SetNameServerRoute uses: the caller keeps declared and
// undeclared keys apart (the operator's undeclared keys have one more "/" part).
func (r *Runtime) UseRoute(ctx context.Context, spec NameServerRoute) error {
	if spec.Key == "" {
		return errors.New("route: an undeclared topic's route needs a key")
	}
	if err := checkResolvable(&spec); err != nil {
		return err
	}
	return r.undeclared.Use(ctx, spec.Key, func() *resolver { return r.newCachedResolver(spec) })
}

// checkResolvable refuses a name-server route that cannot be asked for (a declared one, or an
// undeclared topic's), and fills in its default refresh period.
func checkResolvable(spec *NameServerRoute) error {
	if err := CheckTopic(spec.Topic); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if len(spec.NameServers) == 0 {
		return fmt.Errorf("route %s: no name servers", spec.Topic)
	}
	if spec.Refresh == 0 {
		spec.Refresh = DefaultRouteRefresh
	}
	if spec.Refresh < MinRouteRefresh {
		return fmt.Errorf("route %s: refresh %v is shorter than %v", spec.Topic, spec.Refresh, MinRouteRefresh)
	}
	return nil
}

// newCachedResolver is the resolver of an undeclared topic's route: no loop of its own (the
// cache refreshes it). It is made under the cache's lock, so it takes no lock of the runtime's:
// its first load registers it.
func (r *Runtime) newCachedResolver(spec NameServerRoute) *resolver {
	spec.NameServers = slices.Clone(spec.NameServers)
	spec.Async, spec.OnChange = false, nil
	res := &resolver{stop: make(chan struct{}), spec: spec}
	res.refreshNow = func() { r.undeclared.Refresh(spec.Key) }
	return res
}

// registerCached makes a cached resolver the one installResolved and the refresh kicks find for
// its key, unless the cache already let go of it; it reports whether it did.
func (r *Runtime) registerCached(res *resolver) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.mu.Lock()
	ended := res.ended
	res.mu.Unlock()
	if ended {
		return false
	}
	if cur := r.cached[res.spec.Key]; cur == res {
		return true
	} else if cur != nil {
		// Dropped by the cache, not yet by us: this one replaces it.
		r.endCachedLocked(cur)
	}
	r.cached[res.spec.Key] = res
	return true
}

// loadUndeclared asks the name servers for a cached route (a first load or a refresh); a first
// load's error is its callers' answer, a refresh's keeps the last route.
func (r *Runtime) loadUndeclared(res *resolver) error {
	if !r.registerCached(res) {
		return errors.New("route: dropped before its name servers answered")
	}
	r.refresh(res)
	res.mu.Lock()
	resolved, err := res.status.Resolved, res.status.Err
	res.mu.Unlock()
	if resolved {
		r.refused.forget(res.spec.Key)
		return nil
	}
	if err == nil {
		return errors.New("route: dropped before its name servers answered")
	}
	r.refused.record(res.spec.Key, err, time.Now())
	return err
}

// dropUndeclared forgets a cached route the cache let go of.
func (r *Runtime) dropUndeclared(res *resolver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := res.spec.Key
	if r.cached[key] != res {
		r.endCachedLocked(res)
		return
	}
	delete(r.cached, key)
	r.endCachedLocked(res)
	r.update(func(s *snapshot) ([]string, bool) {
		if _, ok := s.specs.Get(key); !ok {
			return nil, false
		}
		s.specs = s.specs.Without(key)
		return []string{key}, false
	})
}

// endCachedLocked stops a cached resolver: a refresh still running installs nothing, and sends
// waiting for one are let go. r.mu is held.
func (r *Runtime) endCachedLocked(res *resolver) {
	res.mu.Lock()
	if res.ended {
		res.mu.Unlock()
		return
	}
	res.ended = true
	waiting := res.waiting
	res.waiting = nil
	close(res.stop)
	res.mu.Unlock()
	releaseWaiters(waiting)
}

// ForgetUndeclared drops the routes of undeclared topics whose keys start with prefix, and the
// misses remembered for them, for example when the name servers or policy they were asked for
// changed: the next use asks again.
func (r *Runtime) ForgetUndeclared(prefix string) {
	r.undeclared.Forget(func(key string) bool { return strings.HasPrefix(key, prefix) })
	r.refused.forgetPrefix(prefix)
}

// UndeclaredUse is what the runtime holds of undeclared topics under one key prefix.
type UndeclaredUse struct {
	// Topics counts the routes held (in use, or being asked for).
	Topics int
	// Refused are topics recently answered with an error (the name servers do not know them, or
	// did not answer), at most the number asked for; RefusedCount counts them all.
	Refused      []UndeclaredRefusal
	RefusedCount int
}

// UndeclaredRefusal is one topic whose route was refused, and why.
type UndeclaredRefusal struct {
	// Key is the route's key; Err says why; At is when it was last refused.
	Key string
	Err error
	At  time.Time
}

// UndeclaredInUse reports the undeclared topics' routes under a key prefix, with at most limit
// of the topics refused within the last RefusalMemory, by key.
func (r *Runtime) UndeclaredInUse(prefix string, limit int) UndeclaredUse {
	match := func(key string) bool { return strings.HasPrefix(key, prefix) }
	u := UndeclaredUse{Topics: r.undeclared.Count(match)}
	u.Refused, u.RefusedCount = r.refused.list(prefix, limit, time.Now())
	return u
}

// RefusalMemory is how long UndeclaredInUse reports a topic whose first use was refused: the
// cache answers from memory for seconds only, but whoever reads the report (a Cluster's status,
// written every route refresh) must see what clients were refused in between.
const RefusalMemory = 5 * time.Minute

// maxRefusals bounds the refusals remembered for reports: clients choose the topics they name.
const maxRefusals = 1024

// refusalLog keeps the recent refusals of undeclared topics' first uses, for reports.
type refusalLog struct {
	mu sync.Mutex
	m  map[string]UndeclaredRefusal
}

// record remembers key's refusal; beyond maxRefusals the oldest ones are dropped first.
func (l *refusalLog) record(key string, err error, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]UndeclaredRefusal{}
	}
	if _, ok := l.m[key]; !ok && len(l.m) >= maxRefusals {
		l.dropOldestLocked(now)
	}
	l.m[key] = UndeclaredRefusal{Key: key, Err: err, At: now}
}

// dropOldestLocked drops the expired refusals, or else the oldest.
func (l *refusalLog) dropOldestLocked(now time.Time) {
	var oldest string
	for k, f := range l.m {
		if now.Sub(f.At) > RefusalMemory {
			delete(l.m, k)
		} else if oldest == "" || f.At.Before(l.m[oldest].At) {
			oldest = k
		}
	}
	if len(l.m) >= maxRefusals {
		delete(l.m, oldest)
	}
}

// forget drops key's refusal: its topic has since been found.
func (l *refusalLog) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key)
}

// forgetPrefix drops the refusals of the keys under prefix.
func (l *refusalLog) forgetPrefix(prefix string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.m {
		if strings.HasPrefix(k, prefix) {
			delete(l.m, k)
		}
	}
}

// list returns at most limit of the refusals under prefix within RefusalMemory, sorted by key,
// and how many there are.
func (l *refusalLog) list(prefix string, limit int, now time.Time) ([]UndeclaredRefusal, int) {
	l.mu.Lock()
	var all []UndeclaredRefusal
	for k, f := range l.m {
		if now.Sub(f.At) > RefusalMemory {
			delete(l.m, k)
		} else if strings.HasPrefix(k, prefix) {
			all = append(all, f)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(all, func(a, b UndeclaredRefusal) int { return strings.Compare(a.Key, b.Key) })
	return all[:min(limit, len(all))], len(all)
}

// UndeclaredStats are the counts of the runtime's cache of undeclared topics' routes.
func (r *Runtime) UndeclaredStats() routecache.Stats { return r.undeclared.Stats() }
