package realenv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/drivers"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// Apply carries out one step of a scenario's schedule on the bad broker's process, telling d of
// pod steps.
func (e *Env) Apply(a scenario.Action, d drivers.Driver) error {
	switch a.Kind {
	case scenario.ActTerminating:
		if d != nil {
			d.PodTerminating()
		}
		return nil
	case scenario.ActPodReady:
		if d != nil {
			d.PodReady(e.bad.Addr)
		}
		return nil
	case scenario.ActPause:
		e.stopStall()
		e.setPaused(true)
		return e.harness(e.bad.Pause)
	case scenario.ActResume:
		e.stopStall()
		e.setPaused(false)
		return e.harness(e.bad.Resume)
	case scenario.ActStall:
		e.startStall()
		return nil
	case scenario.ActBusy:
		return e.startBusy()
	case scenario.ActKill:
		e.setDown(true)
		return e.harness(e.bad.Kill)
	case scenario.ActStop:
		e.setDown(true)
		return e.harness(e.bad.Stop)
	case scenario.ActRestart:
		if err := e.harness(e.bad.Restart); err != nil {
			return err
		}
		e.setDown(false)
		return nil
	case scenario.ActRestartElsewhere:
		if err := e.harness(e.bad.RestartElsewhere); err != nil {
			return err
		}
		e.setDown(false)
		return nil
	case scenario.ActHang:
		e.mu.Lock()
		g := e.gate
		e.mu.Unlock()
		if g == nil {
			return errors.New("the hang scenario's gate is not in front of the broker")
		}
		g.armed.Store(true)
		return nil
	case scenario.ActPauseAll:
		e.setAllPaused(true)
		return e.eachBroker((*rmqtest.Broker).Pause)
	case scenario.ActResumeAll:
		err := e.eachBroker((*rmqtest.Broker).Resume)
		if err == nil {
			e.setAllPaused(false)
		}
		return err
	case scenario.ActDropTopic:
		e.mu.Lock()
		e.topicDropped = true
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return e.bad.DeleteTopic(ctx, scenario.Topic)
	}
	return fmt.Errorf("a real broker cannot carry out %q", a.Note)
}

func (e *Env) setPaused(v bool) { e.mu.Lock(); e.paused = v; e.mu.Unlock() }

func (e *Env) setDown(v bool) { e.mu.Lock(); e.down = v; e.mu.Unlock() }

func (e *Env) setAllPaused(v bool) { e.mu.Lock(); e.allPaused = v; e.mu.Unlock() }

// eachBroker applies f to every broker of the cluster, one after another as fast as the harness
// signals them, and returns the first error after trying them all.
func (e *Env) eachBroker(f func(*rmqtest.Broker)) error {
	var first error
	for _, b := range e.c.Brokers() {
		if err := e.harness(func() { f(b) }); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// startStall pauses the bad broker for scenario.StallPause of every scenario.StallPeriod until stopStall.
func (e *Env) startStall() {
	e.stopStall()
	stop, done := make(chan struct{}), make(chan struct{})
	e.mu.Lock()
	e.stallStop, e.stallDone = stop, done
	e.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(scenario.StallPeriod)
		defer t.Stop()
		for {
			if e.harness(e.bad.Pause) != nil {
				return
			}
			select {
			case <-stop:
				_ = e.harness(e.bad.Resume)
				return
			case <-time.After(scenario.StallPause):
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
func (e *Env) stopStall() {
	e.mu.Lock()
	stop, done := e.stallStop, e.stallDone
	e.stallStop, e.stallDone = nil, nil
	e.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// Restore puts the bad broker back to health after a run: running, registered and publishing the
// topic writable, so that every run starts from the same cluster.
func (e *Env) Restore(ctx context.Context) error {
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
	paused, dropped, allPaused := e.paused, e.topicDropped, e.allPaused
	e.topicDropped = false
	e.mu.Unlock()
	if allPaused {
		if err := e.eachBroker((*rmqtest.Broker).Resume); err != nil {
			return err
		}
		e.setAllPaused(false)
	}
	if dropped {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := e.bad.CreateTopic(cctx, scenario.Topic, scenario.Queues)
		cancel()
		if err != nil {
			return fmt.Errorf("create %s on %s again: %w", scenario.Topic, scenario.BadBroker, err)
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
				e.log("restarting %s (try %d of 3): %v", scenario.BadBroker, try, FirstLine(rerr))
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
