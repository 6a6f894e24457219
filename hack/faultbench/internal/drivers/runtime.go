package drivers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	rmqprimitive "github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
	"github.com/detourmq/detour/pkg/producer"
)

// policyFor returns the runtime policy of a strategy built on detour's runtime: a preset's policy,
// with the detour strategy's tuning, and hedging on for the hedging strategies.
func policyFor(name string) (producer.Policy, error) {
	base := map[string]string{strategy.DetourHedge: "detour", strategy.OracleHedge: "oracle"}[name]
	if base == "" {
		base = name
	}
	preset := map[string]producer.Preset{"none": producer.PresetDisabled, "rocketmq4": producer.PresetRocketMQ4,
		"rocketmq5": producer.PresetRocketMQ5, "detour": producer.PresetDetour, "oracle": producer.PresetDetour}[base]
	if preset == "" {
		return producer.Policy{}, fmt.Errorf("no runtime policy for strategy %q", name)
	}
	p, err := producer.PresetPolicy(base, preset)
	if err != nil || preset != producer.PresetDetour {
		return p, err
	}
	p.Retry.PerAttemptTimeout = strategy.DetourPerAttempt
	// Only the numbers change: the preset's probation and other probe settings stay.
	p.Probe.Enabled, p.Probe.Interval, p.Probe.Timeout = true, strategy.DetourProbeInterval, strategy.DetourProbeTimeout
	// The default budget (producer.DefaultHedgeBudgetPercent): the one users get when they turn it on.
	p.Hedge.Enabled = strategy.Hedges(name)
	return p, nil
}

// RuntimeDriver drives detour's producer runtime.
type RuntimeDriver struct {
	// Runtime is the runtime it sends through, which the doors in front of it (the gateway, the
	// gRPC endpoint) and the facade's view are built on.
	Runtime *producer.Runtime
	brokers map[string]producer.Broker
}

// NewRuntimeDriver builds a runtime with the strategy's policy over brokers, its attempts and
// isolation changes recorded by rec.
func NewRuntimeDriver(name string, brokers []scenario.BrokerInfo, rec *Recorder) (*RuntimeDriver, error) {
	pol, err := policyFor(name)
	if err != nil {
		return nil, err
	}
	rt := producer.New(producer.Options{Metrics: runtimeMetrics{rec: rec, policy: pol.Name}, ProducerGroup: "faultbench"})
	if err := rt.SetPolicy(pol); err != nil {
		rt.Close()
		return nil, err
	}
	d := &RuntimeDriver{Runtime: rt, brokers: make(map[string]producer.Broker)}
	route := producer.Route{Topic: scenario.Topic, Policy: pol.Name}
	for _, b := range brokers {
		if strategy.IsOracle(name) && b.Name == scenario.BadBroker {
			// The oracle knows the bad broker in advance: it is neither routed nor even known to the
			// runtime, so not even a probe can reach it.
			continue
		}
		pb := producer.Broker{Name: b.Name, Addr: b.Addr, Ready: true}
		d.brokers[pb.Name] = pb
		rt.SetBroker(pb)
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: b.Name, WriteQueues: scenario.Queues})
	}
	if err := rt.SetRoute(route); err != nil {
		rt.Close()
		return nil, err
	}
	return d, nil
}

// Send sends one message through the runtime.
func (d *RuntimeDriver) Send(ctx context.Context, rec *scenario.SendRec, body []byte, t0 time.Time) {
	start := time.Now()
	res, err := d.Runtime.Send(ctx, &producer.Message{Topic: scenario.Topic, Body: body})
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

// PodTerminating marks the bad broker's pod terminating in the runtime.
func (d *RuntimeDriver) PodTerminating() {
	if b, ok := d.brokers[scenario.BadBroker]; ok {
		b.Terminating = true
		d.Runtime.SetBroker(b)
	}
}

// PodReady marks the bad broker's pod ready again in the runtime, at addr.
func (d *RuntimeDriver) PodReady(addr string) {
	if b, ok := d.brokers[scenario.BadBroker]; ok {
		b.Terminating, b.Ready, b.Addr = false, true, addr
		d.brokers[scenario.BadBroker] = b
		d.Runtime.SetBroker(b)
	}
}

// Close closes the runtime.
func (d *RuntimeDriver) Close() { d.Runtime.Close() }

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

// Select picks a queue with the client's own selector and notes the pick for the send's record.
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
