package controllers

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/detourmq/detour/pkg/producer"
)

// Name-server look bounds. A look at a Cluster's name servers runs off the reconcilers' workers
// and is bounded in time, so a Cluster whose name servers never answer holds only its own look:
// other Clusters' status and other Topics' routes go on.
const (
	// DefaultDescribeTimeout bounds one look at a Cluster's name servers, every name server
	// tried included; each request waits at most the runtime's NameServerTimeout on its own.
	DefaultDescribeTimeout = 10 * time.Second
	// maxDescribeBackoff is the longest wait between looks at a Cluster whose name servers keep
	// failing, unless its refresh interval is longer.
	maxDescribeBackoff = 5 * time.Minute
)

// clusterDescriber looks at Clusters' name servers (DescribeCluster) on goroutines of its own: at
// most one look per Cluster at a time, each bounded by a timeout, repeated every refresh
// interval, and after failures backed off per Cluster (refresh, 2×, 4×, ... up to
// maxDescribeBackoff). The reconcilers read the last finished look and are called back when a look
// finishes.
type clusterDescriber struct {
	rt      *producer.Runtime
	timeout time.Duration
	ctx     context.Context // ends the looks in flight when the manager stops
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu sync.Mutex
	// stopped is set once Start's manager stops: from then on no look starts, since a look's
	// wg.Add would race the wg.Wait of the stop (a reconcile may still be running).
	stopped bool
	looks   map[types.NamespacedName]*clusterLook
	// onDone are called with the Cluster's key whenever one of its looks finishes.
	onDone []func(types.NamespacedName)
}

// clusterLook is what the describer knows of one Cluster.
type clusterLook struct {
	// nameServers are the spec the finished look belongs to; a look for other name servers does
	// not count.
	nameServers []string
	inFlight    bool
	done        bool
	view        producer.ClusterView
	err         error
	// next is when the next look is due; failures counts the failed looks in a row.
	next     time.Time
	failures int
}

// newClusterDescriber returns a describer whose looks each last at most timeout (0 means
// DefaultDescribeTimeout).
func newClusterDescriber(rt *producer.Runtime, timeout time.Duration) *clusterDescriber {
	if timeout <= 0 {
		timeout = DefaultDescribeTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &clusterDescriber{rt: rt, timeout: timeout, ctx: ctx, cancel: cancel, looks: map[types.NamespacedName]*clusterLook{}}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: it serves every replica.
func (d *clusterDescriber) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it waits for the manager to stop, then starts no more looks,
// ends the looks in flight and waits for them.
func (d *clusterDescriber) Start(ctx context.Context) error {
	<-ctx.Done()
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	return nil
}

// subscribe registers fn to be called with a Cluster's key whenever one of its looks finishes.
// It must not block.
func (d *clusterDescriber) subscribe(fn func(types.NamespacedName)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onDone = append(d.onDone, fn)
}

// lookResult is the last finished look at a Cluster's name servers.
type lookResult struct {
	// done is false until a look at these name servers finished.
	done bool
	view producer.ClusterView
	// err is the last look's failure; view then is the last good look's.
	err error
}

// latest returns the last finished look at a Cluster's name servers and starts a new look when
// one is due and none is under way. again is when the caller should ask again: when the next look
// is due, or the refresh interval while a look is under way (its end calls the subscribers).
func (d *clusterDescriber) latest(key types.NamespacedName, nameServers []string, refresh time.Duration) (res lookResult, again time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.looks[key]
	if l == nil || !slices.Equal(l.nameServers, nameServers) {
		if l != nil && l.inFlight {
			// A look at the old name servers is under way: its result will not count, and the
			// new look starts when it ends.
			l.nameServers, l.done, l.failures, l.next = slices.Clone(nameServers), false, 0, time.Time{}
			return lookResult{}, refresh
		}
		l = &clusterLook{nameServers: slices.Clone(nameServers)}
		d.looks[key] = l
	}
	now := time.Now()
	if !d.stopped && !l.inFlight && !now.Before(l.next) {
		d.startLocked(key, l, refresh)
	}
	again = refresh
	if l.done && !l.inFlight {
		again = max(l.next.Sub(now), time.Second)
	}
	return lookResult{done: l.done, view: l.view, err: l.err}, again
}

// startLocked starts a look; d.mu must be held.
func (d *clusterDescriber) startLocked(key types.NamespacedName, l *clusterLook, refresh time.Duration) {
	l.inFlight = true
	nameServers := l.nameServers
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, d.timeout)
		view, err := d.rt.DescribeCluster(ctx, nameServers)
		cancel()
		if d.ctx.Err() != nil {
			return // the manager stopped: nobody reads the result
		}
		d.finish(key, l, nameServers, view, err, refresh)
	}()
}

// finish records a look's result, schedules the next look and calls the subscribers.
func (d *clusterDescriber) finish(key types.NamespacedName, l *clusterLook, asked []string, view producer.ClusterView, err error, refresh time.Duration) {
	d.mu.Lock()
	l.inFlight = false
	if d.looks[key] != l || !slices.Equal(l.nameServers, asked) {
		// Forgotten, or the name servers changed while it ran: the next latest starts afresh.
		d.mu.Unlock()
		d.notify(key)
		return
	}
	l.done = true
	if err != nil {
		l.failures++
		l.err = err // the view of the last good look stays, as the status keeps it
		l.next = time.Now().Add(describeBackoff(l.failures, refresh))
	} else {
		l.failures, l.view, l.err = 0, view, nil
		l.next = time.Now().Add(refresh)
	}
	d.mu.Unlock()
	d.notify(key)
}

// notify calls the subscribers with a Cluster's key.
func (d *clusterDescriber) notify(key types.NamespacedName) {
	d.mu.Lock()
	subs := slices.Clone(d.onDone)
	d.mu.Unlock()
	for _, fn := range subs {
		fn(key)
	}
}

// forget drops what the describer knows of a deleted Cluster.
func (d *clusterDescriber) forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.looks, key)
}

// describeBackoff is the wait before the next look after failures looks in a row failed: the
// refresh interval doubled per failure beyond the first, at most maxDescribeBackoff (or the
// refresh interval, when that is longer).
func describeBackoff(failures int, refresh time.Duration) time.Duration {
	limit := max(refresh, maxDescribeBackoff)
	d := refresh
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// requestQueue hands reconcile requests from outside a controller's watches (a finished look at
// name servers, a route's changed status) to the controller's work queue, which merges repeats
// of a key, so a caller never blocks and nothing is lost while the controller is busy.
type requestQueue struct {
	q atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// source is the controller source that gives the queue its work queue when the controller
// starts.
func (rq *requestQueue) source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		rq.q.Store(&q)
		return nil
	})
}

// add asks for a reconcile of key. Before the controller started it does nothing: the
// controller's first reconcile of every object comes after.
func (rq *requestQueue) add(key types.NamespacedName) {
	if q := rq.q.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: key})
	}
}

// addLow is add at controller-runtime's low priority (see enqueueLow).
func (rq *requestQueue) addLow(key types.NamespacedName) {
	if q := rq.q.Load(); q != nil {
		enqueueLow(*q, reconcile.Request{NamespacedName: key})
	}
}
