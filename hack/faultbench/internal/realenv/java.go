package realenv

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/drivers"
	"github.com/detourmq/detour/hack/faultbench/internal/running"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// Java strategies: RocketMQ's own DefaultMQProducer, run by the project's driver
// (hack/rocketmq, Produce.java) in its own JVM on the same paced schedule as the Go strategies,
// and RocketMQ 5's gRPC SDK (GrpcPaced.java) through an access point: detour's gRPC endpoint or
// RocketMQ's own Proxy. A facade strategy points the producer at detour's name-server facade
// instead of the name server.
var javaStrategies = map[string]javaStrategy{
	"java-5":                 {client: rmqtest.V5, faultEnable: true},
	"java-5-all":             {client: rmqtest.V5, faultEnable: true, detector: true, perAttempt: strategy.JavaAllKnobsPerAttempt},
	"java-4.9":               {client: rmqtest.V4, faultEnable: true},
	"java-default":           {client: rmqtest.V5},
	strategy.Facade:          {client: rmqtest.V5, facade: true},
	strategy.FacadeWatch:     {client: rmqtest.V5, facade: true, watch: true},
	strategy.GRPCDetour:      {grpc: viaDetour},
	strategy.GRPCDetourHedge: {grpc: viaDetour},
	strategy.GRPCOracleHedge: {grpc: viaDetour},
	strategy.GRPCProxy:       {grpc: viaProxy},
	strategy.GRPCProxyFault:  {grpc: viaProxyFault},
}

// javaStrategy is how a strategy run in a JVM is set up.
type javaStrategy struct {
	client      rmqtest.Line
	faultEnable bool          // sendLatencyFaultEnable
	detector    bool          // startDetectorEnable
	perAttempt  time.Duration // sendMsgMaxTimeoutPerRequest; 0 leaves it unset
	facade      bool
	watch       bool // detour learns by watching the routed brokers, with no canary
	// grpc, when set, runs the gRPC SDK through that access point instead of a remoting producer.
	grpc accessPoint
}

// accessPoint is where a gRPC strategy's SDK sends.
type accessPoint int

const (
	viaNone accessPoint = iota
	// viaDetour is detour's gRPC endpoint over a runtime with the detour strategy's policy.
	viaDetour
	// viaProxy is RocketMQ Proxy 5.5.0 in cluster mode with its defaults.
	viaProxy
	// viaProxyFault is the Proxy with its own fault strategy on (sendLatencyEnable and
	// startDetectorEnable, its ProxyConfig switches).
	viaProxyFault
)

func isJava(strategy string) bool { _, ok := javaStrategies[strategy]; return ok }

// RunReal runs one strategy on the real cluster, Go or Java.
func RunReal(ctx context.Context, e *Env, sc scenario.Scenario, strategy string, p scenario.Params) (*scenario.RunData, error) {
	var d *scenario.RunData
	var err error
	if isJava(strategy) {
		d, err = runJava(ctx, e, sc, strategy, p)
	} else {
		d, err = running.RunOn(ctx, e, sc, strategy, p)
	}
	if d != nil {
		d.SettleFaulty()
	}
	return d, err
}

// runJava runs a Java producer on the schedule every strategy gets and turns its records into the
// benchmark's.
func runJava(ctx context.Context, e *Env, sc scenario.Scenario, strategy string, p scenario.Params) (*scenario.RunData, error) {
	js := javaStrategies[strategy]
	opts := rmqtest.ProducerOptions{
		Topic: scenario.Topic, Senders: p.Senders, Rate: float64(p.Rate), Duration: p.Duration, Size: p.BodyLen,
		FaultEnable: js.faultEnable, Detector: js.detector, PerAttemptTimeout: js.perAttempt, Client: js.client,
		Warmup: len(scenario.BrokerNames) * scenario.Queues, Shared: true, Deferred: true,
	}
	side, err := startSide(e, strategy, js, &opts)
	if err != nil {
		return nil, err
	}
	if side != nil {
		defer side.Close()
	}
	var jp *rmqtest.JavaProducer
	if err := e.harness(func() { jp = e.c.StartProducer(opts) }); err != nil {
		return nil, err
	}
	// Java stamps sends in epoch milliseconds: start the clock on a whole millisecond.
	t0 := time.UnixMilli(time.Now().Add(200 * time.Millisecond).UnixMilli())
	if err := jp.Begin(t0); err != nil {
		return nil, err
	}
	data := &scenario.RunData{Scenario: sc, Strategy: strategy, Params: p}
	var pods drivers.Driver // what the schedule's pod steps reach: detour's runtime behind the facade or endpoint
	if side != nil {
		side.rec.Begin(t0)
		pods = side.d
	}
	sends, werr := waitJava(ctx, e, jp, sc, data, pods, t0)
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return nil, werr
	}
	data.BadSendsReceived = -1
	javaRecords(data, sends, t0)
	if side != nil {
		data.Isos = side.isolations()
		if js.grpc == viaDetour {
			// The endpoint's runtime saw every attempt the SDK's sends made.
			data.Attempts = append(data.Attempts, side.attempts()...)
			data.Hedges = side.rec.Hedges()
		}
	}
	switch js.grpc {
	case viaDetour:
		data.BadFrom = scenario.BadFromAttempts
	case viaProxy, viaProxyFault:
		data.BadFrom = scenario.BadUnknown
	}
	if werr != nil {
		// Killed at the deadline: what it had not answered is abandoned.
		data.Abandoned += max(0, p.Scheduled()-len(sends))
	}
	sort.Slice(data.Attempts, func(i, j int) bool { return data.Attempts[i].Start < data.Attempts[j].Start })
	sort.Slice(data.Sends, func(i, j int) bool { return data.Sends[i].Start < data.Sends[j].Start })
	return data, nil
}

// waitJava carries out the scenario's schedule from t0 while the Java producer sends, and returns
// its sends once it has finished (or was killed at the run's deadline).
func waitJava(ctx context.Context, e *Env, jp *rmqtest.JavaProducer, sc scenario.Scenario, data *scenario.RunData, pods drivers.Driver, t0 time.Time) ([]rmqtest.JavaSend, error) {
	p := data.Params
	noiseStop := make(chan struct{})
	noiseDone := make(chan []time.Duration, 1)
	time.Sleep(time.Until(t0))
	go running.MeasureNoise(noiseStop, noiseDone)
	var tlWG sync.WaitGroup
	tlStop := make(chan struct{})
	var mu sync.Mutex
	tlWG.Add(1)
	go func() {
		defer tlWG.Done()
		running.Timeline(sc, t0, e, pods, data, &mu, tlStop)
	}()
	wctx, cancel := context.WithDeadline(ctx, t0.Add(p.Duration+p.Drain+5*time.Second))
	sends, werr := jp.Wait(wctx)
	cancel()
	data.Elapsed = time.Since(t0)
	close(noiseStop)
	data.Noise = <-noiseDone
	close(tlStop)
	tlWG.Wait()
	return sends, werr
}

// javaRecords turns the Java producer's records into the run's sends and attempts, on the run's
// clock (t0 is the schedule's start).
func javaRecords(data *scenario.RunData, sends []rmqtest.JavaSend, t0 time.Time) {
	p := data.Params
	iv := p.Interval()
	for _, s := range sends {
		start := s.Start.Sub(t0)
		r := scenario.SendRec{Seq: s.Slot, Due: time.Duration(s.Slot) * iv, Start: start, Latency: s.Latency(),
			OK: s.OK, Broker: s.Broker, Tried: s.Brokers, Err: s.Error}
		if !r.OK && r.Err == "" {
			r.Err = "failed"
		}
		if r.Start+r.Latency > p.Duration+p.Drain {
			data.Abandoned++
		}
		data.Sends = append(data.Sends, r)
		for _, a := range s.Attempts {
			as := start + time.Duration(a.StartUs)*time.Microsecond
			data.Attempts = append(data.Attempts, scenario.AttemptRec{Broker: a.Broker, Start: as,
				End: as + time.Duration(a.LatencyUs)*time.Microsecond, OK: a.OK})
		}
	}
}
