package front

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// startNameServer is a brokersim broker holding topics behind a brokersim name server; it
// returns the name server's address.
func startNameServer(tb testing.TB, topics ...string) string {
	tb.Helper()
	b, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	for _, t := range topics {
		b.CreateTopic(t, 2)
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", b)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Close() })
	return ns.Addr()
}

// servingCluster is a Cluster named name in ns that serves undeclared topics from the name server
// at addr under the FaultPolicy "default".
func servingCluster(ns, name, addr string, serve routingv1alpha1.UndeclaredTopicsPolicy) *routingv1alpha1.Cluster {
	c := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{addr}, UndeclaredTopics: serve,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}}
	return c
}

// TestUndeclaredTopicResolvesToTheClusterThatServesIt proves the rules by which a request for a
// topic no Topic declares finds its Cluster, against a real informer cache and a real runtime
// asking a name server: the namespace's one serving Cluster, the default Cluster among several,
// a declared Topic first, and clear refusals naming why (no serving Cluster, several, the name
// servers not publishing the topic, a Cluster that serves declared topics only).
func TestUndeclaredTopicResolvesToTheClusterThatServesIt(t *testing.T) {
	needsEnvtest(t)
	ns, two, refusing := newNamespace(t), newNamespace(t), newNamespace(t)
	undeclared, declared := "Undeclared_"+ns, "Declared_"+ns
	addr := startNameServer(t, undeclared, declared)
	prod := servingCluster(ns, "prod", addr, routingv1alpha1.UndeclaredTopicsServe)
	prod.Spec.Proxy = &routingv1alpha1.ClusterProxy{Address: "proxy.shop:8081"}
	create(t, prod, clusterTopic(ns, "declared", declared, "prod"),
		servingCluster(two, "a", addr, routingv1alpha1.UndeclaredTopicsServe),
		servingCluster(two, "b", addr, routingv1alpha1.UndeclaredTopicsServe),
		servingCluster(refusing, "old", addr, routingv1alpha1.UndeclaredTopicsRefuse))
	c := startCache(t, 1, ns, two, refusing)
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	ctx := context.Background()
	r := &Resolver{Reader: c, Routes: rt}
	withDefault := &Resolver{Reader: c, Routes: rt, DefaultCluster: client.ObjectKey{Namespace: two, Name: "b"}}
	onProd := UndeclaredTarget(prod, undeclared)

	for _, tc := range []struct {
		name     string
		resolve  func() (Target, error)
		route    string // the route key the answer must carry, "" for a refusal
		notFound string // a part of the refusal
	}{
		{"the namespace's one serving Cluster", func() (Target, error) { return r.ResolveTopic(ctx, ns, undeclared) }, onProd.Route, ""},
		{"a declared Topic before its Cluster", func() (Target, error) { return r.ResolveTopic(ctx, ns, declared) }, ns + "/declared", ""},
		{"a topic the name servers do not publish", func() (Target, error) { return r.ResolveTopic(ctx, ns, "Nowhere") },
			"", "the name servers of Cluster " + ns + "/prod do not publish topic Nowhere"},
		{"several serving Clusters and no default", func() (Target, error) { return r.ResolveTopic(ctx, two, undeclared) },
			"", "Clusters " + two + "/a, " + two + "/b all serve undeclared topics"},
		{"several serving Clusters, one the default", func() (Target, error) { return withDefault.ResolveTopic(ctx, two, undeclared) },
			scope.Cluster(two, "b").UndeclaredRoute(undeclared), ""},
		{"no namespace named, the default among every serving Cluster", func() (Target, error) { return withDefault.ResolveTopic(ctx, "", undeclared) },
			scope.Cluster(two, "b").UndeclaredRoute(undeclared), ""},
		{"no namespace named, several serving Clusters", func() (Target, error) { return r.ResolveTopic(ctx, "", undeclared) },
			"", "all serve undeclared topics"},
		{"a namespace whose Cluster serves declared topics only", func() (Target, error) { return r.ResolveTopic(ctx, refusing, undeclared) },
			"", "no Cluster serves undeclared topics"},
		{"the gateway's request on a serving Cluster", func() (Target, error) { return r.ResolveClusterTopic(ctx, ns, "prod", undeclared) },
			onProd.Route, ""},
		{"the gateway's request for a topic a Topic declares there", func() (Target, error) {
			return r.ResolveClusterTopic(ctx, ns, "prod", declared)
		}, ns + "/declared", ""},
		{"the gateway's request on a Cluster serving declared topics only", func() (Target, error) {
			return r.ResolveClusterTopic(ctx, refusing, "old", undeclared)
		}, "", "which serves declared topics only"},
		{"the gateway's request on a Cluster that does not exist", func() (Target, error) {
			return r.ResolveClusterTopic(ctx, ns, "nosuch", undeclared)
		}, "", "no Cluster " + ns + "/nosuch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.resolve()
			if tc.notFound != "" {
				if !errors.Is(err, ErrTopicNotFound) || !strings.Contains(err.Error(), tc.notFound) {
					t.Fatalf("got %+v, %v; want not found (%s)", got, err, tc.notFound)
				}
				return
			}
			if err != nil || got.Route != tc.route {
				t.Fatalf("got route %q, %v; want %q", got.Route, err, tc.route)
			}
			if _, ok := rt.RouteInfo(got.RouteKey()); !ok && got.Undeclared != nil {
				t.Fatalf("the runtime holds no route %s after the answer", got.RouteKey())
			}
		})
	}
	if onProd.Upstream == nil || onProd.Upstream.Addr != "proxy.shop:8081" || onProd.Brokers != scope.Cluster(ns, "prod") ||
		onProd.Undeclared.Policy != ns+"/default" || onProd.Undeclared.MetricsTopic != ns+"/prod/*" {
		t.Fatalf("an undeclared topic's target %+v (route %+v) lacks its Cluster's Proxy, scope, policy or metrics label", onProd, onProd.Undeclared)
	}
}

// TestUndeclaredTopicsBeyondTheRateAreBusy proves that a flood of new topics is answered ErrBusy
// by the resolver, and that a topic already in use still resolves meanwhile.
func TestUndeclaredTopicsBeyondTheRateAreBusy(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	inUse := "InUse_" + ns
	addr := startNameServer(t, inUse)
	create(t, servingCluster(ns, "prod", addr, routingv1alpha1.UndeclaredTopicsServe))
	c := startCache(t, 0, ns)
	rt := producer.New(producer.Options{UndeclaredTopics: producer.UndeclaredTopicOptions{LoadBurst: 1, LoadsPerSecond: 0.001}})
	t.Cleanup(func() { rt.Close() })
	r := &Resolver{Reader: c, Routes: rt}
	ctx := context.Background()
	if _, err := r.ResolveTopic(ctx, ns, inUse); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ResolveTopic(ctx, ns, "Random1"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a new topic beyond the rate: %v, want ErrBusy", err)
	}
	if _, err := r.ResolveTopic(ctx, ns, inUse); err != nil {
		t.Fatalf("the topic in use, during the flood: %v", err)
	}
}
