package producer

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
)

const testTopic = "TopicTest"

// simCluster is a runtime wired to brokersim brokers over loopback TCP.
type simCluster struct {
	r       *Runtime
	brokers map[string]*brokersim.Broker
	names   []string
	queues  int
	rec     *recordingMetrics
	clock   *fault.ManualClock
}

type clusterOpt func(*Options, *Policy)

// withPolicy edits the policy the test topic uses (named "test").
func withPolicy(f func(*Policy)) clusterOpt { return func(_ *Options, p *Policy) { f(p) } }

// withSlowNeverIsolating swaps the RocketMQ5 table for one where only failures isolate (10s), so
// tests that count messages per queue do not depend on how fast a loaded machine answers.
func withSlowNeverIsolating(t testing.TB) clusterOpt {
	tab, err := fault.NewTable([]fault.Rule{{LatencyMillis: 0, IsolationMillis: 0}, {LatencyMillis: 60000, IsolationMillis: 10000}}, 60000)
	if err != nil {
		t.Fatal(err)
	}
	return withPolicy(func(p *Policy) { p.Table = tab })
}

// withManualClock freezes the fault tables' clock, so isolations only end when a test says so.
func withManualClock() clusterOpt {
	return func(o *Options, _ *Policy) { o.Clock = fault.NewManualClock(time.Unix(1_700_000_000, 0)) }
}

func startCluster(t testing.TB, queues int, names []string, opts ...clusterOpt) *simCluster {
	t.Helper()
	c := &simCluster{brokers: map[string]*brokersim.Broker{}, names: names, queues: queues, rec: newRecordingMetrics()}
	o := Options{Metrics: c.rec, ExpiryInterval: 10 * time.Millisecond}
	p := plainPolicy("test")
	for _, f := range opts {
		f(&o, &p)
	}
	if mc, ok := o.Clock.(*fault.ManualClock); ok {
		c.clock = mc
	}
	c.r = New(o)
	t.Cleanup(func() { c.r.Close() })
	if err := c.r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	rt := Route{Topic: testTopic, Policy: "test"}
	for _, n := range names {
		b, err := brokersim.StartBroker(n, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.CreateTopic(testTopic, queues)
		c.brokers[n] = b
		c.r.SetBroker(Broker{Name: n, Addr: b.Addr(), Ready: true})
		rt.Brokers = append(rt.Brokers, BrokerQueues{Broker: n, WriteQueues: queues})
	}
	if err := c.r.SetRoute(rt); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *simCluster) send(t testing.TB, body string) (*SendResult, error) {
	t.Helper()
	return c.r.Send(context.Background(), &Message{Topic: testTopic, Body: []byte(body)})
}

// storedByUniq maps every stored message's UNIQ_KEY to the brokers (one entry per copy) holding it.
func (c *simCluster) storedByUniq() map[string][]string {
	out := map[string][]string{}
	for name, b := range c.brokers {
		for q := 0; q < c.queues; q++ {
			for _, m := range b.Messages(testTopic, q) {
				k := m.UniqKey
				out[k] = append(out[k], name)
			}
		}
	}
	return out
}

// stored counts the messages brokers hold for the test topic.
func (c *simCluster) stored() int {
	n := 0
	for _, b := range c.brokers {
		for q := 0; q < c.queues; q++ {
			n += len(b.Messages(testTopic, q))
		}
	}
	return n
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 15*time.Second, 2*time.Millisecond, what, poll.True(cond))
}

// attempt is one AttemptDone call.
type attempt struct {
	policy, broker string
	latency        time.Duration
	outcome        fault.Outcome
}

// recordingMetrics keeps every call for assertions.
type recordingMetrics struct {
	mu        sync.Mutex
	attempts  []attempt
	sends     int
	failures  int
	retries   int
	hedges    map[HedgeEvent]int
	isolation []IsolationEvent
	stalls    []string
}

func newRecordingMetrics() *recordingMetrics { return &recordingMetrics{} }

func (m *recordingMetrics) SendDone(_ string, _ SendMode, _ int, _ time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sends++
	if err != nil {
		m.failures++
	}
}

func (m *recordingMetrics) AttemptDone(policy, broker string, latency time.Duration, o fault.Outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts = append(m.attempts, attempt{policy, broker, latency, o})
}

func (m *recordingMetrics) Retried(string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retries++
}

func (m *recordingMetrics) IsolationChanged(policy, broker string, isolated bool, reason fault.Reason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.isolation = append(m.isolation, IsolationEvent{Policy: policy, Broker: broker, Isolated: isolated, Item: fault.Item{Reason: reason}})
}

func (m *recordingMetrics) EventCoalesced(string, string) {}

func (m *recordingMetrics) AttemptStalled(_, broker string, _ bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stalls = append(m.stalls, broker)
}

// stalled returns the brokers of the attempts reported stalled, in order.
func (m *recordingMetrics) stalled() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.stalls)
}

func (m *recordingMetrics) Hedged(_ string, e HedgeEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hedges == nil {
		m.hedges = map[HedgeEvent]int{}
	}
	m.hedges[e]++
}

// hedgeCount returns how often e was reported.
func (m *recordingMetrics) hedgeCount(e HedgeEvent) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hedges[e]
}

func (m *recordingMetrics) snapshotAttempts() []attempt {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]attempt(nil), m.attempts...)
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
