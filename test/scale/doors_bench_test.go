package scale

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

var (
	// scaleTopics is the Topics of the large worlds; a smaller number fits a slower machine.
	scaleTopics = flag.Int("scale.topics", 10000, "Topics of BenchmarkDoorsAtScale's large worlds (one namespace; ten namespaces of a tenth each)")
	// scaleRounds repeats every door's sizes, interleaved, so noise shows beside the ratios.
	scaleRounds = flag.Int("scale.rounds", 1, "rounds of BenchmarkDoorsAtScale, each measuring every door at every size in turn")
)

// BenchmarkDoorsAtScale sends through each door of four worlds built in one run: one Topic; one
// Topic again (the control: what a ratio shows between worlds of one size); -scale.topics
// (10,000) in one namespace; and as many spread over ten namespaces of a Cluster each. Each
// world is what one manager holds: an informer cache of the API server's Topics with the
// spec.topicName index, a runtime routing every Topic, a brokersim broker (and name server)
// answering as the real ones do, and the doors as the manager wires them:
//   - grpc: a SendMessage over a gRPC connection to internal/grpcfront's Server, resolved by
//     front.Resolver (by RocketMQ topic name in the client's namespace), sent by the runtime;
//   - gateway: one message posted over HTTP to internal/gateway's server, resolved by
//     Kubernetes name, sent by the runtime;
//   - facade: a route request to pkg/facade's server fronting the first namespace's Cluster,
//     forwarded to the name server and checked against controllers.FacadeView;
//   - facade-sole-cluster: the same to a facade whose view names no Cluster (the process-wide
//     facade without --namesrv-facade-cluster, which looks for the only Cluster there is on every
//     request), in the worlds of one Cluster.
//
// Requests take the Topics in turn (the fronted Cluster's, for the facade), so the large worlds
// read all over their caches and routes. Every door runs its worlds one after the other (their
// allocs/op), then all of them paired request by request (the ratios of their ns per request,
// under the same load), round after round.
func BenchmarkDoorsAtScale(b *testing.B) {
	needsEnvtest(b)
	n := *scaleTopics
	worlds := []*world{
		newWorld(b, "1", layout{namespaces: []string{"scale-one"}, perNS: 1}),
		// A second world of one Topic: its ratio to the first is what the pairing itself
		// shows when size does not differ.
		newWorld(b, "1-again", layout{namespaces: []string{"scale-one-again"}, perNS: 1}),
		newWorld(b, fmt.Sprint(n), layout{namespaces: []string{"scale-big"}, perNS: n}),
		newWorld(b, fmt.Sprintf("10x%d", n/10), layout{namespaces: tenNamespaces(), perNS: n / 10}),
	}
	for round := range *scaleRounds {
		for _, door := range doors() {
			served := door.served(b, worlds)
			for _, w := range served {
				b.Run(fmt.Sprintf("%s/topics=%s/round=%d", door.name, w.name, round), func(b *testing.B) {
					next := door.prepare(b, w)
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						if err := next(i); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run(fmt.Sprintf("%s/paired/round=%d", door.name, round), func(b *testing.B) { benchPaired(b, door, served) })
		}
	}
}

// served are the worlds the door can be measured in (its prepare is not nil for them).
func (d door) served(b *testing.B, worlds []*world) []*world {
	var out []*world
	for _, w := range worlds {
		if d.prepare(b, w) != nil {
			out = append(out, w)
		}
	}
	return out
}

// benchPaired sends one request to every world per iteration, the worlds' order rotating, and
// times each: the worlds share every moment of the machine's load. Reported per world: the median
// ns per request, and (<world>/1, the first world being the one Topic) the median over iterations
// of the ratio of that world's request to the one Topic's, so that a request the scheduler held
// up in one world moves one ratio, not the figure.
func benchPaired(b *testing.B, d door, worlds []*world) {
	nexts := make([]func(int) error, len(worlds))
	for i, w := range worlds {
		nexts[i] = d.prepare(b, w)
	}
	spent := make([][]float64, len(worlds))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k := range worlds {
			w := (i + k) % len(worlds)
			start := time.Now()
			if err := nexts[w](i); err != nil {
				b.Fatal(err)
			}
			spent[w] = append(spent[w], float64(time.Since(start)))
		}
	}
	b.StopTimer()
	for w := range worlds {
		b.ReportMetric(median(spent[w]), "ns/req@"+worlds[w].name)
		if w == 0 {
			continue
		}
		ratios := make([]float64, len(spent[w]))
		for i := range ratios {
			ratios[i] = spent[w][i] / spent[0][i]
		}
		b.ReportMetric(median(ratios), worlds[w].name+"/1")
	}
}

// median is the middle of xs (sorted in place).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// tenNamespaces are the namespaces of the spread world.
func tenNamespaces() []string {
	out := make([]string, 10)
	for i := range out {
		out[i] = fmt.Sprintf("scale-ten-%d", i)
	}
	return out
}

// door is one door's request: prepare builds a world's requests before the clock starts and
// returns the i-th request's call.
type door struct {
	name    string
	prepare func(b *testing.B, w *world) func(i int) error
}

// doors are the three doors measured.
func doors() []door {
	return []door{
		{"grpc", prepareGRPC},
		{"gateway", prepareGateway},
		{"facade", prepareFacade},
		{"facade-sole-cluster", prepareSoleFacade},
	}
}

// prepareGRPC builds a SendMessage request for every Topic of w.
func prepareGRPC(b *testing.B, w *world) func(int) error {
	ctx, cancel := context.WithTimeout(grpcContext(context.Background()), time.Hour)
	b.Cleanup(cancel)
	reqs := make([]*rmqpb.SendMessageRequest, len(w.topics))
	for i := range w.topics {
		reqs[i] = grpcRequest(&w.topics[i], i)
	}
	return func(i int) error { return w.sendGRPC(ctx, reqs[i%len(reqs)]) }
}

// prepareGateway builds the gateway's URL of every Topic of w.
func prepareGateway(b *testing.B, w *world) func(int) error {
	urls := make([]string, len(w.topics))
	for i := range w.topics {
		urls[i] = w.gatewayURL(&w.topics[i])
	}
	body := bytes.Repeat([]byte("x"), 128)
	return func(i int) error { return w.sendGateway(urls[i%len(urls)], body) }
}

// prepareFacade builds a route request for every Topic of w's fronted Cluster.
func prepareFacade(b *testing.B, w *world) func(int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	reqs := make([]*remoting.Command, len(w.fronted))
	for i := range w.fronted {
		reqs[i] = remoting.NewGetRouteInfoRequest(w.fronted[i].Spec.TopicName)
	}
	return func(i int) error { return w.askRoute(ctx, w.facade, reqs[i%len(reqs)]) }
}

// prepareSoleFacade is prepareFacade against the facade whose view names no Cluster; nil for a
// world of several Clusters, where that facade has no name servers to answer with.
func prepareSoleFacade(b *testing.B, w *world) func(int) error {
	if w.sole == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	reqs := make([]*remoting.Command, len(w.fronted))
	for i := range w.fronted {
		reqs[i] = remoting.NewGetRouteInfoRequest(w.fronted[i].Spec.TopicName)
	}
	return func(i int) error { return w.askRoute(ctx, w.sole, reqs[i%len(reqs)]) }
}
