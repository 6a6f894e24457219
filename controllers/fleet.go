package controllers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// The fleet: every replica publishes what it learnt itself in a ReplicaView of its own and
// merges every other live replica's view into its runtime. The merge rule:
//
//   - a broker that any live replica isolates under a policy is isolated under that policy on
//     every replica (gateway selection and facade routes alike), until every replica that
//     isolates it has readmitted it (it leaves their views) or its isolation ran out (until);
//   - a replica's view is live until renewTime + leaseDurationSeconds: a replica that dies
//     holding an isolation has it end at its until or when its view expires, whichever comes
//     first (an isolation waiting for a probe's proof ends when the view expires);
//   - where several replicas isolate one broker, the isolation that ends last is in force;
//   - pod marks are not shared: every replica watches the pods itself.
//
// A replica writes its view at most once per FleetOptions.WriteInterval, however many
// isolations change meanwhile (changes coalesce into the next write), and renews it every
// LeaseDuration/3 when nothing changes.

// Defaults of FleetOptions.
const (
	DefaultFleetLeaseDuration = 15 * time.Second
	DefaultFleetWriteInterval = time.Second
)

// fleetGrace is how long after expiring a dead replica's view stays before the leader deletes it.
const fleetGrace = time.Minute

// Every replica writes its own ReplicaView and reads the others'; the leader deletes the views of
// replicas long gone. The views live in the Lease's namespace, the operator's own, so a Role there
// grants them.
//
// +kubebuilder:rbac:groups=routing.detour.dev,resources=replicaviews,verbs=get;list;watch;create;update;delete,namespace=system

// FleetOptions turn on sharing what replicas learn through ReplicaViews.
type FleetOptions struct {
	// Namespace holds the ReplicaViews (the leader election Lease's namespace).
	Namespace string
	// Replica names this replica and its view; it must differ between replicas (the pod name).
	Replica string
	// LeaseDuration is how long a view stands without being written again; 0 means
	// DefaultFleetLeaseDuration.
	LeaseDuration time.Duration
	// WriteInterval is the least time between two writes of the view; 0 means
	// DefaultFleetWriteInterval.
	WriteInterval time.Duration
}

func (o FleetOptions) withDefaults() FleetOptions {
	o.LeaseDuration = orDefault(o.LeaseDuration, DefaultFleetLeaseDuration)
	o.WriteInterval = orDefault(o.WriteInterval, DefaultFleetWriteInterval)
	return o
}

// fleet is what one replica knows of the others: the claims merged from their views, and the
// replicas behind each, for status.
type fleet struct {
	opts   FleetOptions
	writes atomic.Uint64
	merged atomic.Bool
	// changed wakes the publisher: an isolation changed in the runtime.
	changed chan struct{}

	mu sync.Mutex
	// seen lists, by policy key and broker identity, the other live replicas that isolate it.
	seen map[string]map[string][]string
	// live counts the other live replicas.
	live int
}

func newFleet(opts FleetOptions) *fleet {
	return &fleet{opts: opts.withDefaults(), changed: make(chan struct{}, 1), seen: map[string]map[string][]string{}}
}

// nudge tells the publisher that an isolation changed; it never blocks.
func (f *fleet) nudge() {
	if f == nil {
		return
	}
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// seenBy names the replicas that isolate broker under policy: the other live replicas whose
// views list it, and this one when own is set.
func (f *fleet) seenBy(policy, broker string, own bool) []string {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	others := f.seen[policy][broker]
	f.mu.Unlock()
	out := slices.Clone(others)
	if own {
		out = append(out, f.opts.Replica)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// replicas counts the live replicas, this one included; 0 without a fleet.
func (f *fleet) replicas() int32 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return int32(f.live + 1)
}

// figures are what this replica knows of the fleet, for the metrics: the live replicas and, by
// policy, the brokers the other live replicas isolate.
func (f *fleet) figures() metrics.FleetFigures {
	f.mu.Lock()
	defer f.mu.Unlock()
	peers := make(map[string]int, len(f.seen))
	for policy, brokers := range f.seen {
		if len(brokers) > 0 {
			peers[policy] = len(brokers)
		}
	}
	return metrics.FleetFigures{Replicas: f.live + 1, PeerIsolations: peers}
}

// fleetPublisher writes this replica's view: when its own isolations change (at most once per
// WriteInterval) and to renew it.
type fleetPublisher struct {
	client.Client
	reader  client.Reader
	runtime *producer.Runtime
	fleet   *fleet
	metrics *metrics.Runtime
	last    *routingv1alpha1.ReplicaView // as last written, nil before the first write
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica publishes.
func (p *fleetPublisher) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (p *fleetPublisher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("fleet")
	opts := p.fleet.opts
	renew := time.NewTimer(0)
	defer renew.Stop()
	var lastWrite time.Time
	for {
		fired := false
		select {
		case <-ctx.Done():
			return nil
		case <-p.fleet.changed:
		case <-renew.C:
			fired = true
		}
		// Coalesce: whatever changes before the interval is up goes into this one write.
		if wait := time.Until(lastWrite.Add(opts.WriteInterval)); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		due := p.last == nil || time.Since(p.last.Spec.RenewTime.Time) >= opts.LeaseDuration/3
		wrote, err := p.publish(ctx, due)
		if err != nil {
			log.V(1).Info("Writing the replica's view failed; retrying", "replicaView", opts.Replica, "error", err.Error())
			renew.Reset(opts.WriteInterval)
			continue
		}
		switch {
		case wrote:
			lastWrite = time.Now()
			renew.Reset(opts.LeaseDuration / 3)
		case fired:
			// Woken for a renewal that was not due yet: wake again when it is.
			renew.Reset(max(time.Until(p.last.Spec.RenewTime.Add(opts.LeaseDuration/3)), opts.WriteInterval))
		}
	}
}

// publish writes the view when it changed, or when renew is set.
func (p *fleetPublisher) publish(ctx context.Context, renew bool) (bool, error) {
	opts := p.fleet.opts
	isolated, list := ownIsolations(p.runtime)
	if !renew && p.last != nil && p.last.Spec.Isolated == isolated &&
		equality.Semantic.DeepEqual(p.last.Spec.Isolations, list) {
		return false, nil
	}
	view := &routingv1alpha1.ReplicaView{
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Replica},
		Spec: routingv1alpha1.ReplicaViewSpec{
			Replica: opts.Replica, RenewTime: metav1.NowMicro(),
			LeaseDurationSeconds: int32(opts.LeaseDuration / time.Second), Isolated: isolated, Isolations: list,
		},
	}
	if p.last == nil {
		var cur routingv1alpha1.ReplicaView
		err := p.reader.Get(ctx, client.ObjectKeyFromObject(view), &cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := p.Create(ctx, view); err != nil {
				return false, err
			}
			p.wrote(view)
			return true, nil
		case err != nil:
			return false, err
		}
		p.last = &cur
	}
	view.ResourceVersion = p.last.ResourceVersion
	if err := p.Update(ctx, view); err != nil {
		p.last = nil // read it again: deleted, or written by an earlier run of this replica
		return false, err
	}
	p.wrote(view)
	return true, nil
}

func (p *fleetPublisher) wrote(view *routingv1alpha1.ReplicaView) {
	p.last = view
	p.fleet.writes.Add(1)
	p.metrics.StatusWritten("ReplicaView")
}

// ownIsolations lists what this replica's runtime learnt itself, for its view: every policy's
// own isolations but pod marks (every replica watches the pods), sorted by policy and broker, the
// first MaxReplicaIsolations of them; isolated counts them all.
func ownIsolations(rt *producer.Runtime) (isolated int32, list []routingv1alpha1.ReplicaIsolation) {
	for _, key := range rt.PolicyNames() {
		ns, _, ok := scope.ParsePolicyKey(key)
		if !ok {
			continue
		}
		for _, it := range rt.OwnIsolated(key) {
			if it.Reason == fault.ReasonPodNotReady || it.Reason == fault.ReasonPodTerminating {
				continue
			}
			b, ok := scope.ParseBrokerID(it.Broker)
			if !ok || b.Scope.Namespace != ns {
				continue
			}
			isolated++
			ri := routingv1alpha1.ReplicaIsolation{
				FaultPolicy: key, BrokerName: b.Name, Cluster: b.Scope.Cluster, Reason: routingv1alpha1.IsolationReason(it.Reason),
				LatencyMillis: it.Latency.Milliseconds(), Since: metav1.NewTime(it.Since.Truncate(time.Second)),
			}
			// An unreachable broker waits for proof here whatever its timer says, so the claim
			// has no end in time: it ends when this replica withdraws it or its view expires.
			if it.Reachable && it.Until.After(time.Now()) {
				// Rounded up: a view read back must not end an isolation early.
				ri.Until = ptr.To(metav1.NewTime(it.Until.Truncate(time.Second).Add(time.Second)))
			}
			list = append(list, ri)
		}
	}
	slices.SortFunc(list, func(a, b routingv1alpha1.ReplicaIsolation) int {
		return cmp.Or(cmp.Compare(a.FaultPolicy, b.FaultPolicy), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.BrokerName, b.BrokerName))
	})
	if len(list) > routingv1alpha1.MaxReplicaIsolations {
		list = list[:routingv1alpha1.MaxReplicaIsolations]
	}
	return isolated, list
}

// setupFleet registers the publisher and the merger when replicas share views.
func setupFleet(mgr ctrl.Manager, rt *producer.Runtime, s *shared) error {
	if s.fleet == nil {
		return nil
	}
	if s.fleet.opts.Namespace == "" || s.fleet.opts.Replica == "" {
		return fmt.Errorf("sharing views between replicas needs a namespace and a replica name")
	}
	if err := (&FleetMerger{Client: mgr.GetClient(), Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("fleet controller: %w", err)
	}
	return mgr.Add(&fleetPublisher{Client: mgr.GetClient(), reader: mgr.GetAPIReader(), runtime: rt, fleet: s.fleet, metrics: s.metrics})
}

// fleetKey is the one request the merger reconciles: every view change merges all views.
var fleetKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "fleet"}}

// FleetMerger merges the other live replicas' views into the runtime (see the merge rule above)
// and requeues itself for the moment the next view expires.
type FleetMerger struct {
	client.Client
	Runtime *producer.Runtime
	*shared
	// applied are the policies that have claims in the runtime, to withdraw them when they go.
	applied map[string]bool
}

// Reconcile lists the views and merges them.
func (m *FleetMerger) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	f := m.fleet
	var views routingv1alpha1.ReplicaViewList
	if err := m.List(ctx, &views, client.InNamespace(f.opts.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	claims, seen, live, next := mergeViews(views.Items, f.opts.Replica, now)
	if m.applied == nil {
		m.applied = map[string]bool{}
	}
	for policy := range m.applied {
		if _, ok := claims[policy]; !ok {
			m.Runtime.SetPeerClaims(policy, nil)
			delete(m.applied, policy)
		}
	}
	for policy, c := range claims {
		m.Runtime.SetPeerClaims(policy, c)
		m.applied[policy] = true
	}
	f.mu.Lock()
	changed := changedPolicies(f.seen, seen)
	liveChanged := f.live != live
	f.seen, f.live = seen, live
	f.mu.Unlock()
	f.merged.Store(true)
	if !m.leading() {
		return m.requeue(next, now), nil
	}
	m.collect(ctx, views.Items, now)
	if liveChanged {
		// Every policy's status counts the replicas.
		var all routingv1alpha1.FaultPolicyList
		if err := m.List(ctx, &all); err != nil {
			return ctrl.Result{}, err
		}
		changed = changed[:0]
		for i := range all.Items {
			changed = append(changed, scope.PolicyKey(all.Items[i].Namespace, all.Items[i].Name))
		}
	}
	m.resyncPolicies(ctx, changed)
	return m.requeue(next, now), nil
}

// requeue wakes the merger when the next live view expires, so a dead replica's claims end on
// time without any other change.
func (m *FleetMerger) requeue(next, now time.Time) ctrl.Result {
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(now), 10*time.Millisecond)}
}

// changedPolicies lists the policies whose replicas behind an isolation differ between two
// merges: their status must be written again, though no isolation of this runtime changed.
func changedPolicies(before, after map[string]map[string][]string) []string {
	var out []string
	for policy, brokers := range after {
		if !maps.EqualFunc(brokers, before[policy], slices.Equal) {
			out = append(out, policy)
		}
	}
	for policy := range before {
		if _, ok := after[policy]; !ok {
			out = append(out, policy)
		}
	}
	return out
}

// resyncPolicies asks the FaultPolicy reconciler to write the policies whose fleet view may have
// changed (which replicas see what), which no isolation event of this runtime reports.
func (m *FleetMerger) resyncPolicies(ctx context.Context, policies []string) {
	if !m.leading() {
		return
	}
	for _, key := range policies {
		ns, name, ok := scope.ParsePolicyKey(key)
		if !ok {
			continue
		}
		stub := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		select {
		case m.policyIsolations <- event.GenericEvent{Object: stub}:
		case <-ctx.Done():
			return
		}
	}
}

// collect deletes the views of replicas gone for longer than fleetGrace: nothing renews them.
func (m *FleetMerger) collect(ctx context.Context, views []routingv1alpha1.ReplicaView, now time.Time) {
	for i := range views {
		v := &views[i]
		if v.Name == m.fleet.opts.Replica || now.Before(viewExpiry(v).Add(fleetGrace)) {
			continue
		}
		if err := m.Delete(ctx, v, client.Preconditions{ResourceVersion: &v.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("Deleting an expired replica view failed", "replicaView", v.Name, "error", err.Error())
		}
	}
}

// viewExpiry is when a view stops standing unless renewed.
func viewExpiry(v *routingv1alpha1.ReplicaView) time.Time {
	return v.Spec.RenewTime.Add(time.Duration(v.Spec.LeaseDurationSeconds) * time.Second)
}

// mergeViews applies the merge rule to the views of other replicas than self, at now: the claims
// in force by policy key and broker identity, the replicas behind each, how many views are live,
// and when the next live view expires (zero if none).
func mergeViews(views []routingv1alpha1.ReplicaView, self string, now time.Time) (
	claims map[string]map[string]fault.PeerClaim, seen map[string]map[string][]string, live int, next time.Time) {
	claims = map[string]map[string]fault.PeerClaim{}
	seen = map[string]map[string][]string{}
	for i := range views {
		v := &views[i]
		exp := viewExpiry(v)
		if v.Name == self || !now.Before(exp) {
			continue
		}
		live++
		if next.IsZero() || exp.Before(next) {
			next = exp
		}
		for _, ri := range v.Spec.Isolations {
			ns, _, ok := scope.ParsePolicyKey(ri.FaultPolicy)
			if !ok {
				continue
			}
			c := fault.PeerClaim{Reason: fault.Reason(ri.Reason), Latency: time.Duration(ri.LatencyMillis) * time.Millisecond, Since: ri.Since.Time}
			if ri.Until != nil {
				if !ri.Until.After(now) {
					continue // over already
				}
				c.Until = ri.Until.Time
			}
			id := scope.Scope{Namespace: ns, Cluster: ri.Cluster}.Broker(ri.BrokerName).String()
			if claims[ri.FaultPolicy] == nil {
				claims[ri.FaultPolicy] = map[string]fault.PeerClaim{}
				seen[ri.FaultPolicy] = map[string][]string{}
			}
			if prev, ok := claims[ri.FaultPolicy][id]; !ok || endsLater(c, prev) {
				claims[ri.FaultPolicy][id] = c
			}
			seen[ri.FaultPolicy][id] = append(seen[ri.FaultPolicy][id], v.Spec.Replica)
		}
	}
	return claims, seen, live, next
}

// endsLater reports whether claim a ends after b: a claim without an end outlasts any other.
func endsLater(a, b fault.PeerClaim) bool {
	switch {
	case b.Until.IsZero():
		return false
	case a.Until.IsZero():
		return true
	}
	return a.Until.After(b.Until)
}

// SetupWithManager registers the merger: every ReplicaView event merges all views again, on
// every replica.
func (m *FleetMerger) SetupWithManager(mgr ctrl.Manager) error {
	toFleet := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleetKey}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleet").
		Watches(&routingv1alpha1.ReplicaView{}, toFleet).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1}).
		Complete(m)
}
