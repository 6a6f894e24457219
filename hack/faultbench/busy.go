package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/producer"
)

// The busy scenario's settings. A broker refuses the sends that waited in its send queue longer
// than waitTimeMillsInSendQueue (200 ms by default) with SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]"; with
// the wait lowered to 0, every send still queued when the fast-failure sweep runs (every 10 ms) is
// refused, and the load keeps the queue from emptying.
const (
	busyWaitMillis  = "0"
	restWaitMillis  = "200" // RocketMQ's default, which every other run uses
	busyLoadSenders = 32
)

// busyLoad is the traffic that keeps the bad broker's send queue full: senders of its own that
// send to the bad broker alone, one attempt each, and ignore the outcome.
type busyLoad struct {
	rt   *producer.Runtime
	stop chan struct{}
	wg   sync.WaitGroup
}

// startBusy lowers the bad broker's send-queue wait and starts the load.
func (e *realEnv) startBusy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.bad.UpdateConfig(ctx, map[string]string{"waitTimeMillsInSendQueue": busyWaitMillis}); err != nil {
		return fmt.Errorf("lower waitTimeMillsInSendQueue on %s: %w", badBroker, err)
	}
	l, err := startBusyLoad(e.bad.Addr)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.load = l
	e.mu.Unlock()
	return nil
}

// stopBusy ends the load, if any, and gives the bad broker its send-queue wait back.
func (e *realEnv) stopBusy(ctx context.Context) error {
	e.mu.Lock()
	l := e.load
	e.load = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	l.close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.bad.UpdateConfig(cctx, map[string]string{"waitTimeMillsInSendQueue": restWaitMillis}); err != nil {
		return fmt.Errorf("restore waitTimeMillsInSendQueue on %s: %w", badBroker, err)
	}
	return nil
}

// startBusyLoad starts busyLoadSenders senders to the broker at addr.
func startBusyLoad(addr string) (*busyLoad, error) {
	pol, err := producer.PresetPolicy("busy-load", producer.PresetDisabled)
	if err != nil {
		return nil, err
	}
	pol.Retry.Attempts = 1
	rt := producer.New(producer.Options{ProducerGroup: "faultbench-load"})
	if err := rt.SetPolicy(pol); err != nil {
		rt.Close()
		return nil, err
	}
	rt.SetBroker(producer.Broker{Name: badBroker, Addr: addr, Ready: true})
	if err := rt.SetRoute(producer.Route{Topic: topic, Policy: pol.Name,
		Brokers: []producer.BrokerQueues{{Broker: badBroker, WriteQueues: queues}}}); err != nil {
		rt.Close()
		return nil, err
	}
	l := &busyLoad{rt: rt, stop: make(chan struct{})}
	body := make([]byte, 4096)
	for range busyLoadSenders {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, _ = rt.Send(ctx, &producer.Message{Topic: topic, Body: body})
				cancel()
			}
		}()
	}
	return l, nil
}

// close stops the senders and waits for them.
func (l *busyLoad) close() {
	close(l.stop)
	l.wg.Wait()
	l.rt.Close()
}
