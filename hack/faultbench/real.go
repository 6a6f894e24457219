package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/internal/testsupport/facadetest"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// Java strategies: RocketMQ's own DefaultMQProducer, run by the project's driver
// (hack/rocketmq, Produce.java) in its own JVM on the same paced schedule as the Go strategies,
// and RocketMQ 5's gRPC SDK (GrpcPaced.java) through an access point: detour's gRPC endpoint or
// RocketMQ's own Proxy. A facade strategy points the producer at detour's name-server facade
// instead of the name server.
var javaStrategies = map[string]javaStrategy{
	"java-5":            {client: rmqtest.V5, faultEnable: true},
	"java-5-all":        {client: rmqtest.V5, faultEnable: true, detector: true, perAttempt: javaAllKnobsPerAttempt},
	"java-4.9":          {client: rmqtest.V4, faultEnable: true},
	"java-default":      {client: rmqtest.V5},
	facadeStrategy:      {client: rmqtest.V5, facade: true},
	facadeWatchStrategy: {client: rmqtest.V5, facade: true, watch: true},
	grpcDetourStrategy:  {grpc: viaDetour},
	grpcProxyStrategy:   {grpc: viaProxy},
	grpcProxyFault:      {grpc: viaProxyFault},
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

// Names of the gRPC strategies and the all-knobs Java one.
const (
	grpcDetourStrategy = "grpc+detour"
	grpcProxyStrategy  = "grpc+proxy"
	grpcProxyFault     = "grpc+proxy-fault"
	// javaAllKnobsPerAttempt is the all-knobs Java strategy's sendMsgMaxTimeoutPerRequest.
	javaAllKnobsPerAttempt = time.Second
)

// facadeStrategy is RocketMQ's Java producer with default settings pointed at detour's
// name-server facade (pkg/facade), which clears the write bit of isolated brokers' queues in the
// routes it serves, while detour's runtime measures the brokers with a canary trickle.
const facadeStrategy = "java-default+facade"

// facadeWatchStrategy is facadeStrategy with no traffic through detour at all: its runtime learns
// only by watching the routed brokers (the policy's probe.routedBrokers) and from pod state.
const facadeWatchStrategy = "java-default+facade+watch"

// Settings of the facade strategy: the Java client's route poll (RocketMQ's default is 30 s,
// which a 12 s run would never reach) and the rate of detour's own canary sends, which are what
// detour measures the brokers by when every application sends through its own client.
const (
	facadeJavaPoll   = 2 * time.Second
	facadeCanaryRate = 50
)

// realStrategyNames are the strategies that can run on real brokers, in report order.
var realStrategyNames = []string{"detour", "oracle", "java-5", "java-5-all", "java-4.9", "java-default", facadeStrategy,
	facadeWatchStrategy, gatewayStrategy, grpcDetourStrategy, grpcProxyStrategy, grpcProxyFault, "rocketmq5", "rocketmq4", "none", "rocketmq-client-go"}

// defaultRealStrategies run on real brokers unless -real-strategies says otherwise.
var defaultRealStrategies = []string{"detour", "oracle", "java-5", "java-5-all", "java-4.9", "java-default", facadeStrategy,
	facadeWatchStrategy, gatewayStrategy, grpcDetourStrategy, grpcProxyStrategy, grpcProxyFault}

func init() {
	strategyDescriptions["java-5"] = "RocketMQ's own Java DefaultMQProducer 5.5.0 (the newest 5.x), sendLatencyFaultEnable=true and " +
		"the detector as it ships (startDetector off), route refresh every 30 s; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms"
	strategyDescriptions["java-5-all"] = fmt.Sprintf("RocketMQ's own Java DefaultMQProducer 5.5.0 with every fault knob it has: "+
		"sendLatencyFaultEnable=true, startDetectorEnable=true (its detector probes isolated brokers and lifts an isolation once one "+
		"answers) and sendMsgMaxTimeoutPerRequest=%d ms; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms", javaAllKnobsPerAttempt.Milliseconds())
	strategyDescriptions[grpcDetourStrategy] = "RocketMQ 5's Java gRPC SDK 5.2.0 (its defaults: TLS, 3 attempts, 3 s per request) through detour's " +
		"gRPC endpoint, which sends every message through a runtime with the detour strategy's policy; pod steps reach that runtime. " +
		"The SDK does not say where a send went: the share reaching the bad broker is the runtime's attempts on it over the SDK's sends (an upper bound)"
	strategyDescriptions[grpcProxyStrategy] = "the same SDK through RocketMQ Proxy 5.5.0 in cluster mode with its defaults (its fault strategy off)"
	strategyDescriptions[grpcProxyFault] = "the same SDK through RocketMQ Proxy 5.5.0 with its own fault strategy on: sendLatencyEnable=true and " +
		"startDetectorEnable=true in its ProxyConfig"
	strategyDescriptions["java-4.9"] = "RocketMQ's own Java DefaultMQProducer 4.9.8 with sendLatencyFaultEnable=true on the 5.5.0 brokers; " +
		"retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms"
	strategyDescriptions["java-default"] = "RocketMQ's own Java DefaultMQProducer 5.5.0 with default settings (fault tolerance off), " +
		"what most applications run; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms"
	strategyDescriptions[facadeStrategy] = fmt.Sprintf("the same default Java producer (fault tolerance off) with namesrvAddr "+
		"pointed at detour's name-server facade and pollNameServerInterval lowered to %v; the facade forwards to the real "+
		"name server and publishes the queues of brokers detour isolates (the detour strategy's policy, measured by a "+
		"canary of %d msg/s through detour's runtime, plus pod state) without the write bit, so the unmodified client "+
		"stops writing there at its next route poll", facadeJavaPoll, facadeCanaryRate)
	strategyDescriptions[facadeWatchStrategy] = "the facade strategy with no canary: nothing is sent through detour, whose runtime " +
		"learns only by watching the routed brokers (the detour policy with probe.routedBrokers: GET_MAX_OFFSET to every " +
		"broker each probe interval, spread ±50 %; a broker silent for a send attempt's time counts as a failed attempt, ProbeFailed) " +
		"and from pod state"
}

func isJava(strategy string) bool { _, ok := javaStrategies[strategy]; return ok }

// realEnv is one real RocketMQ 5.x cluster (name server and three masters on 127.0.0.1) shared by
// every run of the real-broker mode. Between runs, restore puts the bad broker back to health.
type realEnv struct {
	r   *rmqtest.Runner
	c   *rmqtest.Cluster
	bad *rmqtest.Broker
	log logf

	mu        sync.Mutex
	stallStop chan struct{}
	stallDone chan struct{}
	load      *busyLoad // while the bad broker is driven into flow control
	paused    bool
	down      bool
	// proxies are the RocketMQ Proxies the gRPC strategies send through, by whether the Proxy's
	// fault strategy is on; started on first use.
	proxies map[bool]*rmqtest.Proxy
	// topicDropped is set while the benchmark topic is deleted from the bad broker.
	topicDropped bool
	// gate sits in front of the bad broker during the hang scenario.
	gate *hangGate
}

// startRealEnv starts the cluster and creates the benchmark topic on every broker.
func startRealEnv(ctx context.Context, log logf) (*realEnv, error) {
	e := &realEnv{r: &rmqtest.Runner{Log: func(f string, a ...any) { log(f, a...) }}, log: log}
	err := rmqtest.Run(func() {
		var cfgs []rmqtest.BrokerConfig
		for _, n := range brokerNames {
			// The benchmark measures brokers as production runs them: RocketMQ's own 200 ms in
			// the send queue, not the harness's allowance for busy test machines.
			cfgs = append(cfgs, rmqtest.BrokerConfig{Name: n, NoAutoCreate: true,
				Settings: map[string]string{"waitTimeMillsInSendQueue": "200"}})
		}
		e.c = rmqtest.Start(e.r, rmqtest.V5, cfgs...)
		e.bad = e.c.Broker(badBroker)
	})
	if err != nil {
		e.close()
		return nil, err
	}
	rt := producer.New(producer.Options{})
	defer rt.Close()
	for _, b := range e.c.Brokers() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := rt.CreateTopic(cctx, b.Addr, topic, queues, queues, int(remoting.PermReadWrite))
		cancel()
		if err != nil {
			e.close()
			return nil, fmt.Errorf("create %s on %s: %w", topic, b.Name, err)
		}
	}
	if err := e.waitRoute(ctx); err != nil {
		e.close()
		return nil, err
	}
	if err := e.warm(ctx); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// warm sends traffic to every broker before the first measured run: freshly started JVMs compile
// their send path on the first thousands of requests, and the first run must not pay for that.
func (e *realEnv) warm(ctx context.Context) error {
	rec := &recorder{}
	d, err := newRuntimeDriver("none", e.brokerList(), rec)
	if err != nil {
		return err
	}
	defer d.close()
	body := make([]byte, 128)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range clusterWarmSends / 4 {
				var r sendRec
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				d.send(cctx, &r, body, time.Now())
				cancel()
				if !r.OK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	e.log("real cluster warmed with %d sends (%d failed)", clusterWarmSends, failed.Load())
	return ctx.Err()
}

// clusterWarmSends is how many sends warm the cluster before the first run.
const clusterWarmSends = 4000

// waitRoute waits until the name server publishes the topic on all three brokers, writable.
func (e *realEnv) waitRoute(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rd, err := e.c.Route(cctx, topic)
		cancel()
		if err == nil {
			n := 0
			for _, q := range rd.QueueDatas {
				if q.Perm&remoting.PermWrite != 0 && q.WriteQueueNums == queues {
					n++
				}
			}
			if n == len(brokerNames) {
				return nil
			}
			err = fmt.Errorf("%d of %d brokers publish %s writable", n, len(brokerNames), topic)
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("route of %s not complete within 60 s: %v", topic, last)
}

func (e *realEnv) close() {
	e.stopStall()
	e.mu.Lock()
	if e.gate != nil {
		e.gate.close()
	}
	e.mu.Unlock()
	_ = e.stopBusy(context.Background())
	e.r.Close()
}

func (e *realEnv) brokerList() []brokerInfo {
	var out []brokerInfo
	for _, b := range e.c.Brokers() {
		out = append(out, brokerInfo{b.Name, b.Addr})
	}
	return out
}

func (e *realEnv) nameServer() string { return e.c.NameServer() }

// badReceived is unknown on a real broker: its counters include the harness's own requests.
func (e *realEnv) badReceived() int64 { return -1 }

// harness runs a harness call, turning its Fatal into an error.
func (e *realEnv) harness(f func()) error { return rmqtest.Run(f) }

func (e *realEnv) apply(a action, d driver) error {
	switch a.Kind {
	case actTerminating:
		if d != nil {
			d.podTerminating()
		}
		return nil
	case actPodReady:
		if d != nil {
			d.podReady(e.bad.Addr)
		}
		return nil
	case actPause:
		e.stopStall()
		e.setPaused(true)
		return e.harness(e.bad.Pause)
	case actResume:
		e.stopStall()
		e.setPaused(false)
		return e.harness(e.bad.Resume)
	case actStall:
		e.startStall()
		return nil
	case actBusy:
		return e.startBusy()
	case actKill:
		e.setDown(true)
		return e.harness(e.bad.Kill)
	case actStop:
		e.setDown(true)
		return e.harness(e.bad.Stop)
	case actRestart:
		if err := e.harness(e.bad.Restart); err != nil {
			return err
		}
		e.setDown(false)
		return nil
	case actRestartElsewhere:
		if err := e.harness(e.bad.RestartElsewhere); err != nil {
			return err
		}
		e.setDown(false)
		return nil
	case actHang:
		e.mu.Lock()
		g := e.gate
		e.mu.Unlock()
		if g == nil {
			return errors.New("the hang scenario's gate is not in front of the broker")
		}
		g.armed.Store(true)
		return nil
	case actDropTopic:
		e.mu.Lock()
		e.topicDropped = true
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return e.bad.DeleteTopic(ctx, topic)
	}
	return fmt.Errorf("a real broker cannot carry out %q", a.Note)
}

func (e *realEnv) setPaused(v bool) { e.mu.Lock(); e.paused = v; e.mu.Unlock() }
func (e *realEnv) setDown(v bool)   { e.mu.Lock(); e.down = v; e.mu.Unlock() }

// startStall pauses the bad broker for stallPause of every stallPeriod until stopStall.
func (e *realEnv) startStall() {
	e.stopStall()
	stop, done := make(chan struct{}), make(chan struct{})
	e.mu.Lock()
	e.stallStop, e.stallDone = stop, done
	e.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(stallPeriod)
		defer t.Stop()
		for {
			if e.harness(e.bad.Pause) != nil {
				return
			}
			select {
			case <-stop:
				_ = e.harness(e.bad.Resume)
				return
			case <-time.After(stallPause):
			}
			if e.harness(e.bad.Resume) != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}

// stopStall ends the stalls and leaves the broker running.
func (e *realEnv) stopStall() {
	e.mu.Lock()
	stop, done := e.stallStop, e.stallDone
	e.stallStop, e.stallDone = nil, nil
	e.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// restore puts the bad broker back to health after a run: running, registered and publishing the
// topic writable, so that every run starts from the same cluster.
func (e *realEnv) restore(ctx context.Context) error {
	e.stopStall()
	e.mu.Lock()
	if e.gate != nil {
		e.gate.armed.Store(false)
	}
	e.mu.Unlock()
	if err := e.stopBusy(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	paused, dropped := e.paused, e.topicDropped
	e.topicDropped = false
	e.mu.Unlock()
	if dropped {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.bad.CreateTopic(cctx, topic, queues)
		cancel()
		if err != nil {
			return fmt.Errorf("create %s on %s again: %w", topic, badBroker, err)
		}
	}
	if paused {
		if err := e.harness(e.bad.Resume); err != nil {
			return err
		}
		e.setPaused(false)
	}
	// A JVM booting on a busy machine can take longer than the harness waits for it; a broker that
	// is still starting gets more time, one that exited is started again.
	var err error
	for try := 1; try <= 3; try++ {
		if !e.bad.Running() {
			if rerr := e.harness(e.bad.Restart); rerr != nil {
				e.log("restarting %s (try %d of 3): %v", badBroker, try, firstLine(rerr))
			}
		}
		if err = e.waitRoute(ctx); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	e.setDown(false)
	// A broker that was paused answers its backlog of requests on resume; let it.
	time.Sleep(500 * time.Millisecond)
	return nil
}

// runReal runs one strategy on the real cluster, Go or Java.
func runReal(ctx context.Context, e *realEnv, sc scenario, strategy string, p params) (*runData, error) {
	var d *runData
	var err error
	if isJava(strategy) {
		d, err = runJava(ctx, e, sc, strategy, p)
	} else {
		d, err = runOn(ctx, e, sc, strategy, p)
	}
	if d != nil {
		d.settleFaulty()
	}
	return d, err
}

// runJava runs a Java producer on the schedule every strategy gets and turns its records into the
// benchmark's.
func runJava(ctx context.Context, e *realEnv, sc scenario, strategy string, p params) (*runData, error) {
	js := javaStrategies[strategy]
	opts := rmqtest.ProducerOptions{
		Topic: topic, Senders: p.Senders, Rate: float64(p.Rate), Duration: p.Duration, Size: p.BodyLen,
		FaultEnable: js.faultEnable, Detector: js.detector, PerAttemptTimeout: js.perAttempt, Client: js.client,
		Warmup: len(brokerNames) * queues, Shared: true, Deferred: true,
	}
	side, err := startSide(e, js, &opts)
	if err != nil {
		return nil, err
	}
	if side != nil {
		defer side.close()
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
	data := &runData{Scenario: sc, Strategy: strategy, Params: p}
	var pods driver // what the schedule's pod steps reach: detour's runtime behind the facade or endpoint
	if side != nil {
		side.rec.begin(t0)
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
		}
	}
	switch js.grpc {
	case viaDetour:
		data.BadFrom = badFromAttempts
	case viaProxy, viaProxyFault:
		data.BadFrom = badUnknown
	}
	if werr != nil {
		// Killed at the deadline: what it had not answered is abandoned.
		data.Abandoned += max(0, p.scheduled()-len(sends))
	}
	sort.Slice(data.Attempts, func(i, j int) bool { return data.Attempts[i].Start < data.Attempts[j].Start })
	sort.Slice(data.Sends, func(i, j int) bool { return data.Sends[i].Start < data.Sends[j].Start })
	return data, nil
}

// waitJava carries out the scenario's schedule from t0 while the Java producer sends, and returns
// its sends once it has finished (or was killed at the run's deadline).
func waitJava(ctx context.Context, e *realEnv, jp *rmqtest.JavaProducer, sc scenario, data *runData, pods driver, t0 time.Time) ([]rmqtest.JavaSend, error) {
	p := data.Params
	noiseStop := make(chan struct{})
	noiseDone := make(chan []time.Duration, 1)
	time.Sleep(time.Until(t0))
	go measureNoise(noiseStop, noiseDone)
	var tlWG sync.WaitGroup
	tlStop := make(chan struct{})
	var mu sync.Mutex
	tlWG.Add(1)
	go func() {
		defer tlWG.Done()
		timeline(sc, t0, e, pods, data, &mu, tlStop)
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

// startSide starts what a Java strategy sends through besides the cluster, and points opts at it:
// detour's facade (with its runtime), detour's gRPC endpoint (with its runtime), or the Proxy.
// It returns the detour side, nil when detour takes no part.
func startSide(e *realEnv, js javaStrategy, opts *rmqtest.ProducerOptions) (*detourSide, error) {
	switch {
	case js.facade:
		side, err := startFacadeSide(e, js.watch)
		if err != nil {
			return nil, err
		}
		opts.NameServers = []string{side.fc.Addr()}
		opts.PollNameServerInterval = facadeJavaPoll
		return side, nil
	case js.grpc == viaDetour:
		side, err := startEndpointSide(e)
		if err != nil {
			return nil, err
		}
		opts.GRPCEndpoint = side.endpoint
		return side, nil
	case js.grpc == viaProxy || js.grpc == viaProxyFault:
		px, err := e.proxy(js.grpc == viaProxyFault)
		if err != nil {
			return nil, err
		}
		opts.GRPCEndpoint = px.Addr
	}
	return nil, nil
}

// detourSide is detour's part of a strategy whose producer runs in a JVM: its runtime with the
// detour strategy's policy and either a name-server facade in front of the cluster's name server
// that publishes what that runtime isolates (with a canary trickle through the runtime, which is
// what it measures the brokers by), or detour's gRPC endpoint, which sends the SDK's messages
// through the runtime.
type detourSide struct {
	d    *runtimeDriver
	rec  *recorder
	fc   *facade.Server
	stop chan struct{}
	wg   sync.WaitGroup
	// endpoint is the gRPC endpoint's address; stopEndpoint ends it.
	endpoint     string
	stopEndpoint func()
}

// startFacadeSide starts the runtime, the facade and either the canary or, with watch, the
// runtime's watch of the routed brokers instead.
func startFacadeSide(e *realEnv, watch bool) (*detourSide, error) {
	rec := &recorder{}
	d, err := newRuntimeDriver("detour", e.brokerList(), rec)
	if err != nil {
		return nil, err
	}
	if watch {
		pol, _ := d.rt.Policy("detour")
		pol.Probe.Routed = true
		if err := d.rt.SetPolicy(pol); err != nil {
			d.close()
			return nil, err
		}
	}
	s := &detourSide{d: d, rec: rec, stop: make(chan struct{})}
	s.fc, err = facade.Start(facade.Options{Addr: "127.0.0.1:0",
		View: facadetest.RuntimeView{NameServer: e.nameServer(), Topic: topic, Policy: "detour", Runtime: d.rt}})
	if err != nil {
		d.close()
		return nil, err
	}
	if !watch {
		s.wg.Add(1)
		go s.canary()
	}
	return s, nil
}

// canary sends facadeCanaryRate messages a second through detour's runtime until close: its
// measurements are what the facade publishes.
func (s *detourSide) canary() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second / facadeCanaryRate)
	defer t.Stop()
	body := make([]byte, 128)
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			var r sendRec
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			s.d.send(ctx, &r, body, time.Now())
			cancel()
		}
	}
}

// isolations are the bad broker's isolation changes in detour's runtime during the run.
func (s *detourSide) isolations() []isoRec {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return slices.Clone(s.rec.isos)
}

// attempts are the attempts detour's runtime made during the run.
func (s *detourSide) attempts() []attemptRec {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return slices.Clone(s.rec.attempts)
}

func (s *detourSide) close() {
	close(s.stop)
	s.wg.Wait()
	if s.fc != nil {
		s.fc.Close()
	}
	if s.stopEndpoint != nil {
		s.stopEndpoint()
	}
	s.d.close()
}

// javaRecords turns the Java producer's records into the run's sends and attempts, on the run's
// clock (t0 is the schedule's start).
func javaRecords(data *runData, sends []rmqtest.JavaSend, t0 time.Time) {
	p := data.Params
	iv := p.interval()
	for _, s := range sends {
		start := s.Start.Sub(t0)
		r := sendRec{Seq: s.Slot, Due: time.Duration(s.Slot) * iv, Start: start, Latency: s.Latency(),
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
			data.Attempts = append(data.Attempts, attemptRec{Broker: a.Broker, Start: as,
				End: as + time.Duration(a.LatencyUs)*time.Microsecond, OK: a.OK})
		}
	}
}
