package drivers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/gateway"
)

// gatewayDriver drives the send gateway in front of a runtime driver.
type gatewayDriver struct {
	*RuntimeDriver
	url    string
	client *http.Client
	stop   func()
}

// NewGatewayDriver starts the gateway on a free loopback port around a detour runtime.
func NewGatewayDriver(brokers []scenario.BrokerInfo, rec *Recorder) (Driver, error) {
	d, err := NewRuntimeDriver("detour", brokers, rec)
	if err != nil {
		return nil, err
	}
	srv, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Sender: d.Runtime, Logger: logr.Discard(),
		Topics: front.NameResolverFunc(func(_ context.Context, _, name string) (front.Target, error) {
			if name != "faultbench" {
				return front.Target{}, fmt.Errorf("%w: %s", front.ErrTopicNotFound, name)
			}
			return front.Target{Topic: scenario.Topic}, nil
		})})
	if err != nil {
		d.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// New opened the listener: the address is known and connections queue until Start serves.
	go func() { done <- srv.Start(ctx) }()
	return &gatewayDriver{RuntimeDriver: d, url: "http://" + srv.Addr() + "/v1/namespaces/bench/topics/faultbench/messages",
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		stop:   func() { cancel(); <-done }}, nil
}

// Send posts one message to the gateway and records the brokers its answer lists.
func (d *gatewayDriver) Send(ctx context.Context, rec *scenario.SendRec, body []byte, t0 time.Time) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		rec.Err = err.Error()
		return
	}
	resp, err := d.client.Do(req)
	rec.Start = start.Sub(t0)
	if err != nil {
		rec.Latency = time.Since(start)
		rec.Err = err.Error()
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	rec.Latency = time.Since(start)
	if err != nil {
		rec.Err = err.Error()
		return
	}
	if resp.StatusCode != http.StatusOK {
		var er gateway.ErrorResponse
		_ = json.Unmarshal(raw, &er)
		rec.Err, rec.Tried = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, er.Error), er.BrokersTried
		return
	}
	var sr gateway.SendResponse
	if err := json.Unmarshal(raw, &sr); err != nil {
		rec.Err = err.Error()
		return
	}
	rec.OK, rec.Broker, rec.Tried = true, sr.Broker, sr.BrokersTried
}

// Close stops the gateway and the runtime behind it.
func (d *gatewayDriver) Close() {
	d.stop()
	d.RuntimeDriver.Close()
}
