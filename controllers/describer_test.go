package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/detourmq/detour/internal/testsupport/nstest"
	"github.com/detourmq/detour/pkg/producer"
)

// TestAStoppedDescriberStartsNoLook proves that once the manager stops the describer, a reconcile
// still running asks for a look and none starts: a look started then would add to the wait group
// the stop is waiting on (a data race the race detector reported) and its result nobody reads.
// Reconciles ask while the stop happens, and the same ask before the stop starts a look.
func TestAStoppedDescriberStartsNoLook(t *testing.T) {
	// A silent name server keeps a started look in flight until the stop ends it.
	nsrv := nstest.StartSilent(t)
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { _ = rt.Close() })
	d := newClusterDescriber(rt, time.Second)
	inFlight := func(key types.NamespacedName) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.looks[key] != nil && d.looks[key].inFlight
	}
	nameServers := []string{nsrv.Addr()}

	before := types.NamespacedName{Namespace: "ns", Name: "before"}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- d.Start(ctx) }()
	d.latest(before, nameServers, time.Second)
	if !inFlight(before) {
		t.Fatal("a look asked for before the stop did not start")
	}

	// Reconciles keep asking, for Clusters of their own, while the manager stops.
	var asking sync.WaitGroup
	for i := range 4 {
		asking.Go(func() {
			key := types.NamespacedName{Namespace: "ns", Name: string(rune('a' + i))}
			for range 200 {
				d.latest(key, nameServers, time.Second)
				d.forget(key)
			}
		})
	}
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the describer did not stop")
	}
	asking.Wait()

	after := types.NamespacedName{Namespace: "ns", Name: "after"}
	if res, _ := d.latest(after, nameServers, time.Second); res.done || inFlight(after) {
		t.Fatalf("a look asked for after the stop started (done %v, in flight %v)", res.done, inFlight(after))
	}
}
