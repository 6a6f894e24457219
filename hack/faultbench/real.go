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

	"github.com/detourmq/detour/internal/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// Java strategies: RocketMQ's own DefaultMQProducer, run by the project's driver
// (hack/rocketmq, Produce.java) in its own JVM on the same paced schedule as the Go strategies.
var javaStrategies = map[string]struct {
	client      rmqtest.Line
	faultEnable bool
}{
	"java-5":       {rmqtest.V5, true},
	"java-4.9":     {rmqtest.V4, true},
	"java-default": {rmqtest.V5, false},
}

// facadeStrategy is the hook for RocketMQ's Java producer with default settings pointed at
// detour's name-server facade (pkg/facade), which clears the write bit of isolated brokers'
// queues in the routes it serves. It is not run yet: the facade landed while this benchmark was
// built, and running it needs a facade.View fed the way the operator feeds it (policy isolation
// and pod state) plus a route poll short enough to matter within a run; the name is reserved so
// the report and results stay comparable once it runs.
const facadeStrategy = "java-default+facade"

// realStrategyNames are the strategies that can run on real brokers, in report order.
var realStrategyNames = []string{"detour", "oracle", "java-5", "java-4.9", "java-default", "rocketmq5", "rocketmq4", "none", "rocketmq-client-go"}

// defaultRealStrategies run on real brokers unless -real-strategies says otherwise.
var defaultRealStrategies = []string{"detour", "oracle", "java-5", "java-4.9", "java-default"}

func init() {
	strategyDescriptions["java-5"] = "RocketMQ's own Java DefaultMQProducer 5.5.0 (the newest 5.x), sendLatencyFaultEnable=true and " +
		"the detector as it ships (startDetector off), route refresh every 30 s; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms"
	strategyDescriptions["java-4.9"] = "RocketMQ's own Java DefaultMQProducer 4.9.8 with sendLatencyFaultEnable=true on the 5.5.0 brokers; " +
		"retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms"
	strategyDescriptions["java-default"] = "RocketMQ's own Java DefaultMQProducer 5.5.0 with default settings (fault tolerance off), " +
		"what most applications run; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms"
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
	paused    bool
	down      bool
}

// startRealEnv starts the cluster and creates the benchmark topic on every broker.
func startRealEnv(ctx context.Context, log logf) (*realEnv, error) {
	e := &realEnv{r: &rmqtest.Runner{Log: func(f string, a ...any) { log(f, a...) }}, log: log}
	err := rmqtest.Run(func() {
		var cfgs []rmqtest.BrokerConfig
		for _, n := range brokerNames {
			cfgs = append(cfgs, rmqtest.BrokerConfig{Name: n, NoAutoCreate: true})
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

func (e *realEnv) close() { e.stopStall(); e.r.Close() }

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
			d.podReady()
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
	paused := e.paused
	e.mu.Unlock()
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
	var jp *rmqtest.JavaProducer
	err := e.harness(func() {
		jp = e.c.StartProducer(rmqtest.ProducerOptions{
			Topic: topic, Senders: p.Senders, Rate: float64(p.Rate), Duration: p.Duration, Size: p.BodyLen,
			FaultEnable: js.faultEnable, Client: js.client,
			Warmup: len(brokerNames) * queues, Shared: true, Deferred: true,
		})
	})
	if err != nil {
		return nil, err
	}
	// Java stamps sends in epoch milliseconds: start the clock on a whole millisecond.
	t0 := time.UnixMilli(time.Now().Add(200 * time.Millisecond).UnixMilli())
	if err := jp.Begin(t0); err != nil {
		return nil, err
	}
	data := &runData{Scenario: sc, Strategy: strategy, Params: p}
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
		timeline(sc, t0, e, nil, data, &mu, tlStop)
	}()
	wctx, cancel := context.WithDeadline(ctx, t0.Add(p.Duration+p.Drain+5*time.Second))
	sends, werr := jp.Wait(wctx)
	cancel()
	data.Elapsed = time.Since(t0)
	close(noiseStop)
	data.Noise = <-noiseDone
	close(tlStop)
	tlWG.Wait()
	if werr != nil && !errors.Is(werr, context.DeadlineExceeded) {
		return nil, werr
	}
	data.BadSendsReceived = -1
	javaRecords(data, sends, t0)
	if werr != nil {
		// Killed at the deadline: what it had not answered is abandoned.
		data.Abandoned += max(0, p.scheduled()-len(sends))
	}
	sort.Slice(data.Attempts, func(i, j int) bool { return data.Attempts[i].Start < data.Attempts[j].Start })
	sort.Slice(data.Sends, func(i, j int) bool { return data.Sends[i].Start < data.Sends[j].Start })
	return data, nil
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

// realStrategyOK reports whether a strategy can run on real brokers.
func realStrategyOK(s string) bool { return slices.Contains(realStrategyNames, s) }
