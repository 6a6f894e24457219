package producer

import (
	"fmt"
	"testing"
)

// BenchmarkSetRouteAmongTopics measures replacing one topic's route while the runtime holds n
// topics, as name-server refreshes do for every topic every 30 s, and selection on a runtime of
// that size: a route change must not cost in proportion to the other topics, and selection must
// stay flat.
func BenchmarkSetRouteAmongTopics(b *testing.B) {
	for _, n := range []int{100, 1000, 5000, 20000} {
		r := New(Options{})
		b.Cleanup(func() { _ = r.Close() })
		brokers := []BrokerQueues{{Broker: "broker-a", WriteQueues: 4}, {Broker: "broker-b", WriteQueues: 4}, {Broker: "broker-c", WriteQueues: 4}}
		for _, name := range []string{"broker-a", "broker-b", "broker-c"} {
			r.SetBroker(Broker{Name: name, Addr: "127.0.0.1:1", Ready: true})
		}
		for i := range n {
			if err := r.SetRoute(Route{Topic: fmt.Sprintf("T%d", i), Brokers: brokers}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("set/topics=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := r.SetRoute(Route{Topic: fmt.Sprintf("T%d", i%n), Brokers: brokers}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("select/topics=%d", n), func(b *testing.B) {
			topic := fmt.Sprintf("T%d", n/2)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.SelectQueue(topic, ""); !ok {
					b.Fatal("no queue")
				}
			}
		})
	}
}

// BenchmarkWatchRoundAmongTopics measures what a probe round with Probe.Routed computes before
// any I/O while the runtime holds n topics under the policy: the routed brokers to watch and each
// probe's topic. It runs once per probe interval and policy, so its cost per second is this
// figure divided by the interval.
func BenchmarkWatchRoundAmongTopics(b *testing.B) {
	for _, n := range []int{100, 1000, 20000} {
		r := New(Options{})
		b.Cleanup(func() { _ = r.Close() })
		p := DefaultPolicy("watched")
		p.Probe.Routed = true
		if err := r.SetPolicy(p); err != nil {
			b.Fatal(err)
		}
		brokers := []BrokerQueues{{Broker: "broker-a", WriteQueues: 8}, {Broker: "broker-b", WriteQueues: 8}, {Broker: "broker-c", WriteQueues: 8}}
		for _, name := range []string{"broker-a", "broker-b", "broker-c"} {
			r.SetBroker(Broker{Name: name, Addr: "127.0.0.1:1", Ready: true})
		}
		for i := range n {
			if err := r.SetRoute(Route{Topic: fmt.Sprintf("T%d", i), Brokers: brokers, Policy: "watched"}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st := r.state.Load()
				watched := st.routedBrokers("watched", nil)
				if len(watched) != 3 {
					b.Fatalf("watching %v", watched)
				}
				_ = st.probeTopics(watched)
			}
		})
	}
}
