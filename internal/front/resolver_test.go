package front

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/scope"
)

// TestResolverAnswersEveryDoorsRequestFromTheCache proves the one resolver against a real
// informer cache: a RocketMQ topic name finds the Topic declaring it (with its route, its
// brokers' scope and its Cluster's Proxy), a Kubernetes name finds its Topic, and what cannot be
// told apart or is not served is not found, with the Topics named when several declare a topic.
func TestResolverAnswersEveryDoorsRequestFromTheCache(t *testing.T) {
	needsEnvtest(t)
	ns, other := newNamespace(t), newNamespace(t)
	orders, pods, lost, shared := "Orders_"+ns, "Pods_"+ns, "Lost_"+ns, "Shared_"+ns
	create(t, proxiedCluster(ns, "prod", "proxy.shop:8081"),
		clusterTopic(ns, "orders", orders, "prod"),
		podTopic(ns, "pods", pods),
		clusterTopic(ns, "lost", lost, "gone"),
		podTopic(ns, "shared", shared),
		podTopic(other, "shared", shared))
	c := startCache(t, 5, ns, other)
	ctx := context.Background()
	all, served := &Resolver{Reader: c}, &Resolver{Reader: c, Namespace: ns}
	proxy := &Upstream{Addr: "proxy.shop:8081"}

	for _, tc := range []struct {
		name     string
		resolve  func() (Target, error)
		want     Target
		notFound string // a part of the error when the request must not be found
	}{
		{"a topic on a Cluster, with the Cluster's Proxy", func() (Target, error) { return all.ResolveTopic(ctx, ns, orders) },
			Target{Topic: orders, Route: ns + "/orders", Brokers: scope.Cluster(ns, "prod"), Upstream: proxy}, ""},
		{"a topic on broker pods, with no Proxy", func() (Target, error) { return all.ResolveTopic(ctx, ns, pods) },
			Target{Topic: pods, Route: ns + "/pods", Brokers: scope.Pods(ns)}, ""},
		{"a topic whose Cluster does not exist yet, with no Proxy", func() (Target, error) { return all.ResolveTopic(ctx, ns, lost) },
			Target{Topic: lost, Route: ns + "/lost", Brokers: scope.Cluster(ns, "gone")}, ""},
		{"a topic one Topic declares, for a client naming no namespace", func() (Target, error) { return all.ResolveTopic(ctx, "", orders) },
			Target{Topic: orders, Route: ns + "/orders", Brokers: scope.Cluster(ns, "prod"), Upstream: proxy}, ""},
		{"a topic two namespaces declare, for a client naming one", func() (Target, error) { return all.ResolveTopic(ctx, other, shared) },
			Target{Topic: shared, Route: other + "/shared", Brokers: scope.Pods(other)}, ""},
		{"a topic two namespaces declare, for a client naming none", func() (Target, error) { return all.ResolveTopic(ctx, "", shared) },
			Target{}, "Topics " + ns + "/shared, " + other + "/shared all publish"},
		{"a topic declared in another namespace than the client's", func() (Target, error) { return all.ResolveTopic(ctx, other, orders) },
			Target{}, "no Topic publishes " + orders},
		{"a topic no Topic declares", func() (Target, error) { return all.ResolveTopic(ctx, ns, "Refunds") },
			Target{}, "no Topic publishes Refunds"},
		{"a topic two namespaces declare, for a client naming none, where one namespace is served", func() (Target, error) {
			return served.ResolveTopic(ctx, "", shared)
		}, Target{Topic: shared, Route: ns + "/shared", Brokers: scope.Pods(ns)}, ""},
		{"a topic of a namespace not served", func() (Target, error) { return served.ResolveTopic(ctx, other, shared) },
			Target{}, "namespace " + other + " is not served here"},
		{"a Topic by its Kubernetes name, with no Proxy as the gateway forwards nothing", func() (Target, error) {
			return all.ResolveName(ctx, ns, "orders")
		}, Target{Topic: orders, Route: ns + "/orders", Brokers: scope.Cluster(ns, "prod")}, ""},
		{"a Topic by a Kubernetes name nothing has", func() (Target, error) { return all.ResolveName(ctx, ns, "missing") },
			Target{}, "no Topic " + ns + "/missing"},
		{"a Topic by its Kubernetes name in a namespace not served", func() (Target, error) { return served.ResolveName(ctx, other, "shared") },
			Target{}, "namespace " + other + " is not served here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.resolve()
			if tc.notFound != "" {
				if !errors.Is(err, ErrTopicNotFound) || !strings.Contains(err.Error(), tc.notFound) {
					t.Fatalf("got %+v, %v; want not found (%s)", got, err, tc.notFound)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v (upstream %+v), %v; want %+v (upstream %+v)", got, got.Upstream, err, tc.want, tc.want.Upstream)
			}
		})
	}
}

// readCounter is a cache reader that counts the reads through it.
type readCounter struct {
	client.Reader
	reads atomic.Int64
}

func (c *readCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *readCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.reads.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// TestResolverRemembersAnswersUntilATopicOrClusterChanges proves Remember: a request answered
// once is answered again without reading the cache, by RocketMQ topic name and by Kubernetes
// name, found or not; and a Cluster's new Proxy, a new Topic for a name not found before and a
// deleted Topic are each answered as the cache has them once its informers report the change.
func TestResolverRemembersAnswersUntilATopicOrClusterChanges(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	orders, refunds := "Orders_"+ns, "Refunds_"+ns
	cluster, topic := proxiedCluster(ns, "prod", "proxy-a:8081"), clusterTopic(ns, "orders", orders, "prod")
	create(t, cluster, topic)
	c := startCache(t, 1, ns)
	ctx := context.Background()
	reads := &readCounter{Reader: c}
	r := &Resolver{Reader: reads}
	if err := r.Remember(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, ask := range []func() (Target, error){
		func() (Target, error) { return r.ResolveTopic(ctx, ns, orders) },
		func() (Target, error) { return r.ResolveName(ctx, ns, "orders") },
		func() (Target, error) { return r.ResolveTopic(ctx, ns, refunds) },
	} {
		first, err1 := ask()
		before := reads.reads.Load()
		again, err2 := ask()
		if reads.reads.Load() != before || !reflect.DeepEqual(first, again) || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("asked again: %+v, %v after %+v, %v, with %d reads of the cache; want the same answer and none",
				again, err2, first, err1, reads.reads.Load()-before)
		}
	}

	eventuallyAnswers := func(what string, ask func() (Target, error), want func(Target, error) bool) {
		t.Helper()
		poll.Until(t, 30*time.Second, 20*time.Millisecond, what, func() error {
			if got, err := ask(); !want(got, err) {
				return fmt.Errorf("answered %+v, %v", got, err)
			}
			return nil
		})
	}
	cluster.Spec.Proxy.Address = "proxy-b:8081"
	if err := k8sClient.Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	eventuallyAnswers("the Cluster's new Proxy", func() (Target, error) { return r.ResolveTopic(ctx, ns, orders) },
		func(got Target, err error) bool {
			return err == nil && got.Upstream != nil && got.Upstream.Addr == "proxy-b:8081"
		})

	create(t, clusterTopic(ns, "refunds", refunds, "prod"))
	eventuallyAnswers("a new Topic for a name not found before", func() (Target, error) { return r.ResolveTopic(ctx, ns, refunds) },
		func(got Target, err error) bool { return err == nil && got.Route == ns+"/refunds" })

	if err := k8sClient.Delete(ctx, topic); err != nil {
		t.Fatal(err)
	}
	eventuallyAnswers("a deleted Topic not found by its name", func() (Target, error) { return r.ResolveName(ctx, ns, "orders") },
		func(_ Target, err error) bool { return errors.Is(err, ErrTopicNotFound) })
	eventuallyAnswers("nor by its topic", func() (Target, error) { return r.ResolveTopic(ctx, ns, orders) },
		func(_ Target, err error) bool { return errors.Is(err, ErrTopicNotFound) })
}

// TestOnlySpecChangesForgetAnswers: a status write (the same generation) keeps the answers; a
// spec change, or an object the handler cannot read, forgets them.
func TestOnlySpecChangesForgetAnswers(t *testing.T) {
	at := func(gen int64) *routingv1alpha1.Topic {
		return &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
	}
	for _, tc := range []struct {
		name     string
		old, cur any
		want     bool
	}{
		{"a status write", at(3), at(3), false},
		{"a spec change", at(3), at(4), true},
		{"a tombstone", at(3), toolscache.DeletedFinalStateUnknown{}, true},
	} {
		if got := specChanged(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: specChanged %v, want %v", tc.name, got, tc.want)
		}
	}
}
