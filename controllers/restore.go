package controllers

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

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
			clusterWide[scope.PolicyKey(cl.Namespace, ref.Name)] = true
		}
	}
	log := ctrl.LoggerFrom(ctx)
	for i := range list.Items {
		fp := &list.Items[i]
		key := scope.PolicyKey(fp.Namespace, fp.Name)
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
			Broker:    scope.Scope{Namespace: namespace, Cluster: ib.Cluster}.Broker(ib.BrokerName).String(),
			Reason:    fault.Reason(ib.Reason),
			Latency:   time.Duration(ib.LatencyMillis) * time.Millisecond,
			Since:     ib.Since.Time,
			Reachable: ib.Reachable,
		}
		if ib.Until != nil {
			it.Until = ib.Until.Time
		}
		items = append(items, it)
	}
	return items
}
