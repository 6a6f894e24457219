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
}

// runData is everything one run measured.
type runData struct {
	Scenario  scenario
	Strategy  string
	Params    params
	Sends     []sendRec
	Attempts  []attemptRec
	Isos      []isoRec
	Applied   []appliedAction
	Abandoned int // sends still in flight when the drain time ran out
	// BadSendsReceived is what the bad broker itself counted (send requests read) during the
	// measured run; WarmupBadSends what it had counted before.
	BadSendsReceived int64
	WarmupBadSends   int64
	Elapsed          time.Duration
	// Noise holds how late 1 ms sleeps woke up during the run: the machine's scheduling noise,
	// which every latency here includes.
	Noise []time.Duration
}

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

// runOne runs one strategy against one scenario.
func runOne(ctx context.Context, sc scenario, strategy string, p params) (*runData, error) {
	e, err := startEnv()
	if err != nil {
		return nil, err
	}
	defer e.close()

	rec := &recorder{}
	var d driver
	if strategy == "rocketmq-client-go" {
		d, err = newClientGoDriver(e, rec)
	} else {
		d, err = newRuntimeDriver(strategy, e, rec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strategy, err)
	}
	defer d.close()

	body := make([]byte, p.BodyLen)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	// Warm up outside the measurement: connections, and for rocketmq-client-go the route.
	for i := 0; i < len(brokerNames)*queues; i++ {
		var r sendRec
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d.send(wctx, &r, body, time.Now())
		cancel()
		if !r.OK {
			return nil, fmt.Errorf("%s: warm-up send failed: %s", strategy, r.Err)
		}
	}
	warm := e.bad.Stats().SendsReceived

	data := &runData{Scenario: sc, Strategy: strategy, Params: p, WarmupBadSends: warm}
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
		for _, a := range sc.Actions {
			t := time.NewTimer(time.Until(t0.Add(a.At)))
			select {
			case <-tlStop:
				t.Stop()
				return
			case <-t.C:
			}
			switch a.Kind {
			case actTerminating:
				d.podTerminating()
			case actFault:
				e.bad.SetFault(a.Fault)
				if a.Unregister {
					e.ns.RemoveBroker(badBroker)
				}
			}
			appliedMu.Lock()
			data.Applied = append(data.Applied, appliedAction{Note: a.Note, Scheduled: a.At, Applied: time.Since(t0)})
			appliedMu.Unlock()
		}
	}()

	// Senders share one schedule: message i is due at t0 + i/rate. A sender that is behind sends at
	// once; nothing is issued once the run's time is up, so a strategy whose senders are stuck
	// issues fewer messages (the run is then marked cut short).
	n := p.scheduled()
	iv := p.interval()
	recs := make([]sendRec, n)
	issued := make([]bool, n)
	var next atomic.Int64
	var inFlight sync.WaitGroup
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
				inFlight.Add(1)
				d.send(sendCtx, &recs[i], body, t0)
				inFlight.Done()
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
	data.Elapsed = time.Since(t0)
	close(noiseStop)
	data.Noise = <-noiseDone
	close(tlStop)
	tlWG.Wait()
	data.BadSendsReceived = e.bad.Stats().SendsReceived - warm

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
	return data, nil
}
