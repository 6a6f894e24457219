package realenv

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"

	"github.com/detourmq/detour/hack/faultbench/internal/drivers"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// startEndpointSide starts detour's runtime with the policy of the runtime strategy named (detour,
// detour+hedge or oracle+hedge, whose runtime never knows the bad broker) and detour's gRPC
// endpoint around it on a free loopback port, serving TLS (the SDK's default) with a certificate
// of its own, as the operator serves it, and the benchmark topic only.
func startEndpointSide(e *Env, runtimeStrategy string) (*detourSide, error) {
	rec := &drivers.Recorder{}
	d, err := drivers.NewRuntimeDriver(runtimeStrategy, e.BrokerList(), rec)
	if err != nil {
		return nil, err
	}
	cfg, err := selfSignedTLS()
	if err != nil {
		d.Close()
		return nil, err
	}
	srv, err := grpcfront.New(grpcfront.Options{Addr: "127.0.0.1:0", Runtime: d.Runtime, TLS: cfg, Logger: logr.Discard(),
		Topics: front.TopicResolverFunc(resolveBenchTopic)})
	if err != nil {
		d.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			e.log("gRPC endpoint: %v", err)
		}
	}
	return &detourSide{d: d, rec: rec, stop: make(chan struct{}), endpoint: srv.Addr().String(), stopEndpoint: stop}, nil
}

// resolveBenchTopic is the endpoint's topic resolution: the benchmark topic, nothing else.
func resolveBenchTopic(_ context.Context, _, name string) (front.Target, error) {
	if name != scenario.Topic {
		return front.Target{}, fmt.Errorf("%w: %s", front.ErrTopicNotFound, name)
	}
	return front.Target{Topic: scenario.Topic}, nil
}

// selfSignedTLS is a server TLS configuration with a certificate made for this run; the SDK, like
// the Proxy's own clients, does not verify the server's certificate.
func selfSignedTLS() (*tls.Config, error) {
	crt, key, err := certutil.GenerateSelfSignedCertKey("detour-faultbench", nil, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// proxy returns the cluster's RocketMQ Proxy of the kind asked for, started on first use and kept
// for every later run: with its defaults, or with its own fault strategy on. A Proxy keeps what it
// learnt of the brokers between runs as a Proxy in service would; restore heals the bad broker
// before every run, and its isolations expire.
func (e *Env) proxy(faultStrategy bool) (*rmqtest.Proxy, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if px := e.proxies[faultStrategy]; px != nil {
		return px, nil
	}
	o := rmqtest.ProxyOptions{}
	if faultStrategy {
		o.Settings = map[string]any{"sendLatencyEnable": true, "startDetectorEnable": true}
	}
	var px *rmqtest.Proxy
	if err := e.harness(func() { px = e.c.StartProxy(o) }); err != nil {
		return nil, fmt.Errorf("start the Proxy: %w", err)
	}
	if e.proxies == nil {
		e.proxies = map[bool]*rmqtest.Proxy{}
	}
	e.proxies[faultStrategy] = px
	return px, nil
}
