package running

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/drivers"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
	"github.com/detourmq/detour/pkg/brokersim"
)

// issueGrace lets a sender that is on schedule issue the last messages despite timer jitter; a
// sender later than that is stuck and its messages count as not issued.
const issueGrace = 100 * time.Millisecond

// env is one run's brokers and name server, fresh for every run so that no strategy inherits
// connections, counters or topic state from another.
type env struct {
	brokers []*brokersim.Broker
	bad     *brokersim.Broker
	ns      *brokersim.NameServer
}

func startEnv() (*env, error) {
	e := &env{}
	for _, n := range scenario.BrokerNames {
		// CountOnly: the counters prove what reached each broker; the bodies are not needed.
		b, err := brokersim.StartBrokerWith(n, "127.0.0.1:0", brokersim.Options{CountOnly: true, NoAutoCreate: true})
		if err != nil {
			e.Close()
			return nil, err
		}
		b.CreateTopic(scenario.Topic, scenario.Queues)
		e.brokers = append(e.brokers, b)
		if n == scenario.BadBroker {
			e.bad = b
		}
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", e.brokers...)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.ns = ns
	return e, nil
}

// Close stops the brokers and the name server.
func (e *env) Close() {
	if e.ns != nil {
		e.ns.Close()
	}
	for _, b := range e.brokers {
		b.Close()
	}
}

// MeasureNoise sleeps 1 ms at a time until stop closes and sends back how late each wake-up was.
// On a quiet machine that is tens of microseconds; on a loaded one it shows how much of a tail
// latency is the machine rather than the strategy.
func MeasureNoise(stop <-chan struct{}, out chan<- []time.Duration) {
	var lags []time.Duration
	for {
		select {
		case <-stop:
			out <- lags
			return
		default:
		}
		t := time.Now()
		time.Sleep(time.Millisecond)
		lags = append(lags, time.Since(t)-time.Millisecond)
	}
}

// Env is the brokers a run sends to and the faults it can apply: fresh brokersim brokers per
// run (env) or one real RocketMQ cluster shared by the runs of a mode (realenv.Env).
type Env interface {
	BrokerList() []scenario.BrokerInfo
	NameServer() string
	// apply carries out one step of a scenario's schedule; d is nil for strategies that cannot be
	// told about pods (the Java producers).
	Apply(a scenario.Action, d drivers.Driver) error
	// BadReceived is the bad broker's own count of send requests, -1 when it cannot tell.
	BadReceived() int64
}

// BrokerList names the simulated brokers and their addresses.
func (e *env) BrokerList() []scenario.BrokerInfo {
	var out []scenario.BrokerInfo
	for _, b := range e.brokers {
		out = append(out, scenario.BrokerInfo{Name: b.Name(), Addr: b.Addr()})
	}
	return out
}

// NameServer is the simulated name server's address.
func (e *env) NameServer() string { return e.ns.Addr() }

// BadReceived is the bad broker's count of send requests.
func (e *env) BadReceived() int64 { return e.bad.Stats().SendsReceived }

// Apply carries out one step of a scenario's schedule on the bad simulated broker, telling d
// of pod steps.
func (e *env) Apply(a scenario.Action, d drivers.Driver) error {
	switch a.Kind {
	case scenario.ActTerminating:
		if d != nil {
			d.PodTerminating()
		}
	case scenario.ActFault:
		e.bad.SetFault(a.Fault)
		if a.Unregister {
			e.ns.RemoveBroker(scenario.BadBroker)
		}
	default:
		return fmt.Errorf("brokersim cannot carry out %q", a.Note)
	}
	return nil
}

// RunOne runs one strategy against one scenario on fresh brokersim brokers.
func RunOne(ctx context.Context, sc scenario.Scenario, strategy string, p scenario.Params) (*scenario.RunData, error) {
	e, err := startEnv()
	if err != nil {
		return nil, err
	}
	defer e.Close()
	d, err := RunOn(ctx, e, sc, strategy, p)
	if d != nil {
		d.SettleFaulty()
	}
	return d, err
}

// newDriver builds the Go driver of a strategy.
func newDriver(name string, e Env, rec *drivers.Recorder) (drivers.Driver, error) {
	switch name {
	case "rocketmq-client-go":
		return drivers.NewClientGoDriver(e.NameServer(), rec)
	case strategy.Gateway:
		return drivers.NewGatewayDriver(e.BrokerList(), rec)
	}
	return drivers.NewRuntimeDriver(name, e.BrokerList(), rec)
}

// Timeline carries out a scenario's schedule on the same clock as the senders, until stop closes.
// Steps run one after another: a step that takes time (a graceful stop, a restart) delays the
// next, and the applied times say so.
func Timeline(sc scenario.Scenario, t0 time.Time, e Env, d drivers.Driver, data *scenario.RunData, mu *sync.Mutex, stop <-chan struct{}) {
	for _, a := range sc.Actions {
		// A chained step completes what its predecessor began (the new broker after a graceful
		// stop), even when the run's time is up meanwhile.
		if !a.Chained {
			t := time.NewTimer(time.Until(t0.Add(a.At)))
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		at := time.Since(t0)
		err := e.Apply(a, d)
		mu.Lock()
		data.Applied = append(data.Applied, scenario.AppliedAction{Note: a.Note, Scheduled: a.At, Applied: at, Done: time.Since(t0), Chained: a.Chained})
		if err != nil {
			data.ApplyErrors = append(data.ApplyErrors, a.Note+": "+err.Error())
		}
		mu.Unlock()
	}
}

// RunOn runs one Go strategy against one scenario on e.
func RunOn(ctx context.Context, e Env, sc scenario.Scenario, strategy string, p scenario.Params) (*scenario.RunData, error) {
	rec := &drivers.Recorder{}
	d, err := newDriver(strategy, e, rec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strategy, err)
	}
	defer d.Close()

	body := make([]byte, p.BodyLen)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	if err := warmUp(ctx, d, body); err != nil {
		return nil, fmt.Errorf("%s: %w", strategy, err)
	}
	warm := e.BadReceived()

	data := &scenario.RunData{Scenario: sc, Strategy: strategy, Params: p, WarmupBadSends: max(warm, 0)}
	t0 := time.Now()
	rec.Begin(t0)
	noiseStop := make(chan struct{})
	noiseDone := make(chan []time.Duration, 1)
	go MeasureNoise(noiseStop, noiseDone)

	// The fault schedule runs on its own goroutine, on the same clock as the senders.
	var tlWG sync.WaitGroup
	tlStop := make(chan struct{})
	var appliedMu sync.Mutex
	tlWG.Add(1)
	go func() {
		defer tlWG.Done()
		Timeline(sc, t0, e, d, data, &appliedMu, tlStop)
	}()

	recs, issued := sendSchedule(ctx, d, p, body, t0)
	data.Elapsed = time.Since(t0)
	close(noiseStop)
	data.Noise = <-noiseDone
	close(tlStop)
	tlWG.Wait()
	if n := e.BadReceived(); n >= 0 {
		data.BadSendsReceived = n - warm
	} else {
		data.BadSendsReceived = -1
	}
	collect(data, recs, issued, rec)
	return data, nil
}

// warmUp sends outside the measurement, so that connections (and for rocketmq-client-go the
// route) are in place when it starts.
func warmUp(ctx context.Context, d drivers.Driver, body []byte) error {
	for i := 0; i < len(scenario.BrokerNames)*scenario.Queues; i++ {
		var r scenario.SendRec
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d.Send(wctx, &r, body, time.Now())
		cancel()
		if !r.OK {
			return fmt.Errorf("warm-up send failed: %s", r.Err)
		}
	}
	return nil
}

// sendSchedule runs p.Senders senders over one shared schedule from t0 and waits for them (at
// most the run's time and the drain time); it returns every message's record and whether it was
// issued.
func sendSchedule(ctx context.Context, d drivers.Driver, p scenario.Params, body []byte, t0 time.Time) ([]scenario.SendRec, []bool) {
	// Senders share one schedule: message i is due at t0 + i/rate. A sender that is behind sends at
	// once; nothing is issued once the run's time is up, so a strategy whose senders are stuck
	// issues fewer messages (the run is then marked cut short).
	n := p.Scheduled()
	iv := p.Interval()
	recs := make([]scenario.SendRec, n)
	issued := make([]bool, n)
	var next atomic.Int64
	var senders sync.WaitGroup
	sendCtx, cancelSends := context.WithCancel(ctx)
	defer cancelSends()
	for s := 0; s < p.Senders; s++ {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				due := time.Duration(i) * iv
				if w := time.Until(t0.Add(due)); w > 0 {
					time.Sleep(w)
				}
				if time.Since(t0) >= p.Duration+issueGrace || ctx.Err() != nil {
					return
				}
				issued[i] = true
				recs[i] = scenario.SendRec{Seq: i, Due: due}
				d.Send(sendCtx, &recs[i], body, t0)
			}
		}()
	}
	// Wait for the senders to stop issuing, then give in-flight sends the drain time.
	done := make(chan struct{})
	go func() { senders.Wait(); close(done) }()
	timeUp := time.NewTimer(p.Duration + p.Drain)
	defer timeUp.Stop()
	select {
	case <-done:
	case <-timeUp.C:
		// Sends still running past the drain time are abandoned: cancel them and count them.
		cancelSends()
		<-done
	}
	return recs, issued
}

// collect adds the issued sends (counting those that ended past the drain time as abandoned)
// and the recorder's attempts and isolation changes to data, each in time order.
func collect(data *scenario.RunData, recs []scenario.SendRec, issued []bool, rec *drivers.Recorder) {
	p := data.Params
	for i := range recs {
		if issued[i] {
			if recs[i].Start+recs[i].Latency > p.Duration+p.Drain {
				data.Abandoned++
			}
			data.Sends = append(data.Sends, recs[i])
		}
	}
	data.Attempts = append(data.Attempts, rec.Attempts()...)
	data.Isos = append(data.Isos, rec.Isolations()...)
	data.Hedges = rec.Hedges()
	sort.Slice(data.Attempts, func(i, j int) bool { return data.Attempts[i].Start < data.Attempts[j].Start })
	sort.Slice(data.Sends, func(i, j int) bool { return data.Sends[i].Start < data.Sends[j].Start })
}
