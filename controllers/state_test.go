package controllers

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/detourmq/detour/pkg/producer"
)

// TestWriteLimiterSpacesWritesOfOneObject proves the coalescing rule: the first write is free,
// the next waits out the interval, other objects are independent, and a deleted object starts
// afresh.
func TestWriteLimiterSpacesWritesOfOneObject(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newWriteLimiter(time.Second)
	l.now = func() time.Time { return now }
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

	if d := l.wait(a); d != 0 {
		t.Fatalf("first write waits %v", d)
	}
	l.wrote(a)
	now = now.Add(300 * time.Millisecond)
	if d := l.wait(a); d != 700*time.Millisecond {
		t.Errorf("second write waits %v, want 700ms", d)
	}
	if d := l.wait(b); d != 0 {
		t.Errorf("another object waits %v", d)
	}
	now = now.Add(700 * time.Millisecond)
	if d := l.wait(a); d != 0 {
		t.Errorf("after the interval the write waits %v", d)
	}
	l.wrote(a)
	l.forget(a)
	if d := l.wait(a); d != 0 {
		t.Errorf("a forgotten object waits %v", d)
	}
}

// TestBrokerDirectoryKeepsAReplacementMaster proves that when a new pod takes over a broker
// (a rollout), forgetting the old pod does not remove the broker.
func TestBrokerDirectoryKeepsAReplacementMaster(t *testing.T) {
	d := newBrokerDirectory()
	oldPod := types.NamespacedName{Namespace: "ns", Name: "broker-a-master-0"}
	newPod := types.NamespacedName{Namespace: "ns", Name: "broker-a-master-0-v2"}
	d.set(oldPod, "ns/broker-a")
	d.set(newPod, "ns/broker-a")
	if owned := d.forget(oldPod); len(owned) != 0 {
		t.Errorf("forget(old) = %q; want nothing owned", owned)
	}
	if got := d.podOf("ns/broker-a"); got != newPod.Name {
		t.Errorf("podOf = %q, want %q", got, newPod.Name)
	}
	if owned := d.forget(newPod); !slices.Equal(owned, []string{"ns/broker-a"}) {
		t.Errorf("forget(new) = %q; want ns/broker-a owned", owned)
	}
	if owned := d.forget(newPod); len(owned) != 0 {
		t.Error("forgetting twice owned the broker again")
	}
}

// TestBrokerDirectoryDropsScopesAPodLeaves proves a pod backs one identity per scope that selects
// it, and that a scope it leaves (a Cluster whose selector no longer picks it) is reported for
// removal while the others stay.
func TestBrokerDirectoryDropsScopesAPodLeaves(t *testing.T) {
	d := newBrokerDirectory()
	pod := types.NamespacedName{Namespace: "ns", Name: "broker-a-master-0"}
	if dropped := d.set(pod, "ns/broker-a", "ns/prod/broker-a"); len(dropped) != 0 {
		t.Fatalf("first set dropped %q", dropped)
	}
	if dropped := d.set(pod, "ns/broker-a"); !slices.Equal(dropped, []string{"ns/prod/broker-a"}) {
		t.Fatalf("set without the Cluster dropped %q, want ns/prod/broker-a", dropped)
	}
	if d.podOf("ns/prod/broker-a") != "" || d.podOf("ns/broker-a") != pod.Name {
		t.Fatalf("podOf after the Cluster left: %q, %q", d.podOf("ns/prod/broker-a"), d.podOf("ns/broker-a"))
	}
}

// TestEventsAreSpacedPerBrokerAndDirection proves a flapping broker costs at most one Event per
// direction per second, while a different broker or the opposite direction is not held back.
func TestEventsAreSpacedPerBrokerAndDirection(t *testing.T) {
	now := time.Unix(1000, 0)
	limiter := newWriteLimiter(time.Second)
	limiter.now = func() time.Time { return now }
	p := &isolationPump{shared: &shared{eventWrites: limiter}}
	ev := func(broker string, isolated bool) producer.IsolationEvent {
		return producer.IsolationEvent{Policy: "ns/p", Broker: broker, Isolated: isolated}
	}
	steps := []struct {
		advance time.Duration
		event   producer.IsolationEvent
		want    bool
	}{
		{0, ev("b", true), true},
		{0, ev("b", false), true},
		{100 * time.Millisecond, ev("b", true), false},
		{0, ev("b", false), false},
		{0, ev("c", true), true},
		{900 * time.Millisecond, ev("b", true), true},
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		if got := p.eventDue(st.event); got != st.want {
			t.Errorf("step %d (%+v): eventDue = %v, want %v", i, st.event, got, st.want)
		}
	}
}
