package realenv

import (
	"context"
	"sync"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/drivers"
	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
	"github.com/detourmq/detour/internal/testsupport/facadetest"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/facade"
)

// startSide starts what a Java strategy sends through besides the cluster, and points opts at it:
// detour's facade (with its runtime), detour's gRPC endpoint (with its runtime), or the Proxy.
// It returns the detour side, nil when detour takes no part.
func startSide(e *Env, name string, js javaStrategy, opts *rmqtest.ProducerOptions) (*detourSide, error) {
	switch {
	case js.facade:
		side, err := startFacadeSide(e, js.watch)
		if err != nil {
			return nil, err
		}
		opts.NameServers = []string{side.fc.Addr()}
		opts.PollNameServerInterval = strategy.FacadeJavaPoll
		return side, nil
	case js.grpc == viaDetour:
		side, err := startEndpointSide(e, strategy.RuntimeStrategy(name))
		if err != nil {
			return nil, err
		}
		opts.GRPCEndpoint = side.endpoint
		return side, nil
	case js.grpc == viaProxy || js.grpc == viaProxyFault:
		px, err := e.proxy(js.grpc == viaProxyFault)
		if err != nil {
			return nil, err
		}
		opts.GRPCEndpoint = px.Addr
	}
	return nil, nil
}

// detourSide is detour's part of a strategy whose producer runs in a JVM: its runtime with the
// detour strategy's policy and either a name-server facade in front of the cluster's name server
// that publishes what that runtime isolates (with a canary trickle through the runtime, which is
// what it measures the brokers by), or detour's gRPC endpoint, which sends the SDK's messages
// through the runtime.
type detourSide struct {
	d    *drivers.RuntimeDriver
	rec  *drivers.Recorder
	fc   *facade.Server
	stop chan struct{}
	wg   sync.WaitGroup
	// endpoint is the gRPC endpoint's address; stopEndpoint ends it.
	endpoint     string
	stopEndpoint func()
}

// startFacadeSide starts the runtime, the facade and either the canary or, with watch, the
// runtime's watch of the routed brokers instead.
func startFacadeSide(e *Env, watch bool) (*detourSide, error) {
	rec := &drivers.Recorder{}
	d, err := drivers.NewRuntimeDriver("detour", e.BrokerList(), rec)
	if err != nil {
		return nil, err
	}
	if watch {
		pol, _ := d.Runtime.Policy("detour")
		pol.Probe.Routed = true
		if err := d.Runtime.SetPolicy(pol); err != nil {
			d.Close()
			return nil, err
		}
	}
	s := &detourSide{d: d, rec: rec, stop: make(chan struct{})}
	s.fc, err = facade.Start(facade.Options{Addr: "127.0.0.1:0",
		View: facadetest.RuntimeView{NameServer: e.NameServer(), Topic: scenario.Topic, Policy: "detour", Runtime: d.Runtime}})
	if err != nil {
		d.Close()
		return nil, err
	}
	if !watch {
		s.wg.Add(1)
		go s.canary()
	}
	return s, nil
}

// canary sends strategy.FacadeCanaryRate messages a second through detour's runtime until close: its
// measurements are what the facade publishes.
func (s *detourSide) canary() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second / strategy.FacadeCanaryRate)
	defer t.Stop()
	body := make([]byte, 128)
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			var r scenario.SendRec
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			s.d.Send(ctx, &r, body, time.Now())
			cancel()
		}
	}
}

// isolations are the bad broker's isolation changes in detour's runtime during the run.
func (s *detourSide) isolations() []scenario.IsoRec {
	return s.rec.Isolations()
}

// attempts are the attempts detour's runtime made during the run.
func (s *detourSide) attempts() []scenario.AttemptRec {
	return s.rec.Attempts()
}

// Close stops the side's canary, door or facade and its runtime.
func (s *detourSide) Close() {
	close(s.stop)
	s.wg.Wait()
	if s.fc != nil {
		s.fc.Close()
	}
	if s.stopEndpoint != nil {
		s.stopEndpoint()
	}
	s.d.Close()
}
