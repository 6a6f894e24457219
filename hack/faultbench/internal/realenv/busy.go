package realenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/pkg/producer"
)

// restWaitMillis is waitTimeMillsInSendQueue as RocketMQ ships it, which every other run uses and
// the busy scenario's runs put back.
const restWaitMillis = "200"

// busyLoad is the traffic that keeps the bad broker's send queue full: senders of its own that
// send to the bad broker alone, one attempt each, and ignore the outcome.
type busyLoad struct {
	rt   *producer.Runtime
	stop chan struct{}
	wg   sync.WaitGroup
}

// startBusy lowers the bad broker's send-queue wait and starts the load.
func (e *Env) startBusy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.bad.UpdateConfig(ctx, map[string]string{"waitTimeMillsInSendQueue": scenario.BusyWaitMillis}); err != nil {
		return fmt.Errorf("lower waitTimeMillsInSendQueue on %s: %w", scenario.BadBroker, err)
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
func (e *Env) stopBusy(ctx context.Context) error {
	e.mu.Lock()
	l := e.load
	e.load = nil
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	l.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.bad.UpdateConfig(cctx, map[string]string{"waitTimeMillsInSendQueue": restWaitMillis}); err != nil {
		return fmt.Errorf("restore waitTimeMillsInSendQueue on %s: %w", scenario.BadBroker, err)
	}
	return nil
}

// startBusyLoad starts scenario.BusyLoadSenders senders to the broker at addr.
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
	rt.SetBroker(producer.Broker{Name: scenario.BadBroker, Addr: addr, Ready: true})
	if err := rt.SetRoute(producer.Route{Topic: scenario.Topic, Policy: pol.Name,
		Brokers: []producer.BrokerQueues{{Broker: scenario.BadBroker, WriteQueues: scenario.Queues}}}); err != nil {
		rt.Close()
		return nil, err
	}
	l := &busyLoad{rt: rt, stop: make(chan struct{})}
	body := make([]byte, 4096)
	for range scenario.BusyLoadSenders {
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
				_, _ = rt.Send(ctx, &producer.Message{Topic: scenario.Topic, Body: body})
				cancel()
			}
		}()
	}
	return l, nil
}

// Close stops the senders and waits for them.
func (l *busyLoad) Close() {
	close(l.stop)
	l.wg.Wait()
	l.rt.Close()
}
