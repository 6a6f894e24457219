package front

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
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
			Target{Topic: orders, Route: ns + "/orders", Brokers: ClusterScope(ns, "prod"), Upstream: proxy}, ""},
		{"a topic on broker pods, with no Proxy", func() (Target, error) { return all.ResolveTopic(ctx, ns, pods) },
			Target{Topic: pods, Route: ns + "/pods", Brokers: PodScope(ns)}, ""},
		{"a topic whose Cluster does not exist yet, with no Proxy", func() (Target, error) { return all.ResolveTopic(ctx, ns, lost) },
			Target{Topic: lost, Route: ns + "/lost", Brokers: ClusterScope(ns, "gone")}, ""},
		{"a topic one Topic declares, for a client naming no namespace", func() (Target, error) { return all.ResolveTopic(ctx, "", orders) },
			Target{Topic: orders, Route: ns + "/orders", Brokers: ClusterScope(ns, "prod"), Upstream: proxy}, ""},
		{"a topic two namespaces declare, for a client naming one", func() (Target, error) { return all.ResolveTopic(ctx, other, shared) },
			Target{Topic: shared, Route: other + "/shared", Brokers: PodScope(other)}, ""},
		{"a topic two namespaces declare, for a client naming none", func() (Target, error) { return all.ResolveTopic(ctx, "", shared) },
			Target{}, "Topics " + ns + "/shared, " + other + "/shared all publish"},
		{"a topic declared in another namespace than the client's", func() (Target, error) { return all.ResolveTopic(ctx, other, orders) },
			Target{}, "no Topic publishes " + orders},
		{"a topic no Topic declares", func() (Target, error) { return all.ResolveTopic(ctx, ns, "Refunds") },
			Target{}, "no Topic publishes Refunds"},
		{"a topic two namespaces declare, for a client naming none, where one namespace is served", func() (Target, error) {
			return served.ResolveTopic(ctx, "", shared)
		}, Target{Topic: shared, Route: ns + "/shared", Brokers: PodScope(ns)}, ""},
		{"a topic of a namespace not served", func() (Target, error) { return served.ResolveTopic(ctx, other, shared) },
			Target{}, "namespace " + other + " is not served here"},
		{"a Topic by its Kubernetes name, with no Proxy as the gateway forwards nothing", func() (Target, error) {
			return all.ResolveName(ctx, ns, "orders")
		}, Target{Topic: orders, Route: ns + "/orders", Brokers: ClusterScope(ns, "prod")}, ""},
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
