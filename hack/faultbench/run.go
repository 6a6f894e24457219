package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

// params is the workload every run gets.
type params struct {
	Duration time.Duration
	Rate     int // messages per second, over all senders
	Senders  int
	// Drain bounds the wait for sends still in flight when the run's time is up.
	Drain   time.Duration
	BodyLen int
	// ScheduleSlack is how late a fault step may be carried out before the run is flagged as not
	// comparable (the machine stalled the schedule).
	ScheduleSlack time.Duration
}

func (p params) scheduled() int { return int(p.Duration.Seconds() * float64(p.Rate)) }

func (p params) interval() time.Duration { return time.Second / time.Duration(p.Rate) }

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
	for _, n := range brokerNames {
		// CountOnly: the counters prove what reached each broker; the bodies are not needed.
		b, err := brokersim.StartBrokerWith(n, "127.0.0.1:0", brokersim.Options{CountOnly: true, NoAutoCreate: true})
		if err != nil {
			e.close()
			return nil, err
		}
		b.CreateTopic(topic, queues)
		e.brokers = append(e.brokers, b)
		if n == badBroker {
			e.bad = b
		}
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", e.brokers...)
	if err != nil {
		e.close()
		return nil, err
	}
	e.ns = ns
	return e, nil
}

func (e *env) close() {
	if e.ns != nil {
		e.ns.Close()
	}
	for _, b := range e.brokers {
		b.Close()
	}
}

// appliedAction is a timeline step as it was carried out.
type appliedAction struct {
	Note      string        `json:"note"`
	Scheduled time.Duration `json:"scheduled"`
	Applied   time.Duration `json:"applied"`
	// Done is when the step had taken effect (a restart: the broker registered again).
	Done time.Duration `json:"done"`
	// Chained steps follow the previous one as soon as it is done, so they are not late.
	Chained bool `json:"chained"`
}

// runData is everything one run measured.
type runData struct {
	Scenario scenario
	Strategy string
	Rep      int
	Params   params
	Sends    []sendRec
	Attempts []attemptRec
	Isos     []isoRec
	Applied  []appliedAction
	// ApplyErrors are schedule steps that failed (a broker that did not come back).
	ApplyErrors []string
	Abandoned   int // sends still in flight when the drain time ran out
	// BadSendsReceived is what the bad broker itself counted (send requests read) during the
	// measured run; WarmupBadSends what it had counted before.
	BadSendsReceived int64
	WarmupBadSends   int64
	Elapsed          time.Duration
	// Noise holds how late 1 ms sleeps woke up during the run: the machine's scheduling noise,
	// which every latency here includes.
	Noise []time.Duration
	// BadFrom says where the bad shares come from when the sends do not list their attempts'
	// brokers (RocketMQ's gRPC SDK does not say where an attempt went).
	BadFrom badSource
}

// badSource is what a run's bad shares are counted from.
type badSource int

const (
	// badFromSends counts sends that list an attempt on the bad broker.
	badFromSends badSource = iota
	// badFromAttempts counts the attempts detour's runtime made on the bad broker for sends it
	// took from a client (its gRPC endpoint): attempts on the bad broker over sends, an upper
	// bound of the share of sends that reached it, capped at 100.
	badFromAttempts
	// badUnknown: nothing says where attempts went (the SDK through RocketMQ's Proxy).
	badUnknown
)

// measureNoise sleeps 1 ms at a time until stop closes and sends back how late each wake-up was.
// On a quiet machine that is tens of microseconds; on a loaded one it shows how much of a tail
// latency is the machine rather than the strategy.
func measureNoise(stop <-chan struct{}, out chan<- []time.Duration) {
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

// brokerInfo is a broker's name and address as the strategies see them.
type brokerInfo struct{ Name, Addr string }

// benchEnv is the brokers a run sends to and the faults it can apply: fresh brokersim brokers per
// run (simEnv) or one real RocketMQ cluster shared by the runs of a mode (realEnv).
type benchEnv interface {
	brokerList() []brokerInfo
	nameServer() string
	// apply carries out one step of a scenario's schedule; d is nil for strategies that cannot be
	// told about pods (the Java producers).
	apply(a action, d driver) error
	// badReceived is the bad broker's own count of send requests, -1 when it cannot tell.
	badReceived() int64
}

func (e *env) brokerList() []brokerInfo {
	var out []brokerInfo
	for _, b := range e.brokers {
		out = append(out, brokerInfo{b.Name(), b.Addr()})
	}
	return out
}

func (e *env) nameServer() string { return e.ns.Addr() }

func (e *env) badReceived() int64 { return e.bad.Stats().SendsReceived }

func (e *env) apply(a action, d driver) error {
	switch a.Kind {
	case actTerminating:
		if d != nil {
			d.podTerminating()
		}
	case actFault:
		e.bad.SetFault(a.Fault)
		if a.Unregister {
			e.ns.RemoveBroker(badBroker)
		}
	default:
		return fmt.Errorf("brokersim cannot carry out %q", a.Note)
	}
	return nil
}

// runOne runs one strategy against one scenario on fresh brokersim brokers.
func runOne(ctx context.Context, sc scenario, strategy string, p params) (*runData, error) {
	e, err := startEnv()
	if err != nil {
		return nil, err
	}
	defer e.close()
	d, err := runOn(ctx, e, sc, strategy, p)
	if d != nil {
		d.settleFaulty()
	}
	return d, err
}

// newDriver builds the Go driver of a strategy.
func newDriver(strategy string, e benchEnv, rec *recorder) (driver, error) {
	switch strategy {
	case "rocketmq-client-go":
		return newClientGoDriver(e.nameServer(), rec)
	case gatewayStrategy:
		return newGatewayDriver(e.brokerList(), rec)
	}
	return newRuntimeDriver(strategy, e.brokerList(), rec)
}

// timeline carries out a scenario's schedule on the same clock as the senders, until stop closes.
// Steps run one after another: a step that takes time (a graceful stop, a restart) delays the
// next, and the applied times say so.
func timeline(sc scenario, t0 time.Time, e benchEnv, d driver, data *runData, mu *sync.Mutex, stop <-chan struct{}) {
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
		err := e.apply(a, d)
		mu.Lock()
		data.Applied = append(data.Applied, appliedAction{Note: a.Note, Scheduled: a.At, Applied: at, Done: time.Since(t0), Chained: a.Chained})
		if err != nil {
			data.ApplyErrors = append(data.ApplyErrors, a.Note+": "+err.Error())
		}
		mu.Unlock()
	}
}

// runOn runs one Go strategy against one scenario on e.
func runOn(ctx context.Context, e benchEnv, sc scenario, strategy string, p params) (*runData, error) {
	rec := &recorder{}
	d, err := newDriver(strategy, e, rec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strategy, err)
	}
	defer d.close()

	body := make([]byte, p.BodyLen)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	if err := warmUp(ctx, d, body); err != nil {
		return nil, fmt.Errorf("%s: %w", strategy, err)
	}
	warm := e.badReceived()

	data := &runData{Scenario: sc, Strategy: strategy, Params: p, WarmupBadSends: max(warm, 0)}
	t0 := time.Now()
	rec.begin(t0)
	noiseStop := make(chan struct{})
	noiseDone := make(chan []time.Duration, 1)
	go measureNoise(noiseStop, noiseDone)

	// The fault schedule runs on its own goroutine, on the same clock as the senders.
	var tlWG sync.WaitGroup
	tlStop := make(chan struct{})
	var appliedMu sync.Mutex
	tlWG.Add(1)
	go func() {
		defer tlWG.Done()
		timeline(sc, t0, e, d, data, &appliedMu, tlStop)
	}()

	recs, issued := sendSchedule(ctx, d, p, body, t0)
	data.Elapsed = time.Since(t0)
	close(noiseStop)
	data.Noise = <-noiseDone
	close(tlStop)
	tlWG.Wait()
	if n := e.badReceived(); n >= 0 {
		data.BadSendsReceived = n - warm
	} else {
		data.BadSendsReceived = -1
	}
	collect(data, recs, issued, rec)
	return data, nil
}

// warmUp sends outside the measurement, so that connections (and for rocketmq-client-go the
// route) are in place when it starts.
func warmUp(ctx context.Context, d driver, body []byte) error {
	for i := 0; i < len(brokerNames)*queues; i++ {
		var r sendRec
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d.send(wctx, &r, body, time.Now())
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
func sendSchedule(ctx context.Context, d driver, p params, body []byte, t0 time.Time) ([]sendRec, []bool) {
	// Senders share one schedule: message i is due at t0 + i/rate. A sender that is behind sends at
	// once; nothing is issued once the run's time is up, so a strategy whose senders are stuck
	// issues fewer messages (the run is then marked cut short).
	n := p.scheduled()
	iv := p.interval()
	recs := make([]sendRec, n)
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
				recs[i] = sendRec{Seq: i, Due: due}
				d.send(sendCtx, &recs[i], body, t0)
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
func collect(data *runData, recs []sendRec, issued []bool, rec *recorder) {
	p := data.Params
	for i := range recs {
		if issued[i] {
			if recs[i].Start+recs[i].Latency > p.Duration+p.Drain {
				data.Abandoned++
			}
			data.Sends = append(data.Sends, recs[i])
		}
	}
	rec.mu.Lock()
	data.Attempts = append(data.Attempts, rec.attempts...)
	data.Isos = append(data.Isos, rec.isos...)
	rec.mu.Unlock()
	sort.Slice(data.Attempts, func(i, j int) bool { return data.Attempts[i].Start < data.Attempts[j].Start })
	sort.Slice(data.Sends, func(i, j int) bool { return data.Sends[i].Start < data.Sends[j].Start })
}
