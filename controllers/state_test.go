package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
	d.set(oldPod, "broker-a")
	d.set(newPod, "broker-a")
	if broker, owned := d.forget(oldPod); broker != "broker-a" || owned {
		t.Errorf("forget(old) = %q, %v; want broker-a, not owned", broker, owned)
	}
	if got := d.podOf("broker-a"); got != newPod.Name {
		t.Errorf("podOf = %q, want %q", got, newPod.Name)
	}
	if broker, owned := d.forget(newPod); broker != "broker-a" || !owned {
		t.Errorf("forget(new) = %q, %v; want broker-a, owned", broker, owned)
	}
	if _, owned := d.forget(newPod); owned {
		t.Error("forgetting twice owned the broker again")
	}
}
