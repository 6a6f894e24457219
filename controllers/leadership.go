package controllers

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Leadership says whether this replica leads: the leader writes status, creates topics on
// brokers and records Events; every replica, leader or not, keeps its runtime current and serves
// the gateway and the facade. Unlike controller-runtime's own leader election, which stops the
// manager when the lease is lost, losing the lease here (an API-server outage longer than the
// renew deadline, a paused process) only stops the leader's work: the replica keeps serving, and
// campaigns again, for as long as the process runs.
type Leadership struct {
	// config is nil when leader election is off: the replica always leads.
	config  *leaderelection.LeaderElectionConfig
	leading atomic.Bool
	// won carries one notification per election won, for the resync that writes what the
	// replica did not write while it was not leading.
	won chan struct{}
	log logr.Logger
}

// LeaseTimings are the leader election's durations; zero values take controller-runtime's
// defaults (15 s lease, 10 s renew deadline, 2 s retry period).
type LeaseTimings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// AlwaysLeading is the Leadership of a replica without leader election.
func AlwaysLeading() *Leadership {
	return &Leadership{won: make(chan struct{}, 1), log: logr.Discard()}
}

// The elector keeps its Lease in the operator's own namespace ("system" in config/, the release
// namespace in the chart), and records core/v1 Events on it when leadership changes hands, so a
// Role there grants both.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=system

// NewLeadership campaigns for the Lease namespace/name with the API server of cfg.
func NewLeadership(cfg *rest.Config, namespace, name string, timings LeaseTimings, log logr.Logger) (*Leadership, error) {
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	l := &Leadership{won: make(chan struct{}, 1), log: log}
	l.config = &leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            name,
		LeaseDuration:   orDefault(timings.LeaseDuration, 15*time.Second),
		RenewDeadline:   orDefault(timings.RenewDeadline, 10*time.Second),
		RetryPeriod:     orDefault(timings.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true, // a replica that stops hands the lease over at once
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { l.setLeading(true) },
			OnStoppedLeading: func() { l.setLeading(false) },
		},
	}
	return l, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Leading reports whether this replica leads now.
func (l *Leadership) Leading() bool { return l.leading.Load() }

func (l *Leadership) setLeading(v bool) {
	if l.leading.Swap(v) == v {
		return
	}
	if !v {
		l.log.Info("Leadership lost: status writes, topic creation and Events stop; the runtime and the gateway keep serving")
		return
	}
	l.log.Info("Leadership won: writing status")
	select {
	case l.won <- struct{}{}:
	default: // a resync is pending already
	}
}

var _ manager.LeaderElectionRunnable = (*Leadership)(nil)

// NeedLeaderElection implements manager.LeaderElectionRunnable: it is the election.
func (l *Leadership) NeedLeaderElection() bool { return false }

// Start campaigns until ctx ends, again after every lost lease.
func (l *Leadership) Start(ctx context.Context) error {
	if l.config == nil {
		l.setLeading(true)
		<-ctx.Done()
		return nil
	}
	for {
		le, err := leaderelection.NewLeaderElector(*l.config)
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns when the lease is lost or ctx ends
		l.setLeading(false)
		if ctx.Err() != nil {
			return nil
		}
		// Campaign again after a pause, so that an API server that refuses every request is not
		// hammered by a tight loop.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.config.RetryPeriod):
		}
	}
}
