package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/detourmq/detour/pkg/metrics"
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
	metrics          *metrics.Runtime
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
	// Metrics are the process's collectors: the controllers count into its Runtime and point
	// its figures computed at scrape at rt and the Leadership. nil uses an unregistered set.
	Metrics *metrics.Set
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
// opts.Metrics.Runtime as its metrics.
func Setup(mgr ctrl.Manager, rt *producer.Runtime, opts Options) (*Controllers, error) {
	lead := opts.Leadership
	if lead == nil {
		lead = AlwaysLeading()
	}
	out := &Controllers{}
	set := opts.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	set.Observe(rt, lead.Leading)
	if err := restoreOrRetry(mgr, rt, opts.Namespace, &out.restored); err != nil {
		return nil, err
	}
	s := newShared(mgr, rt, opts, set, lead)
	if opts.Fleet != nil {
		s.fleet = newFleet(*opts.Fleet)
		out.fleet = s.fleet
		set.ObserveFleet(s.fleet.figures)
	}
	if err := indexFields(context.Background(), mgr); err != nil {
		return nil, err
	}
	if err := setupReconcilers(mgr, rt, s); err != nil {
		return nil, err
	}
	if err := mgr.Add(s.describer); err != nil {
		return nil, err
	}
	if err := setupFleet(mgr, rt, s); err != nil {
		return nil, err
	}
	if o := opts.ClusterFacades; o != nil {
		c := mgr.GetClient()
		out.facades = &ClusterFacades{Reader: c, Client: c, APIReader: mgr.GetAPIReader(), Leading: s.leading,
			Runtime: rt, Recorder: mgr.GetEventRecorder("detour-namesrv-facade"), Options: *o}
		if err := out.facades.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("cluster facade controller: %w", err)
		}
	}
	return out, addRunnables(mgr, rt, s, lead)
}

// restoreOrRetry puts the isolations the FaultPolicies' status records back into rt before
// any controller starts. When the API server does not answer in time, the restorer is added to
// mgr instead and keeps trying; done is set once they are restored.
func restoreOrRetry(mgr ctrl.Manager, rt *producer.Runtime, namespace string, done *atomic.Bool) error {
	restorer := &isolationRestorer{reader: mgr.GetAPIReader(), namespace: namespace, rt: rt, done: done}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := restorer.restore(ctx)
	cancel()
	if err == nil {
		return nil
	}
	mgr.GetLogger().Error(err, "Restoring isolations from FaultPolicy status failed; retrying until the API server answers")
	return mgr.Add(restorer)
}

// newShared builds the state the reconcilers share: the broker directory, the status and Event
// write limiters, the metrics, the recorder, the describer and the channels that wake them.
func newShared(mgr ctrl.Manager, rt *producer.Runtime, opts Options, set *metrics.Set, lead *Leadership) *shared {
	return &shared{
		brokers:          newBrokerDirectory(),
		topicWrites:      newWriteLimiter(statusWriteInterval),
		policyWrites:     newWriteLimiter(statusWriteInterval),
		clusterWrites:    newWriteLimiter(statusWriteInterval),
		eventWrites:      newWriteLimiter(statusWriteInterval),
		protectionEvents: newWriteLimiter(time.Minute),
		metrics:          set.Runtime,
		recorder:         mgr.GetEventRecorder("detour"),
		lead:             lead,
		describer:        newClusterDescriber(rt, opts.DescribeTimeout),
		policyIsolations: make(chan event.GenericEvent),
		topicIsolations:  make(chan event.GenericEvent),
		topicResync:      make(chan event.GenericEvent),
		secrets:          newSecretCache(mgr.GetClient(), mgr.GetAPIReader()),
	}
}

// setupReconcilers registers the broker-pod, Topic, Cluster and FaultPolicy reconcilers with mgr.
func setupReconcilers(mgr ctrl.Manager, rt *producer.Runtime, s *shared) error {
	c := mgr.GetClient()
	if err := (&BrokerPodReconciler{Client: c, Runtime: rt, brokers: s.brokers}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("broker pod controller: %w", err)
	}
	if err := (&TopicReconciler{Client: c, Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("topic controller: %w", err)
	}
	if err := (&ClusterReconciler{Client: c, Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("cluster controller: %w", err)
	}
	if err := (&FaultPolicyReconciler{Client: c, Runtime: rt, shared: s}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("fault policy controller: %w", err)
	}
	return nil
}

// addRunnables adds what runs beside the reconcilers: the isolation pump, the leadership and the
// resync a new leader runs.
func addRunnables(mgr ctrl.Manager, rt *producer.Runtime, s *shared, lead *Leadership) error {
	c := mgr.GetClient()
	if err := mgr.Add(&isolationPump{Client: c, Runtime: rt, shared: s}); err != nil {
		return err
	}
	if err := mgr.Add(lead); err != nil {
		return err
	}
	return mgr.Add(&leaderResync{Client: c, shared: s})
}
