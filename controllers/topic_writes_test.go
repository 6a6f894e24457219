package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/nstest"
	"github.com/detourmq/detour/pkg/producer"
)

// topicWrites records, from the API server's watch of a namespace's Topics, the Ready condition
// ("Status/Reason") of every write of each Topic, by name.
type topicWrites struct {
	mu     sync.Mutex
	byName map[string][]string
}

// watchTopicWrites starts recording the writes of the Topics of ns until the test ends.
func watchTopicWrites(t *testing.T, ns string) *topicWrites {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := k8sWatchClient.Watch(ctx, &routingv1alpha1.TopicList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	tw := &topicWrites{byName: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			topic, ok := ev.Object.(*routingv1alpha1.Topic)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			ready := "none"
			if c := apimeta.FindStatusCondition(topic.Status.Conditions, routingv1alpha1.ConditionReady); c != nil {
				ready = string(c.Status) + "/" + c.Reason
			}
			tw.mu.Lock()
			tw.byName[topic.Name] = append(tw.byName[topic.Name], ready)
			tw.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return tw
}

// of is the Ready condition of each write of the Topic name so far.
func (tw *topicWrites) of(name string) []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return slices.Clone(tw.byName[name])
}

// refusingAddr is a loopback address nothing listens on: connections to it are refused at once.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestClusterTopicsFirstStatusWriteIsTheNameServersAnswer proves a Topic on a Cluster is written
// once on its way to what its name servers say: its first status write already holds their
// answer (Ready, or why not), never the transient RouteResolving first. Only a Topic whose name
// server holds the request without answering is written RouteResolving, after the grace, so it
// still gets a status.
func TestClusterTopicsFirstStatusWriteIsTheNameServersAnswer(t *testing.T) {
	needsEnvtest(t)
	// The silent name server holds requests far longer than the test, as a stopped process does.
	startManagerWith(t, producer.Options{NameServerTimeout: 10 * time.Minute}, Options{DescribeTimeout: 10 * time.Minute})
	ns := newNamespace(t)
	writes := watchTopicWrites(t, ns)
	answering := nstest.StartScripted(t, nstest.RouteBody(2, 4, "127.0.0.1:10911", 0))
	notPublishing := nstest.StartScripted(t, nil)
	silent := nstest.StartSilent(t)
	cases := []struct {
		name       string
		nameServer string
		want       string
		// notBefore is the least time from the Topic's creation to its first write.
		notBefore time.Duration
	}{
		{"answering name server: Ready", answering.Addr(), "True/" + routingv1alpha1.ReasonReconciled, 0},
		{"name server without the topic: not published", notPublishing.Addr(), "False/" + routingv1alpha1.ReasonTopicNotPublished, 0},
		{"name server refusing connections: unreachable", refusingAddr(t), "False/" + routingv1alpha1.ReasonNameServersUnreachable, 0},
		{"name server that never answers: resolving, after the grace", silent.Addr(), "Unknown/" + routingv1alpha1.ReasonRouteResolving,
			routeResolvingGrace},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprint("first-write-", i)
			createCluster(t, ns, name, tc.nameServer)
			start := time.Now()
			createClusterTopic(t, ns, name, name, false)
			eventually(t, "the Topic's first status write", func() error {
				if len(writes.of(name)) == 0 {
					return errors.New("no write yet")
				}
				return nil
			})
			took := time.Since(start)
			t.Logf("first write within %v of the Topic's creation", took.Round(time.Millisecond))
			if got := writes.of(name); got[0] != tc.want {
				t.Errorf("writes %v, want the first to be %s", got, tc.want)
			}
			if took < tc.notBefore {
				t.Errorf("first write within %v of the creation, want not before %v", took, tc.notBefore)
			}
		})
	}
}
