package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqprimitive "github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// Settings of the detour strategy (and of the oracle, which differs only in its route).
const (
	detourPerAttempt    = 400 * time.Millisecond
	detourProbeInterval = 1000 * time.Millisecond
	detourProbeTimeout  = 200 * time.Millisecond
)

var strategyNames = []string{"none", "rocketmq4", "rocketmq5", "detour", "oracle", "rocketmq-client-go"}

// strategyDescriptions say what each strategy is, for the report.
var strategyDescriptions = map[string]string{
	"none": "detour's runtime with the Disabled preset, RocketMQ's default producer (sendLatencyFaultEnable=false): " +
		"no broker is isolated, a retry only avoids the previous attempt's broker; 3 attempts in 3000 ms. Its " +
		"selection is proven step by step against RocketMQ 5.x's and 4.9.x's own classes; the index is shared by " +
		"the benchmark's senders where RocketMQ keeps one per thread",
	"rocketmq4": "detour's runtime with the RocketMQ4 preset, RocketMQ 4.9.x's producer with sendLatencyFaultEnable=true: " +
		"its table (a failed broker isolated for 10 minutes), update rules, selection (index walk, previous broker " +
		"not avoided, pickOneAtLeast) and retry codes, proven step by step against the 4.9.8 client's classes; " +
		"no probing, no pod awareness, no per-attempt cap; 3 attempts in 3000 ms; the index is shared by the " +
		"benchmark's senders where RocketMQ keeps one per thread",
	"rocketmq5": "detour's runtime with the RocketMQ5 preset, RocketMQ 5.3.x's producer with sendLatencyFaultEnable=true: " +
		"its table (a failed broker isolated for 10 s), update rules, selection (last pass unfiltered, index reset " +
		"on retries) and retry codes, proven step by step against the 5.x client's classes; no probing, no pod " +
		"awareness, no per-attempt cap (sendMsgMaxTimeoutPerRequest off); 3 attempts in 3000 ms; the index is " +
		"shared by the benchmark's senders where RocketMQ keeps one per thread",
	"detour": fmt.Sprintf("the Detour preset (RocketMQ 5.x's table and rules, probing with follow-ups of suspects and "+
		"a probation of %d fast good probes in a row after silence, a stall or a repeated isolation, growth on repeat, pod health respected, never "+
		"every broker isolated) with a per-attempt cap of %v instead of 1 s and probes every %v (timeout %v); "+
		"3 attempts in 3000 ms",
		producer.DetourProbationProbes, detourPerAttempt, detourProbeInterval, detourProbeTimeout),
	"oracle":             "the detour policy with the bad broker left out of the route before the run",
	"rocketmq-client-go": "the real rocketmq-client-go v2 producer through brokersim's name server: default round-robin selector, WithRetry(2), WithSendMsgTimeout(3s); it knows nothing of pod state",
}

// sendRec is one send of the workload, with times relative to the start of the run.
type sendRec struct {
	Seq     int           `json:"seq"`
	Due     time.Duration `json:"due"`
	Start   time.Duration `json:"start"`
	Latency time.Duration `json:"latency"`
	OK      bool          `json:"ok"`
	// Broker is the broker that stored the message ("" when the send failed).
	Broker string `json:"broker,omitempty"`
	// Tried lists the broker of every attempt, in order.
	Tried []string `json:"tried"`
	Err   string   `json:"err,omitempty"`
}

// attemptRec is one attempt of a send on one broker.
type attemptRec struct {
	Broker     string
	Start, End time.Duration
	OK         bool
}

// isoRec is an isolation change of the bad broker reported by the runtime.
type isoRec struct {
	At       time.Duration
	Isolated bool
	Reason   string
}

// recorder collects attempts and isolation changes during the measured part of a run. Before
// begin is called (warm-up) it records nothing.
type recorder struct {
	t0 atomic.Pointer[time.Time]

	mu       sync.Mutex
	attempts []attemptRec
	isos     []isoRec
}

func (r *recorder) begin(t0 time.Time) { r.t0.Store(&t0) }

func (r *recorder) since(now time.Time) (time.Duration, bool) {
	t0 := r.t0.Load()
	if t0 == nil {
		return 0, false
	}
	return now.Sub(*t0), true
}

func (r *recorder) attempt(a attemptRec) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

// runtimeMetrics feeds the runtime's per-attempt measurements into a recorder. The runtime calls
// AttemptDone right after each attempt with that attempt's own latency, so the attempt started
// latency before the call.
type runtimeMetrics struct {
	producer.NopMetrics
	rec    *recorder
	policy string
}

func (m runtimeMetrics) AttemptDone(_, broker string, latency time.Duration, outcome fault.Outcome) {
	end, ok := m.rec.since(time.Now())
	if !ok {
		return
	}
	m.rec.attempt(attemptRec{Broker: broker, Start: end - latency, End: end, OK: outcome == fault.Success})
}

func (m runtimeMetrics) IsolationChanged(policy, broker string, isolated bool, reason fault.Reason) {
	at, ok := m.rec.since(time.Now())
	// The runtime's default policy ("") keeps a table of its own that pod marks reach too; only
	// the strategy's policy governs the sends measured here.
	if !ok || broker != badBroker || policy != m.policy {
		return
	}
	m.rec.mu.Lock()
	m.rec.isos = append(m.rec.isos, isoRec{At: at, Isolated: isolated, Reason: string(reason)})
	m.rec.mu.Unlock()
}

// driver sends the workload for one strategy.
type driver interface {
	// send sends one message and fills in the outcome fields of rec (times relative to t0).
	send(ctx context.Context, rec *sendRec, body []byte, t0 time.Time)
	// podTerminating tells the strategy that the bad broker's pod is terminating.
	podTerminating()
	// podReady tells it that the bad broker's (new) pod is ready again, at addr.
	podReady(addr string)
	close()
}

// policyFor returns the runtime policy of a strategy built on detour's runtime: a preset's policy,
// with the detour strategy's tuning.
func policyFor(name string) (producer.Policy, error) {
	preset := map[string]producer.Preset{"none": producer.PresetDisabled, "rocketmq4": producer.PresetRocketMQ4,
		"rocketmq5": producer.PresetRocketMQ5, "detour": producer.PresetDetour, "oracle": producer.PresetDetour}[name]
	if preset == "" {
		return producer.Policy{}, fmt.Errorf("no runtime policy for strategy %q", name)
	}
	p, err := producer.PresetPolicy(name, preset)
	if err != nil || preset != producer.PresetDetour {
		return p, err
	}
	p.Retry.PerAttemptTimeout = detourPerAttempt
	// Only the numbers change: the preset's probation and other probe settings stay.
	p.Probe.Enabled, p.Probe.Interval, p.Probe.Timeout = true, detourProbeInterval, detourProbeTimeout
	return p, nil
}

// runtimeDriver drives detour's producer runtime.
type runtimeDriver struct {
	rt      *producer.Runtime
	brokers map[string]producer.Broker
}

func newRuntimeDriver(strategy string, brokers []brokerInfo, rec *recorder) (*runtimeDriver, error) {
	pol, err := policyFor(strategy)
	if err != nil {
		return nil, err
	}
	rt := producer.New(producer.Options{Metrics: runtimeMetrics{rec: rec, policy: pol.Name}, ProducerGroup: "faultbench"})
	if err := rt.SetPolicy(pol); err != nil {
		rt.Close()
		return nil, err
	}
	d := &runtimeDriver{rt: rt, brokers: make(map[string]producer.Broker)}
	route := producer.Route{Topic: topic, Policy: pol.Name}
	for _, b := range brokers {
		if strategy == "oracle" && b.Name == badBroker {
			// The oracle knows the bad broker in advance: it is neither routed nor even known to the
			// runtime, so not even a probe can reach it.
			continue
		}
		pb := producer.Broker{Name: b.Name, Addr: b.Addr, Ready: true}
		d.brokers[pb.Name] = pb
		rt.SetBroker(pb)
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: b.Name, WriteQueues: queues})
	}
	if err := rt.SetRoute(route); err != nil {
		rt.Close()
		return nil, err
	}
	return d, nil
}

func (d *runtimeDriver) send(ctx context.Context, rec *sendRec, body []byte, t0 time.Time) {
	start := time.Now()
	res, err := d.rt.Send(ctx, &producer.Message{Topic: topic, Body: body})
	rec.Start = start.Sub(t0)
	rec.Latency = time.Since(start)
	if err != nil {
		rec.Err = err.Error()
		var se *producer.SendError
		if errors.As(err, &se) {
			rec.Tried = se.BrokersTried
		}
		return
	}
	rec.OK = true
	rec.Broker = res.Broker
	rec.Tried = res.BrokersTried
}

func (d *runtimeDriver) podTerminating() {
	if b, ok := d.brokers[badBroker]; ok {
		b.Terminating = true
		d.rt.SetBroker(b)
	}
}

func (d *runtimeDriver) podReady(addr string) {
	if b, ok := d.brokers[badBroker]; ok {
		b.Terminating, b.Ready, b.Addr = false, true, addr
		d.brokers[badBroker] = b
		d.rt.SetBroker(b)
	}
}

func (d *runtimeDriver) close() { d.rt.Close() }

// recordingSelector wraps rocketmq-client-go's default round-robin selector and notes, for every
// attempt, when it was selected and which broker it went to. rocketmq-client-go calls the selector
// once per attempt with the same *Message, right before the attempt's request, so this is the one
// place where its attempts can be observed; its interceptors only see the last attempt.
type recordingSelector struct {
	inner rmqproducer.QueueSelector
	mu    sync.Mutex
	picks map[*rmqprimitive.Message][]pick
}

type pick struct {
	broker string
	at     time.Time
}

func (s *recordingSelector) Select(m *rmqprimitive.Message, mqs []*rmqprimitive.MessageQueue, last string) *rmqprimitive.MessageQueue {
	q := s.inner.Select(m, mqs, last)
	if q != nil {
		s.mu.Lock()
		s.picks[m] = append(s.picks[m], pick{broker: q.BrokerName, at: time.Now()})
		s.mu.Unlock()
	}
	return q
}

func (s *recordingSelector) take(m *rmqprimitive.Message) []pick {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.picks[m]
	delete(s.picks, m)
	return p
}

// clientGoDriver drives the real rocketmq-client-go v2 producer.
type clientGoDriver struct {
	p   rocketmq.Producer
	sel *recordingSelector
	rec *recorder
}

var clientGoInstance atomic.Int64

func newClientGoDriver(nameServer string, rec *recorder) (*clientGoDriver, error) {
	sel := &recordingSelector{inner: rmqproducer.NewRoundRobinQueueSelector(), picks: make(map[*rmqprimitive.Message][]pick)}
	// rocketmq-client-go keeps a process-wide client per instance name; each run needs its own.
	n := clientGoInstance.Add(1)
	p, err := rocketmq.NewProducer(
		rmqproducer.WithNameServer([]string{nameServer}),
		rmqproducer.WithGroupName(fmt.Sprintf("faultbench-%d", n)),
		rmqproducer.WithInstanceName(fmt.Sprintf("faultbench-%d-%d", n, time.Now().UnixNano())),
		rmqproducer.WithRetry(2),
		rmqproducer.WithSendMsgTimeout(3*time.Second),
		rmqproducer.WithQueueSelector(sel),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &clientGoDriver{p: p, sel: sel, rec: rec}, nil
}

func (d *clientGoDriver) send(ctx context.Context, rec *sendRec, body []byte, t0 time.Time) {
	m := rmqprimitive.NewMessage(topic, body)
	start := time.Now()
	res, err := d.p.SendSync(ctx, m)
	end := time.Now()
	rec.Start = start.Sub(t0)
	rec.Latency = end.Sub(start)
	if err == nil && res.Status != rmqprimitive.SendOK {
		err = fmt.Errorf("send status %v", res.Status)
	}
	picks := d.sel.take(m)
	for i, pk := range picks {
		rec.Tried = append(rec.Tried, pk.broker)
		// An attempt ends when the next one is selected, the last one when SendSync returns.
		aEnd := end
		if i+1 < len(picks) {
			aEnd = picks[i+1].at
		}
		if _, ok := d.rec.since(pk.at); ok {
			d.rec.attempt(attemptRec{Broker: pk.broker, Start: pk.at.Sub(t0), End: aEnd.Sub(t0),
				OK: err == nil && i+1 == len(picks)})
		}
	}
	if err != nil {
		rec.Err = err.Error()
		return
	}
	rec.OK = true
	if res.MessageQueue != nil {
		rec.Broker = res.MessageQueue.BrokerName
	}
}

func (d *clientGoDriver) podTerminating() {} // it cannot know

func (d *clientGoDriver) podReady(string) {}

func (d *clientGoDriver) close() { _ = d.p.Shutdown() }
