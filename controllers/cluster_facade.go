package controllers

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
)

// facadeRetry is how soon a Cluster's facade that could not listen (its port taken) is tried
// again.
const facadeRetry = 10 * time.Second

// ClusterFacadeOptions turn on a name-server facade per Cluster that asks for one
// (spec.facade).
type ClusterFacadeOptions struct {
	// Host is the address the facades listen on, with each Cluster's port; "" means every
	// interface.
	Host string
	// Base holds the settings every Cluster's facade shares (bounds, timeouts, metrics, logger);
	// its Addr, View and OnChange are set per Cluster.
	Base facade.Options
	// ServiceNamespace and ServiceSelector, when the selector is set, have the leader keep a
	// Service per Cluster facade in that namespace (the manager's), selecting the manager's pods
	// by those labels.
	ServiceNamespace string
	ServiceSelector  map[string]string
}

// ClusterFacades serves, on every replica, a name-server facade for each Cluster that asks for
// one: a listener on the Cluster's port whose view is that Cluster alone, so one detour fronts
// several RocketMQ clusters and each facade publishes only its own cluster's brokers.
type ClusterFacades struct {
	Reader client.Reader
	// Client writes the facades' Services; APIReader reads them (they are not cached).
	Client    client.Client
	APIReader client.Reader
	// Leading says whether this replica keeps the Services; nil means always.
	Leading  func() bool
	Runtime  *producer.Runtime
	Recorder recorder.EventRecorder
	Options  ClusterFacadeOptions

	mu      sync.Mutex
	serving map[types.NamespacedName]*clusterFacade
	stopped bool
}

// clusterFacade is one Cluster's running facade.
type clusterFacade struct {
	port int32
	srv  *facade.Server
}

// Reconcile starts, moves or stops the Cluster's facade to match its spec.
func (f *ClusterFacades) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cl routingv1alpha1.Cluster
	if err := f.Reader.Get(ctx, req.NamespacedName, &cl); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	} else if err != nil || cl.Spec.Facade == nil || !cl.DeletionTimestamp.IsZero() {
		f.stop(req.NamespacedName)
		return ctrl.Result{}, f.removeService(ctx, req.NamespacedName)
	}
	port := cl.Spec.Facade.Port
	if err := f.keepService(ctx, req.NamespacedName, port); err != nil {
		return ctrl.Result{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return ctrl.Result{}, nil
	}
	if cur := f.serving[req.NamespacedName]; cur != nil {
		if cur.port == port {
			return f.again(), nil
		}
		_ = cur.srv.Close()
		delete(f.serving, req.NamespacedName)
	}
	srv, err := f.start(req.NamespacedName, port)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "The Cluster's name-server facade could not listen; retrying", "cluster", req.NamespacedName, "port", port)
		return ctrl.Result{RequeueAfter: facadeRetry}, nil
	}
	f.serving[req.NamespacedName] = &clusterFacade{port: port, srv: srv}
	ctrl.LoggerFrom(ctx).Info("Serving the Cluster's name-server facade", "cluster", req.NamespacedName, "addr", srv.Addr())
	return f.again(), nil
}

// again is when to look at a Cluster's facade once more: with Services kept, a replica that
// wins the lease creates the missing ones within serviceRecheck, and the leader puts back a
// deleted one within a minute.
func (f *ClusterFacades) again() ctrl.Result {
	switch {
	case len(f.Options.ServiceSelector) == 0:
		return ctrl.Result{}
	case f.servicesKept():
		return ctrl.Result{RequeueAfter: time.Minute}
	}
	return ctrl.Result{RequeueAfter: serviceRecheck}
}

// serviceRecheck is how often a replica that does not lead looks whether it leads now, to keep
// the facades' Services.
const serviceRecheck = 10 * time.Second

// start listens for one Cluster. Callers hold mu.
func (f *ClusterFacades) start(key types.NamespacedName, port int32) (*facade.Server, error) {
	if f.serving == nil {
		f.serving = map[types.NamespacedName]*clusterFacade{}
	}
	view := &FacadeView{Reader: f.Reader, Runtime: f.Runtime, Cluster: key}
	opts := f.Options.Base
	opts.Addr = net.JoinHostPort(f.Options.Host, strconv.Itoa(int(port)))
	opts.View = view
	opts.Logger = opts.Logger.WithValues("cluster", key.String())
	if f.Recorder != nil {
		opts.OnChange = (&FacadeEvents{View: view, Recorder: f.Recorder}).Record
	}
	return facade.Start(opts)
}

// stop closes a Cluster's facade, if it has one.
func (f *ClusterFacades) stop(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.serving[key]; cur != nil {
		_ = cur.srv.Close()
		delete(f.serving, key)
	}
}

// Addr returns where the Cluster's facade listens, if it does.
func (f *ClusterFacades) Addr(key types.NamespacedName) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.serving[key]; cur != nil {
		return cur.srv.Addr(), true
	}
	return "", false
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves clients.
func (f *ClusterFacades) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it closes every facade when the manager stops.
func (f *ClusterFacades) Start(ctx context.Context) error {
	<-ctx.Done()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for key, cur := range f.serving {
		_ = cur.srv.Close()
		delete(f.serving, key)
	}
	return nil
}

// SetupWithManager registers the facades: a reconciler of Clusters on every replica, and a
// runnable that closes them at the end.
func (f *ClusterFacades) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(f); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterfacade").
		For(&routingv1alpha1.Cluster{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(f)
}
