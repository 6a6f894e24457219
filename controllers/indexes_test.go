package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// startIndexedCache runs a manager with the field indexes and no controllers until the test ends,
// and returns its cached client: the mappers then read what the controllers' watches read.
func startIndexedCache(t *testing.T) client.Client {
	t.Helper()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := indexFields(ctx, mgr); err != nil {
		t.Fatalf("indexing: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache never synced")
	}
	return mgr.GetClient()
}

// indexedTopic is a Topic of the index test: on the Cluster cluster (creating itself when create)
// or, with cluster empty, on a broker selector; naming the FaultPolicy policy unless it is empty.
func indexedTopic(ns, name, cluster string, create bool, policy string) *routingv1alpha1.Topic {
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{TopicName: "T_" + name, WriteQueueNums: 1, ReadQueueNums: 1, Perm: 6}}
	if cluster != "" {
		topic.Spec.ClusterRef = &routingv1alpha1.ClusterReference{Name: cluster}
		topic.Spec.Create = ptr.To(create)
	} else {
		topic.Spec.BrokerSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	}
	if policy != "" {
		topic.Spec.FaultPolicyRef = &routingv1alpha1.FaultPolicyReference{Name: policy}
	}
	return topic
}

// indexedCluster is a Cluster of the index test, naming the FaultPolicy policy unless it is empty.
func indexedCluster(ns, name, policy string) *routingv1alpha1.Cluster {
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{"127.0.0.1:9876"}}}
	if policy != "" {
		cl.Spec.FaultPolicyRef = &routingv1alpha1.FaultPolicyReference{Name: policy}
	}
	return cl
}

// requestKeys names the requests' objects as namespace/name, sorted.
func requestKeys(reqs []reconcile.Request) []string {
	keys := make([]string, 0, len(reqs))
	for _, r := range reqs {
		keys = append(keys, r.String())
	}
	slices.Sort(keys)
	return keys
}

// objectKeys names the objects as namespace/name, sorted.
func objectKeys[T any, P interface {
	*T
	client.Object
}](objs []T) []string {
	keys := make([]string, 0, len(objs))
	for i := range objs {
		keys = append(keys, client.ObjectKeyFromObject(P(&objs[i])).String())
	}
	slices.Sort(keys)
	return keys
}

// TestIndexedMappersAskForExactlyTheObjectsNamingTheChangedOne proves that the watches' mappers,
// a policy's users and the facade's view, which list by the cache's field indexes, find exactly
// the objects of the changed object's namespace whose reference names it: not those without a
// reference, those naming another object, nor those of another namespace that name one of the
// same name.
func TestIndexedMappersAskForExactlyTheObjectsNamingTheChangedOne(t *testing.T) {
	needsEnvtest(t)
	ctx := context.Background()
	c := startIndexedCache(t)
	ns, other := newNamespace(t), newNamespace(t)
	objs := []client.Object{
		indexedCluster(ns, "prod", "p"),
		indexedCluster(ns, "plain", ""),
		indexedCluster(ns, "on-q", "q"),
		indexedTopic(ns, "on-p", "", false, "p"),
		indexedTopic(ns, "plain", "", false, ""),
		indexedTopic(ns, "on-q", "", false, "q"),
		indexedTopic(ns, "on-prod", "prod", false, ""),
		indexedTopic(ns, "made-on-prod", "prod", true, "p"),
		indexedTopic(ns, "made-on-plain", "plain", true, ""),
		indexedCluster(other, "prod", "p"),
		indexedTopic(other, "on-p", "", false, "p"),
		indexedTopic(other, "made-on-prod", "prod", true, ""),
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", client.ObjectKeyFromObject(o), err)
		}
	}
	eventually(t, "the cache holds every object", func() error {
		var topics routingv1alpha1.TopicList
		var clusters routingv1alpha1.ClusterList
		if err := c.List(ctx, &topics); err != nil {
			return err
		}
		if err := c.List(ctx, &clusters); err != nil {
			return err
		}
		if n := countIn(topics.Items, ns, other) + countIn(clusters.Items, ns, other); n != len(objs) {
			return fmt.Errorf("%d of %d objects cached", n, len(objs))
		}
		return nil
	})

	topics := &TopicReconciler{Client: c}
	clusters := &ClusterReconciler{Client: c}
	policy := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
	cluster := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}
	key := func(name string) string { return ns + "/" + name }
	for _, tc := range []struct {
		name string
		got  func(t *testing.T) []string
		want []string
	}{
		{"Topics of a FaultPolicy", func(*testing.T) []string { return requestKeys(topics.topicsOfPolicy(ctx, policy)) },
			[]string{key("made-on-prod"), key("on-p")}},
		{"Topics of a Cluster", func(*testing.T) []string { return requestKeys(topics.topicsOfCluster(ctx, cluster)) },
			[]string{key("made-on-prod"), key("on-prod")}},
		{"Topics creating themselves on a Cluster whose look finished", func(*testing.T) []string {
			return requestKeys(lookedRequests(topics, client.ObjectKeyFromObject(cluster)))
		}, []string{key("made-on-prod")}},
		{"Clusters of a FaultPolicy", func(*testing.T) []string { return requestKeys(clusters.clustersOfPolicy(ctx, policy)) },
			[]string{key("prod")}},
		{"Topics using a FaultPolicy", func(t *testing.T) []string { return objectKeys(policyUsersOf(t, c, policy).topics) },
			[]string{key("made-on-prod"), key("on-p")}},
		{"Clusters using a FaultPolicy", func(t *testing.T) []string { return objectKeys(policyUsersOf(t, c, policy).clusters) },
			[]string{key("prod")}},
		{"The Topic on a Cluster declaring a RocketMQ topic another namespace's declares too", func(*testing.T) []string {
			return declaringKeys(ctx, c, cluster, "T_made-on-prod")
		}, []string{key("made-on-prod")}},
		{"The Topic on a Cluster declaring a RocketMQ topic only broker pods serve", func(*testing.T) []string {
			return declaringKeys(ctx, c, cluster, "T_on-p")
		}, []string{}},
		{"Users of a FaultPolicy nothing names", func(t *testing.T) []string {
			unused := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unused"}}
			u := policyUsersOf(t, c, unused)
			return append(objectKeys(u.topics), objectKeys(u.clusters)...)
		}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(t); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// declaringKeys names the Topic the facade's view finds declaring topic on cl, if any.
func declaringKeys(ctx context.Context, c client.Reader, cl *routingv1alpha1.Cluster, topic string) []string {
	t, ok := declaringTopic(ctx, c, cl, topic)
	if !ok {
		return []string{}
	}
	return []string{client.ObjectKeyFromObject(t).String()}
}

// countIn counts the objects that live in one of the namespaces.
func countIn[T any, P interface {
	*T
	client.Object
}](objs []T, namespaces ...string) int {
	n := 0
	for i := range objs {
		if slices.Contains(namespaces, P(&objs[i]).GetNamespace()) {
			n++
		}
	}
	return n
}

// lookedRequests is what clusterLooked asks the Topic controller for, read off a queue of its own.
func lookedRequests(r *TopicReconciler, cluster client.ObjectKey) []reconcile.Request {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.routeChanged.q.Store(&q)
	r.clusterLooked(cluster)
	reqs := make([]reconcile.Request, 0, q.Len())
	for q.Len() > 0 {
		req, _ := q.Get()
		reqs = append(reqs, req)
		q.Done(req)
	}
	return reqs
}

// policyUsersOf is usersOf, failing the test on an error.
func policyUsersOf(t *testing.T, c client.Reader, fp *routingv1alpha1.FaultPolicy) policyUsers {
	t.Helper()
	u, err := usersOf(context.Background(), c, fp)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
