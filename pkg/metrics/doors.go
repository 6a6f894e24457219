package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/scope"
)

// The doors that send through the runtime for their clients, the values of the door label.
const (
	// DoorGRPC is the RocketMQ gRPC endpoint.
	DoorGRPC = "grpc"
	// DoorGateway is the HTTP send gateway.
	DoorGateway = "gateway"
)

// Doors are the collectors every door shares: the messages it sent through the runtime and how
// long the runtime took, by door and by where the messages' brokers were found (the Cluster
// whose name servers publish them, or the namespace whose broker pods a Topic selects; see
// scope.Scope.MetricsCluster). The
// person on call asks "is it one Cluster or all of them?" before anything else; the doors' own
// collectors cannot answer, as they count requests before a topic is resolved. Label values come
// from the Topic or Cluster a request resolved to, never from what a client wrote, so series are
// bounded by the resources the manager serves.
type Doors struct {
	messages *prometheus.CounterVec
	duration *prometheus.HistogramVec

	// bySeries caches each door and scope's series once looked up, as the send path would
	// otherwise hash label values under a lock for every message.
	bySeries sync.Map // doorKey → *DoorSeries
}

// doorKey names the series of one door's sends to one scope's brokers.
type doorKey struct {
	door  string
	where scope.Scope
}

// DoorSeries are the series of one door's sends to the brokers of one scope.
type DoorSeries struct {
	stored, failed prometheus.Counter
	duration       prometheus.Observer
}

// NewDoors creates the doors' shared collectors, unregistered.
func NewDoors() *Doors {
	const ns, sub = "detour", "door"
	labels := []string{"door", "cluster"}
	return &Doors{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "messages_total",
			Help: "Messages a door (grpc, gateway) sent through the runtime, by the Cluster of the brokers they were sent to (namespace/name, or the namespace alone for a Topic that selects broker pods) and result: stored, or failed (no broker stored it)."},
			append(labels, "result")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "send_duration_seconds",
			Help:    "Time a door (grpc, gateway) waited on the runtime for one send (a message or a batch), every attempt and hedge included, by the Cluster of the brokers it went to (namespace/name, or the namespace alone for a Topic that selects broker pods).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}}, labels),
	}
}

// collectors are every collector of m.
func (m *Doors) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.messages, m.duration}
}

// To returns the series of door's sends to the brokers of where, looked up once.
func (m *Doors) To(door string, where scope.Scope) *DoorSeries {
	k := doorKey{door: door, where: where}
	if s, ok := m.bySeries.Load(k); ok {
		return s.(*DoorSeries)
	}
	s := &DoorSeries{
		stored:   m.messages.WithLabelValues(door, where.MetricsCluster(), "stored"),
		failed:   m.messages.WithLabelValues(door, where.MetricsCluster(), "failed"),
		duration: m.duration.WithLabelValues(door, where.MetricsCluster()),
	}
	actual, _ := m.bySeries.LoadOrStore(k, s)
	return actual.(*DoorSeries)
}

// Sent counts one send through the runtime: stored and failed messages, and how long it took.
func (s *DoorSeries) Sent(stored, failed int, took time.Duration) {
	if stored > 0 {
		s.stored.Add(float64(stored))
	}
	if failed > 0 {
		s.failed.Add(float64(failed))
	}
	s.duration.Observe(took.Seconds())
}
