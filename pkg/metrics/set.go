package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/producer"
)

// Set is every detour_* collector of one process.
type Set struct {
	// Runtime is the runtime's and the controllers' collectors; pass it as
	// producer.Options.Metrics.
	Runtime *Runtime
	// Facade is the name-server facade's; pass it as facade.Options.Metrics.
	Facade *Facade
	// Gateway is the send gateway's; pass it as gateway.Options.Metrics.
	Gateway *Gateway
	// GRPC is the RocketMQ gRPC endpoint's; pass it as grpcfront.Options.Metrics.
	GRPC *GRPC

	health   *healthCollector
	pressure *pressureCollector
	// doors are the gRPC endpoint's and the gateway's shared collectors (Doors).
	doors *Doors
}

// NewSet returns unregistered collectors, with no runtime behind the figures computed at scrape.
func NewSet() *Set {
	s := &Set{Runtime: NewRuntime(), Facade: NewFacade(), Gateway: NewGateway(), GRPC: NewGRPC(),
		health: newHealthCollector(), pressure: newPressureCollector()}
	// The doors count into one family, so that a panel compares them by its door label.
	s.doors = NewDoors()
	s.GRPC.doors, s.Gateway.doors = s.doors, s.doors
	return s
}

// Collectors returns every collector of s, the ones Register registers.
func (s *Set) Collectors() []prometheus.Collector {
	out := s.Runtime.collectors()
	out = append(out, s.Facade.collectors()...)
	out = append(out, s.Gateway.collectors()...)
	out = append(out, s.GRPC.collectors()...)
	out = append(out, s.doors.collectors()...)
	return append(out, s.health, s.pressure)
}

// Register registers every collector of s with reg. It fails, registering nothing more, on the
// first name reg already holds: two sets in one registry would serve one series twice.
func (s *Set) Register(reg prometheus.Registerer) error {
	for _, c := range s.Collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Observe points the figures computed at scrape at rt and leading (which reports whether this
// replica leads; nil leaves detour_leader out). A later call replaces them: a process that
// builds a second runtime (a restarted operator in a test) reports the newest.
func (s *Set) Observe(rt *producer.Runtime, leading func() bool) {
	s.health.observe(rt, leading)
	s.pressure.observe(rt)
}

// ObserveFleet points the fleet's figures (detour_fleet_*) at fleet, which is called at each
// scrape; without it, as when replicas share no views, those series are absent.
func (s *Set) ObserveFleet(fleet func() FleetFigures) { s.health.observeFleet(fleet) }
