package drivers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqprimitive "github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
)

// clientGoDriver drives the real rocketmq-client-go v2 producer.
type clientGoDriver struct {
	p   rocketmq.Producer
	sel *recordingSelector
	rec *Recorder
}

var clientGoInstance atomic.Int64

// NewClientGoDriver starts a rocketmq-client-go producer on the name server at nameServer.
func NewClientGoDriver(nameServer string, rec *Recorder) (Driver, error) {
	sel := &recordingSelector{inner: rmqproducer.NewRoundRobinQueueSelector(), picks: make(map[*rmqprimitive.Message][]pick)}
	// rocketmq-client-go keeps a process-wide client per instance name; each run needs its own.
	n := clientGoInstance.Add(1)
	p, err := rocketmq.NewProducer(
		rmqproducer.WithNameServer([]string{nameServer}),
		rmqproducer.WithGroupName(fmt.Sprintf("faultbench-%d", n)),
		rmqproducer.WithInstanceName(fmt.Sprintf("faultbench-%d-%d", n, time.Now().UnixNano())),
		rmqproducer.WithRetry(2),
		rmqproducer.WithSendMsgTimeout(3*time.Second),
		rmqproducer.WithQueueSelector(sel),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &clientGoDriver{p: p, sel: sel, rec: rec}, nil
}

// Send sends one message with the client, recording the brokers its selector picked.
func (d *clientGoDriver) Send(ctx context.Context, rec *scenario.SendRec, body []byte, t0 time.Time) {
	m := rmqprimitive.NewMessage(scenario.Topic, body)
	start := time.Now()
	res, err := d.p.SendSync(ctx, m)
	end := time.Now()
	rec.Start = start.Sub(t0)
	rec.Latency = end.Sub(start)
	if err == nil && res.Status != rmqprimitive.SendOK {
		err = fmt.Errorf("send status %v", res.Status)
	}
	picks := d.sel.take(m)
	for i, pk := range picks {
		rec.Tried = append(rec.Tried, pk.broker)
		// An attempt ends when the next one is selected, the last one when SendSync returns.
		aEnd := end
		if i+1 < len(picks) {
			aEnd = picks[i+1].at
		}
		if _, ok := d.rec.since(pk.at); ok {
			d.rec.attempt(scenario.AttemptRec{Broker: pk.broker, Start: pk.at.Sub(t0), End: aEnd.Sub(t0),
				OK: err == nil && i+1 == len(picks)})
		}
	}
	if err != nil {
		rec.Err = err.Error()
		return
	}
	rec.OK = true
	if res.MessageQueue != nil {
		rec.Broker = res.MessageQueue.BrokerName
	}
}

// PodTerminating does nothing: the client knows nothing of pod state.
func (d *clientGoDriver) PodTerminating() {}

// PodReady does nothing: the client knows nothing of pod state.
func (d *clientGoDriver) PodReady(string) {}

// Close shuts the client down.
func (d *clientGoDriver) Close() { _ = d.p.Shutdown() }
