package front

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// benchTopics is the large namespace of BenchmarkResolve; a smaller one fits a slower machine.
var benchTopics = flag.Int("front.topics", 10000, "Topics in the large namespace of BenchmarkResolve")

// BenchmarkResolve resolves each door's request against a real informer cache filled from
// envtest, with one Topic and with -front.topics (10,000) in one namespace, each in a cache of
// its own, the two sizes measured one after the other for every door, so that one run shows a
// request costing the same however many Topics there are:
//   - grpc: the gRPC endpoint's request, by RocketMQ topic name in the client's namespace, with
//     the Get of the Topic's Cluster for its Proxy;
//   - grpc-any-namespace: the same from a client naming no namespace (the index's
//     all-namespaces key);
//   - gateway: the HTTP gateway's request, by Kubernetes name;
//   - listing: what the gRPC endpoint did before the index, a list of the namespace filtered by
//     topic name, for the record of what the index saves.
//
// Requests take the Topics in turn, so the large case reads all over the cache, not one entry.
func BenchmarkResolve(b *testing.B) {
	needsEnvtest(b)
	type size struct {
		ns     string
		names  []string // the Topics' Kubernetes names
		topics []string // their RocketMQ topics, built before the clock runs
		r      *Resolver
	}
	ctx := context.Background()
	var sizes []size
	for _, n := range []int{1, *benchTopics} {
		start := time.Now()
		sz := size{ns: newNamespace(b)}
		sz.names = benchNamespace(b, sz.ns, n)
		sz.r = &Resolver{Reader: startCache(b, n, sz.ns)}
		for _, name := range sz.names {
			sz.topics = append(sz.topics, "T_"+name)
		}
		// The first request starts the informers it reads (the Cluster's): a manager's start,
		// not a request.
		if _, err := sz.r.ResolveTopic(ctx, sz.ns, sz.topics[0]); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d Topics created and cached in %v", n, time.Since(start).Round(time.Millisecond))
		sizes = append(sizes, sz)
	}
	doors := []struct {
		name    string
		resolve func(sz *size, i int) error
	}{
		{"grpc", func(sz *size, i int) error { _, err := sz.r.ResolveTopic(ctx, sz.ns, sz.topics[i]); return err }},
		{"grpc-any-namespace", func(sz *size, i int) error { _, err := sz.r.ResolveTopic(ctx, "", sz.topics[i]); return err }},
		{"gateway", func(sz *size, i int) error { _, err := sz.r.ResolveName(ctx, sz.ns, sz.names[i]); return err }},
		{"listing", func(sz *size, i int) error { return listAndFilter(ctx, sz.r.Reader, sz.ns, sz.topics[i]) }},
	}
	for _, door := range doors {
		for i := range sizes {
			sz := &sizes[i]
			b.Run(fmt.Sprintf("%s/topics=%d", door.name, len(sz.names)), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := door.resolve(sz, i%len(sz.names)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// listAndFilter is the lookup the gRPC endpoint made before the index: every Topic of the
// namespace, deep-copied out of the cache, then filtered by topic name.
func listAndFilter(ctx context.Context, r client.Reader, ns, topic string) error {
	var list routingv1alpha1.TopicList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		if list.Items[i].Spec.TopicName == topic {
			return nil
		}
	}
	return fmt.Errorf("no Topic publishes %s", topic)
}

// benchNamespace creates, in ns, a Cluster with a Proxy and n Topics on it, t00000 … declaring
// T_t00000 …, from a few writers at once, and returns the Topics' names.
func benchNamespace(b *testing.B, ns string, n int) []string {
	b.Helper()
	create(b, proxiedCluster(ns, "prod", "proxy.shop:8081"))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("t%05d", i)
	}
	const writers = 16
	next := make(chan string)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for name := range next {
				if err := k8sClient.Create(context.Background(), clusterTopic(ns, name, "T_"+name, "prod")); err != nil {
					errs <- fmt.Errorf("creating Topic %s/%s: %w", ns, name, err)
					return
				}
			}
		})
	}
feed:
	for _, name := range names {
		select {
		case next <- name:
		case err := <-errs:
			b.Error(err)
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Error(err)
	}
	if b.Failed() {
		b.FailNow()
	}
	return names
}
