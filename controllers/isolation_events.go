package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

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
	ns, name, ok := scope.ParsePolicyKey(ev.Policy)
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
	//docgen:not-identity a key of the Events' rate limit, never read back
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
	if b, ok := scope.ParseBrokerID(ev.Broker); ok && b.Scope.Namespace == fp.Namespace {
		broker = b.Name
		if b.Scope.Cluster != "" {
			broker = b.Name + " (Cluster " + b.Scope.Cluster + ")"
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
