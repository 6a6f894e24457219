package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/gateway"
)

// gatewayStrategy is an HTTP client sending through detour's send gateway, which sends through a
// runtime with the detour strategy's policy.
const gatewayStrategy = "gateway+detour"

func init() {
	strategyDescriptions[gatewayStrategy] = "an HTTP client (Go's net/http, keep-alive) posting each message's body to detour's send " +
		"gateway, which sends it through a runtime with the detour strategy's policy; pod steps reach that runtime, and a send's " +
		"brokers are the ones the gateway's answer lists"
}

// gatewayDriver drives the send gateway in front of a runtime driver.
type gatewayDriver struct {
	*runtimeDriver
	url    string
	client *http.Client
	stop   func()
}

// newGatewayDriver starts the gateway on a free loopback port around a detour runtime.
func newGatewayDriver(brokers []brokerInfo, rec *recorder) (*gatewayDriver, error) {
	d, err := newRuntimeDriver("detour", brokers, rec)
	if err != nil {
		return nil, err
	}
	srv, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Sender: d.rt, Logger: logr.Discard(),
		Topics: front.NameResolverFunc(func(_ context.Context, _, name string) (front.Target, error) {
			if name != "faultbench" {
				return front.Target{}, fmt.Errorf("%w: %s", front.ErrTopicNotFound, name)
			}
			return front.Target{Topic: topic}, nil
		})})
	if err != nil {
		d.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// New opened the listener: the address is known and connections queue until Start serves.
	go func() { done <- srv.Start(ctx) }()
	return &gatewayDriver{runtimeDriver: d, url: "http://" + srv.Addr() + "/v1/namespaces/bench/topics/faultbench/messages",
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		stop:   func() { cancel(); <-done }}, nil
}

func (d *gatewayDriver) send(ctx context.Context, rec *sendRec, body []byte, t0 time.Time) {
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

func (d *gatewayDriver) close() {
	d.stop()
	d.runtimeDriver.close()
}
