package realenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/drivers"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// Logf writes progress lines.
type Logf func(format string, args ...any)

// FirstLine is an error's first line (harness errors carry whole logs).
func FirstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Env is one real RocketMQ 5.x cluster (name server and three masters on 127.0.0.1) shared by
// every run of the real-broker mode. Between runs, restore puts the bad broker back to health.
type Env struct {
	r   *rmqtest.Runner
	c   *rmqtest.Cluster
	bad *rmqtest.Broker
	log Logf

	mu        sync.Mutex
	stallStop chan struct{}
	stallDone chan struct{}
	load      *busyLoad // while the bad broker is driven into flow control
	paused    bool
	down      bool
	// allPaused is set while every broker's JVM is stopped (all-slow).
	allPaused bool
	// proxies are the RocketMQ Proxies the gRPC strategies send through, by whether the Proxy's
	// fault strategy is on; started on first use.
	proxies map[bool]*rmqtest.Proxy
	// topicDropped is set while the benchmark topic is deleted from the bad broker.
	topicDropped bool
	// gate sits in front of the bad broker during the hang scenario.
	gate *hangGate
}

// Start starts the cluster and creates the benchmark topic on every broker.
func Start(ctx context.Context, log Logf) (*Env, error) {
	e := &Env{r: &rmqtest.Runner{Log: func(f string, a ...any) { log(f, a...) }}, log: log}
	err := rmqtest.Run(func() {
		var cfgs []rmqtest.BrokerConfig
		for _, n := range scenario.BrokerNames {
			// The benchmark measures brokers as production runs them: RocketMQ's own 200 ms in
			// the send queue, not the harness's allowance for busy test machines.
			cfgs = append(cfgs, rmqtest.BrokerConfig{Name: n, NoAutoCreate: true,
				Settings: map[string]string{"waitTimeMillsInSendQueue": "200"}})
		}
		e.c = rmqtest.Start(e.r, rmqtest.V5, cfgs...)
		e.bad = e.c.Broker(scenario.BadBroker)
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	rt := producer.New(producer.Options{})
	defer rt.Close()
	for _, b := range e.c.Brokers() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := rt.CreateTopic(cctx, b.Addr, scenario.Topic, scenario.Queues, scenario.Queues, int(remoting.PermReadWrite))
		cancel()
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("create %s on %s: %w", scenario.Topic, b.Name, err)
		}
	}
	if err := e.waitRoute(ctx); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.warm(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// warm sends traffic to every broker before the first measured run: freshly started JVMs compile
// their send path on the first thousands of requests, and the first run must not pay for that.
func (e *Env) warm(ctx context.Context) error {
	rec := &drivers.Recorder{}
	d, err := drivers.NewRuntimeDriver("none", e.BrokerList(), rec)
	if err != nil {
		return err
	}
	defer d.Close()
	body := make([]byte, 128)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range clusterWarmSends / 4 {
				var r scenario.SendRec
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				d.Send(cctx, &r, body, time.Now())
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
func (e *Env) waitRoute(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rd, err := e.c.Route(cctx, scenario.Topic)
		cancel()
		if err == nil {
			n := 0
			for _, q := range rd.QueueDatas {
				if q.Perm&remoting.PermWrite != 0 && q.WriteQueueNums == scenario.Queues {
					n++
				}
			}
			if n == len(scenario.BrokerNames) {
				return nil
			}
			err = fmt.Errorf("%d of %d brokers publish %s writable", n, len(scenario.BrokerNames), scenario.Topic)
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("route of %s not complete within 60 s: %v", scenario.Topic, last)
}

// Close stops the cluster and everything the runs left running against it.
func (e *Env) Close() {
	e.stopStall()
	e.mu.Lock()
	if e.gate != nil {
		e.gate.Close()
	}
	e.mu.Unlock()
	_ = e.stopBusy(context.Background())
	e.r.Close()
}

// BrokerList names the cluster's brokers and their addresses.
func (e *Env) BrokerList() []scenario.BrokerInfo {
	var out []scenario.BrokerInfo
	for _, b := range e.c.Brokers() {
		out = append(out, scenario.BrokerInfo{Name: b.Name, Addr: b.Addr})
	}
	return out
}

// NameServer is the cluster's name-server address.
func (e *Env) NameServer() string { return e.c.NameServer() }

// BadReceived is unknown on a real broker: its counters include the harness's own requests.
func (e *Env) BadReceived() int64 { return -1 }

// harness runs a harness call, turning its Fatal into an error.
func (e *Env) harness(f func()) error { return rmqtest.Run(f) }
