package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// statusWriteInterval is the least time between two status writes of one object.
const statusWriteInterval = time.Second

// Event reasons recorded on FaultPolicies.
const (
	// EventBrokerIsolated is recorded when a broker enters isolation.
	EventBrokerIsolated = "BrokerIsolated"
	// EventBrokerRecovered is recorded when a broker leaves isolation.
	EventBrokerRecovered = "BrokerRecovered"
	// EventDeletionWaits is recorded on a FaultPolicy whose deletion waits for the Topics that use
	// it, at most once a minute.
	EventDeletionWaits = "DeletionWaits"
)

// shared is the state the reconcilers have in common.
type shared struct {
	brokers       *brokerDirectory
	topicWrites   *writeLimiter
	policyWrites  *writeLimiter
	clusterWrites *writeLimiter
	eventWrites   *writeLimiter
	// protectionEvents spaces the Events of deletions that wait for Topics.
	protectionEvents *writeLimiter
	metrics          *Metrics
	recorder         recorder.EventRecorder
	lead             *Leadership
	// describer looks at Clusters' name servers off the reconcilers' workers.
	describer *clusterDescriber
	// policyIsolations and topicIsolations carry FaultPolicy objects (stubs with namespace and
	// name) whose isolations changed, or which the new leader must write; topicResync carries
	// Topics the new leader must write.
	policyIsolations chan event.GenericEvent
	topicIsolations  chan event.GenericEvent
	topicResync      chan event.GenericEvent
	// fleet is what the other replicas learnt; nil when replicas do not share views.
	fleet *fleet
	// secrets reads the credentials Secrets Clusters and Topics name.
	secrets *secretCache
}

// leading reports whether this replica holds leadership (always, without leader election).
func (s *shared) leading() bool { return s.lead.Leading() }

// Options configure Setup.
type Options struct {
	// Leadership decides when this replica writes status, creates topics and records Events;
	// nil means always (no leader election). Setup adds it to the manager.
	Leadership *Leadership
	// Namespace is the one namespace the manager's caches watch (--namespace), or empty for all.
	// The FaultPolicies restored at start are read there only: a manager bound by a Role in that
	// namespace may not list them cluster-wide, and would never turn ready.
	Namespace string
	// DescribeTimeout bounds one look at a Cluster's name servers; 0 means
	// DefaultDescribeTimeout.
	DescribeTimeout time.Duration
	// Fleet, when set, shares what this replica learns with the other replicas through
	// ReplicaViews and merges theirs into the runtime (see FleetOptions); nil keeps each
	// replica to what it learns itself.
	Fleet *FleetOptions
	// ClusterFacades, when set, serves a name-server facade for every Cluster that asks for one
	// (spec.facade); nil serves none.
	ClusterFacades *ClusterFacadeOptions
}

// Controllers is what Setup registered, for the process's health checks.
type Controllers struct {
	restored atomic.Bool
	fleet    *fleet
	facades  *ClusterFacades
}

// ClusterFacadeAddr returns where the facade of a Cluster listens on this replica, if it does.
func (c *Controllers) ClusterFacadeAddr(cluster types.NamespacedName) (string, bool) {
	if c.facades == nil {
		return "", false
	}
	return c.facades.Addr(cluster)
}

// IsolationsRestored reports whether the isolations recorded in FaultPolicy status have been
// restored into the runtime and, when replicas share views, the other replicas' views merged
// once. Until then a replica must not take traffic: it might send to a broker that was isolated a
// moment ago.
func (c *Controllers) IsolationsRestored() bool {
	return c.restored.Load() && (c.fleet == nil || c.fleet.merged.Load())
}

// FleetWrites counts the writes of this replica's ReplicaView; 0 without a fleet.
func (c *Controllers) FleetWrites() uint64 {
	if c.fleet == nil {
		return 0
	}
	return c.fleet.writes.Load()
}

// Setup registers the broker-pod, Topic, Cluster and FaultPolicy reconcilers, the runtime's
// isolation event source, the leadership and the metrics with mgr, and restores the unexpired
// isolations recorded in FaultPolicy status into rt: before it returns when the API server
// answers, else as soon as it does (IsolationsRestored tells). A replica that starts while the API
// server is unreachable therefore waits, not ready, instead of failing. rt should use
// RuntimeMetrics() as its metrics.
func Setup(mgr ctrl.Manager, rt *producer.Runtime, opts Options) (*Controllers, error) {
	lead := opts.Leadership
	if lead == nil {
		lead = AlwaysLeading()
	}
	out := &Controllers{}
	registerPressureMetrics(rt)
	registerHealthMetrics(rt, lead)
	restorer := &isolationRestorer{reader: mgr.GetAPIReader(), namespace: opts.Namespace, rt: rt, done: &out.restored}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := restorer.restore(ctx)
	cancel()
	if err != nil {
		mgr.GetLogger().Error(err, "Restoring isolations from FaultPolicy status failed; retrying until the API server answers")
		if err := mgr.Add(restorer); err != nil {
			return nil, err
		}
	}
	s := &shared{
		brokers:          newBrokerDirectory(),
		topicWrites:      newWriteLimiter(statusWriteInterval),
		policyWrites:     newWriteLimiter(statusWriteInterval),
		clusterWrites:    newWriteLimiter(statusWriteInterval),
		eventWrites:      newWriteLimiter(statusWriteInterval),
		protectionEvents: newWriteLimiter(time.Minute),
		metrics:          RuntimeMetrics(),
		recorder:         mgr.GetEventRecorder("detour"),
		lead:             lead,
		describer:        newClusterDescriber(rt, opts.DescribeTimeout),
		policyIsolations: make(chan event.GenericEvent),
		topicIsolations:  make(chan event.GenericEvent),
		topicResync:      make(chan event.GenericEvent),
		secrets:          newSecretCache(mgr.GetClient(), mgr.GetAPIReader()),
	}
	if opts.Fleet != nil {
		s.fleet = newFleet(*opts.Fleet)
		out.fleet = s.fleet
	}
	c := mgr.GetClient()
	if err := (&BrokerPodReconciler{Client: c, Runtime: rt, brokers: s.brokers}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("broker pod controller: %w", err)
	}
	if err := (&TopicReconciler{Client: c, Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("topic controller: %w", err)
	}
	if err := (&ClusterReconciler{Client: c, Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("cluster controller: %w", err)
	}
	if err := (&FaultPolicyReconciler{Client: c, Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("fault policy controller: %w", err)
	}
	if err := mgr.Add(s.describer); err != nil {
		return nil, err
	}
	if err := setupFleet(mgr, rt, s); err != nil {
		return nil, err
	}
	if o := opts.ClusterFacades; o != nil {
		out.facades = &ClusterFacades{Reader: c, Client: c, APIReader: mgr.GetAPIReader(), Leading: s.leading,
			Runtime: rt, Recorder: mgr.GetEventRecorder("detour-namesrv-facade"), Options: *o}
		if err := out.facades.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("cluster facade controller: %w", err)
		}
	}
	if err := mgr.Add(&isolationPump{Client: c, Runtime: rt, shared: s}); err != nil {
		return nil, err
	}
	if err := mgr.Add(lead); err != nil {
		return nil, err
	}
	if err := mgr.Add(&leaderResync{Client: c, shared: s}); err != nil {
		return nil, err
	}
	return out, nil
}

// isolationRestorer restores isolations from FaultPolicy status, retrying until the API server
// answers.
type isolationRestorer struct {
	reader    client.Reader
	namespace string // "" means all
	rt        *producer.Runtime
	done      *atomic.Bool
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica restores.
func (r *isolationRestorer) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (r *isolationRestorer) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx)
	for wait := time.Second; ; wait = min(2*wait, 10*time.Second) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := r.restore(actx)
		cancel()
		if err == nil {
			log.Info("Isolations restored from FaultPolicy status")
			return nil
		}
		log.V(1).Info("Restoring isolations from FaultPolicy status failed; retrying", "error", err.Error())
	}
}

func (r *isolationRestorer) restore(ctx context.Context) error {
	if err := restoreIsolations(ctx, r.reader, r.namespace, r.rt); err != nil {
		return err
	}
	r.done.Store(true)
	return nil
}

// restoreIsolations pushes every FaultPolicy of namespace ("" means all) into rt with the
// isolations its status records; the runtime keeps only the unexpired ones.
func restoreIsolations(ctx context.Context, c client.Reader, namespace string, rt *producer.Runtime) error {
	var list routingv1alpha1.FaultPolicyList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err
	}
	var clusters routingv1alpha1.ClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(namespace)); err != nil {
		return err
	}
	clusterWide := map[string]bool{}
	for _, cl := range clusters.Items {
		if ref := cl.Spec.FaultPolicyRef; ref != nil {
			clusterWide[PolicyKey(cl.Namespace, ref.Name)] = true
		}
	}
	log := ctrl.LoggerFrom(ctx)
	for i := range list.Items {
		fp := &list.Items[i]
		key := PolicyKey(fp.Namespace, fp.Name)
		rt.Restore(key, faultItems(fp.Namespace, fp.Status.IsolatedBrokers))
		if err := pushPolicy(rt, fp, clusterWide[key]); err != nil {
			log.Error(err, "FaultPolicy not restored", "faultPolicy", klog.KObj(fp))
			continue
		}
		if n := len(fp.Status.IsolatedBrokers); n > 0 {
			log.Info("Isolations restored from status", "faultPolicy", klog.KObj(fp), "brokers", n)
		}
	}
	return nil
}

// faultItems turns the status of a FaultPolicy in namespace back into fault items. Isolations without an end time were held by a
// pod mark (the pod watch re-learns those) or await a probe's proof (the unreachable flag is
// restored, so the broker waits for proof again).
func faultItems(namespace string, isolated []routingv1alpha1.IsolatedBroker) []fault.Item {
	items := make([]fault.Item, 0, len(isolated))
	for _, ib := range isolated {
		it := fault.Item{
			Broker:    BrokerPrefix(namespace) + ib.BrokerName,
			Reason:    fault.Reason(ib.Reason),
			Latency:   time.Duration(ib.LatencyMillis) * time.Millisecond,
			Since:     ib.Since.Time,
			Reachable: ib.Reachable,
		}
		if ib.Cluster != "" {
			it.Broker = ClusterBrokerPrefix(namespace, ib.Cluster) + ib.BrokerName
		}
		if ib.Until != nil {
			it.Until = ib.Until.Time
		}
		items = append(items, it)
	}
	return items
}

// isolationPump turns the runtime's isolation events into Events on the FaultPolicy and into
// reconcile requests for the policy and its Topics. It runs on every replica so that no
// replica's event channel is left unread; only the leader records Events.
type isolationPump struct {
	client.Client
	Runtime *producer.Runtime
	*shared
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *isolationPump) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (p *isolationPump) Start(ctx context.Context) error {
	events := p.Runtime.Events()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			p.handle(ctx, ev)
		}
	}
}

func (p *isolationPump) handle(ctx context.Context, ev producer.IsolationEvent) {
	ns, name, ok := splitPolicyKey(ev.Policy)
	if !ok {
		return // the default policy has no resource to report on
	}
	p.fleet.nudge()
	stub := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if p.leading() && p.eventDue(ev) {
		p.recordEvent(ctx, stub, ev)
	}
	for _, ch := range []chan event.GenericEvent{p.policyIsolations, p.topicIsolations} {
		select {
		case ch <- event.GenericEvent{Object: stub}:
		case <-ctx.Done():
			return
		}
	}
}

// eventDue spaces Events of one broker, policy and direction at least a second apart: a broker
// flapping a thousand times a second must not become a thousand Events a second for the API
// server. The status and the metrics still see every change.
func (p *isolationPump) eventDue(ev producer.IsolationEvent) bool {
	direction := "recovered"
	if ev.Isolated {
		direction = "isolated"
	}
	key := types.NamespacedName{Namespace: ev.Policy, Name: ev.Broker + "/" + direction}
	if p.eventWrites.wait(key) > 0 {
		return false
	}
	p.eventWrites.wrote(key)
	return true
}

func (p *isolationPump) recordEvent(ctx context.Context, stub *routingv1alpha1.FaultPolicy, ev producer.IsolationEvent) {
	var fp routingv1alpha1.FaultPolicy
	if err := p.Get(ctx, client.ObjectKeyFromObject(stub), &fp); err != nil {
		return // deleted meanwhile: nothing to attach the Event to
	}
	it := ev.Item
	broker := ev.Broker
	if cluster, name, ok := splitBrokerID(fp.Namespace, ev.Broker); ok {
		broker = name
		if cluster != "" {
			broker = name + " (Cluster " + cluster + ")"
		}
	}
	if ev.Isolated {
		until := "a successful probe"
		if !it.Until.IsZero() && it.Until.After(time.Now()) {
			until = it.Until.UTC().Format(time.RFC3339)
		}
		p.recorder.Eventf(&fp, nil, corev1.EventTypeWarning, EventBrokerIsolated, "Isolate",
			"Broker %s isolated: %s, latency %dms, until %s", broker, it.Reason, it.Latency.Milliseconds(), until)
		return
	}
	p.recorder.Eventf(&fp, nil, corev1.EventTypeNormal, EventBrokerRecovered, "Recover",
		"Broker %s recovered, latency %dms", broker, it.Latency.Milliseconds())
}

// leaderResync asks every reconciler to write status each time this replica wins the lease:
// while it was not leading, reconciles pushed state into its runtime but wrote nothing.
type leaderResync struct {
	client.Client
	*shared
}

var _ manager.LeaderElectionRunnable = (*leaderResync)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: it follows the Leadership, which
// comes and goes while the process runs.
func (l *leaderResync) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (l *leaderResync) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.lead.won:
		}
		if err := l.resync(ctx); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "Resync after winning the lease failed; the next changes write status")
		}
	}
}

func (l *leaderResync) resync(ctx context.Context) error {
	var policies routingv1alpha1.FaultPolicyList
	if err := l.List(ctx, &policies); err != nil {
		return err
	}
	var topics routingv1alpha1.TopicList
	if err := l.List(ctx, &topics); err != nil {
		return err
	}
	send := func(ch chan event.GenericEvent, obj client.Object) bool {
		select {
		case ch <- event.GenericEvent{Object: obj}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i := range policies.Items {
		if !send(l.policyIsolations, &policies.Items[i]) {
			return nil
		}
	}
	for i := range topics.Items {
		if !send(l.topicResync, &topics.Items[i]) {
			return nil
		}
	}
	return nil
}
