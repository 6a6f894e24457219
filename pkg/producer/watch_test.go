package producer

import (
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// watchPolicy is Detour's with fast probe rounds and the routed-broker watch switched as given.
func watchPolicy(routed bool) func(*Policy) {
	return func(p *Policy) {
		*p = DefaultPolicy(p.Name)
		p.Probe.Interval = 50 * time.Millisecond
		p.Probe.Timeout = 40 * time.Millisecond
		p.Retry.PerAttemptTimeout = 300 * time.Millisecond
		p.Probe.Routed = routed
	}
}

// TestWatchFindsSilentBrokersWithoutTraffic proves that with Probe.Routed the runtime learns,
// with no send at all, which routed brokers are silent (black hole, refused connections): they
// are held out as ProbeFailed, while a broker that answers, even "busy", and a healthy one stay
// in; the silent broker is readmitted once it answers again (after its probation's good probes,
// in a row). The same
// runtime without the watch learns nothing.
func TestWatchFindsSilentBrokersWithoutTraffic(t *testing.T) {
	cases := []struct {
		name  string
		fault brokersim.Fault
	}{
		{"black hole", brokersim.Fault{BlackHole: true}},
		{"refused connections", brokersim.Fault{Refuse: true}},
	}
	names := []string{"broker-a", "broker-b", "broker-c", "broker-d"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			watched := startCluster(t, 2, names, withPolicy(watchPolicy(true)))
			silent, busy := watched.brokers["broker-b"], watched.brokers["broker-c"]
			unwatched := New(Options{ExpiryInterval: 10 * time.Millisecond})
			t.Cleanup(func() { unwatched.Close() })
			p := DefaultPolicy("test")
			watchPolicy(false)(&p)
			if err := unwatched.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
			route := Route{Topic: testTopic, Policy: "test"}
			for _, n := range names {
				unwatched.SetBroker(Broker{Name: n, Addr: watched.brokers[n].Addr(), Ready: true})
				route.Brokers = append(route.Brokers, BrokerQueues{Broker: n, WriteQueues: 2})
			}
			if err := unwatched.SetRoute(route); err != nil {
				t.Fatal(err)
			}

			busy.SetFault(brokersim.Fault{Code: remoting.SystemBusy})
			silent.SetFault(tc.fault)
			waitFor(t, "the silent broker held out", func() bool { return len(watched.r.Isolated("test")) > 0 })
			// The round that found the silent broker has judged the others too: they answered
			// long before its probe gave up.
			items := watched.r.Isolated("test")
			if len(items) != 1 || items[0].Broker != "broker-b" || items[0].Reason != fault.ReasonProbeFailed || items[0].Reachable {
				t.Fatalf("held out %+v, want broker-b alone, ProbeFailed and unreachable", items)
			}
			if got := unwatched.Isolated("test"); len(got) != 0 {
				t.Errorf("without the watch the runtime holds out %+v, want nothing (no send measured anything)", got)
			}
			if sent := watched.rec.snapshotAttempts(); len(sent) != 0 {
				t.Fatalf("%d send attempts, want none: the watch alone found the broker", len(sent))
			}

			silent.SetFault(brokersim.Fault{})
			waitFor(t, "the broker readmitted once it answers", func() bool { return len(watched.r.Isolated("test")) == 0 })
		})
	}
}

// TestWatchFollowsTheRoutesOfItsPolicy proves the watch probes only brokers its policy's routes
// use: a silent broker routed under another policy is not held out by this one.
func TestWatchFollowsTheRoutesOfItsPolicy(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withPolicy(watchPolicy(true)))
	other, err := brokersim.StartBroker("broker-x", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	other.CreateTopic("OtherTopic", 2)
	c.r.SetBroker(Broker{Name: "broker-x", Addr: other.Addr(), Ready: true})
	if err := c.r.SetRoute(Route{Topic: "OtherTopic", Brokers: []BrokerQueues{{Broker: "broker-x", WriteQueues: 2}}}); err != nil {
		t.Fatal(err)
	}
	// broker-x refuses at once and broker-a makes its probe wait the whole attempt timeout, so
	// when broker-a is held out a probe of broker-x in the same round would have been judged.
	other.SetFault(brokersim.Fault{Refuse: true})
	c.brokers["broker-a"].SetFault(brokersim.Fault{BlackHole: true})
	waitFor(t, "broker-a held out", func() bool { return len(c.r.Isolated("test")) > 0 })
	if items := c.r.Isolated("test"); len(items) != 1 || items[0].Broker != "broker-a" {
		t.Fatalf("policy test holds out %+v, want broker-a alone", items)
	}
}

// TestProbeRoundsDriftAcrossAPeriodicStall proves probe rounds are spread over interval ±50 %, so
// a stall that repeats with the probe interval's period cannot hide in the same phase: over 200
// rounds the start phases cover the whole of one interval.
func TestProbeRoundsDriftAcrossAPeriodicStall(t *testing.T) {
	const interval = time.Second
	var at time.Duration
	covered := make([]bool, 10) // tenths of the interval
	for range 200 {
		d := jittered(interval)
		if d < interval/2 || d > interval*3/2 {
			t.Fatalf("round after %v, want within %v..%v", d, interval/2, interval*3/2)
		}
		at += d
		covered[(at%interval)*10/interval] = true
	}
	for i, ok := range covered {
		if !ok {
			t.Errorf("no round started in tenth %d of the stall's period: a stall there would never be probed", i)
		}
	}
}
