// Package metrics holds every detour_* series the manager serves on its metrics endpoint, so
// their names, help texts and label sets live in one place and one Register puts them in one
// registry:
//
//   - Runtime: the producer runtime's sends, attempts, retries and isolations, and the
//     controllers' isolated-broker gauges and status writes (detour_*, no subsystem: the runtime
//     is what detour is);
//   - Facade: the name-server facade's routes, refusals and connections (detour_namesrv_facade_*);
//   - Gateway: the send gateway's requests and panics (detour_gateway_*);
//   - GRPC: the RocketMQ gRPC endpoint's calls, messages and panics (detour_grpc_*);
//   - the figures computed at scrape from the runtime Observe names: policy sizes and caps, how
//     long brokers have been isolated, route refreshes and leadership (health), and what brokers
//     last said of their send path (detour_broker_*, by policy and broker).
//
// Each front door has a subsystem of its own and the runtime none. The names are those the
// shipped alerts (config/prometheus) and any dashboard built on them query; they are kept as they
// were when the collectors lived with their users.
//
// The package knows nothing of Kubernetes: callers hand it a registry (the manager's is
// controller-runtime's) and a runtime.
package metrics
