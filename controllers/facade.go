package controllers

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/producer"
)

// Event reasons of the name-server facade, recorded on the Topic whose route changed.
const (
	EventBrokerHidden = "BrokerHidden"
	EventBrokerShown  = "BrokerShown"
)

// viewTimeout bounds the cache reads behind one route answer.
const viewTimeout = 2 * time.Second

// FacadeView tells the name-server facade what detour knows about one Cluster: its name servers,
// and for each topic a Topic on that Cluster declares, the brokers its FaultPolicy isolates and
// those whose pods are not ready or are terminating, never more than the policy's isolation cap.
// It reads the manager's cache and the runtime, so every replica can serve it.
type FacadeView struct {
	Reader  client.Reader
	Runtime *producer.Runtime
	// Cluster is the Cluster whose name servers the facade fronts; the zero value means the only
	// Cluster there is (none, or several, leave the facade without name servers).
	Cluster types.NamespacedName
}

// cluster returns the fronted Cluster.
func (v *FacadeView) cluster(ctx context.Context) (*routingv1alpha1.Cluster, bool) {
	if v.Cluster.Name != "" {
		var cl routingv1alpha1.Cluster
		if err := v.Reader.Get(ctx, v.Cluster, &cl); err != nil {
			return nil, false
		}
		return &cl, true
	}
	var list routingv1alpha1.ClusterList
	if err := v.Reader.List(ctx, &list); err != nil || len(list.Items) != 1 {
		return nil, false
	}
	return &list.Items[0], true
}

var _ facade.View = (*FacadeView)(nil)

// NameServers returns the Cluster's name servers; none while it does not exist.
func (v *FacadeView) NameServers() []string {
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	cl, ok := v.cluster(ctx)
	if !ok {
		return nil
	}
	return cl.Spec.NameServers
}

// topicOnCluster finds the fronted Cluster and the Topic on it that declares the RocketMQ topic.
func (v *FacadeView) topicOnCluster(ctx context.Context, topic string) (*routingv1alpha1.Cluster, *routingv1alpha1.Topic, bool) {
	cl, ok := v.cluster(ctx)
	if !ok {
		return nil, nil, false
	}
	t, ok := declaringTopic(ctx, v.Reader, cl, topic)
	return cl, t, ok
}

// declaringTopic finds the Topic on cl that declares the RocketMQ topic.
func declaringTopic(ctx context.Context, r client.Reader, cl *routingv1alpha1.Cluster, topic string) (*routingv1alpha1.Topic, bool) {
	var topics routingv1alpha1.TopicList
	if err := r.List(ctx, &topics, client.InNamespace(cl.Namespace)); err != nil {
		return nil, false
	}
	i := slices.IndexFunc(topics.Items, func(t routingv1alpha1.Topic) bool {
		return t.Spec.ClusterRef != nil && t.Spec.ClusterRef.Name == cl.Name && t.Spec.TopicName == topic
	})
	if i < 0 {
		return nil, false
	}
	return &topics.Items[i], true
}

// governingPolicy is the policy that governs topic on cl: the FaultPolicy of the Topic that
// declares it, else the Cluster's faultPolicyRef; ok is false when neither governs it.
func governingPolicy(ctx context.Context, r client.Reader, cl *routingv1alpha1.Cluster, topic string) (string, bool) {
	if t, ok := declaringTopic(ctx, r, cl, topic); ok {
		return topicPolicyKey(t), true
	}
	if ref := cl.Spec.FaultPolicyRef; ref != nil {
		return PolicyKey(cl.Namespace, ref.Name), true
	}
	return "", false
}

// Hide returns the brokers of topic's route to publish read-only, with the reason, when a Topic
// on the Cluster declares topic or the Cluster's own policy governs every topic.
func (v *FacadeView) Hide(topic string, brokers []string) (map[string]string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	cl, ok := v.cluster(ctx)
	if !ok {
		return nil, false
	}
	policyKey, ok := governingPolicy(ctx, v.Reader, cl, topic)
	if !ok {
		return nil, false
	}
	return hiddenBrokers(ctx, v.Reader, v.Runtime, cl, policyKey, brokers), true
}

// hiddenBrokers is what the facade publishes read-only of brokers on cl under policyKey, with the
// reason: the brokers whose pods are not Ready or are terminating (when the policy respects pod
// health) and those the policy isolates, never more than its isolation cap.
func hiddenBrokers(ctx context.Context, r client.Reader, rt *producer.Runtime, cl *routingv1alpha1.Cluster, policyKey string, brokers []string) map[string]string {
	pol, _ := rt.Policy(policyKey)
	candidates := map[string]string{}
	if pol.RespectPodHealth {
		if pods, err := selectedBrokerPods(ctx, r, cl.Namespace, cl.Spec.BrokerSelector); err == nil {
			for name, p := range pods {
				switch {
				case p.Terminating:
					candidates[name] = string(routingv1alpha1.IsolationPodTerminating)
				case !p.Ready:
					candidates[name] = string(routingv1alpha1.IsolationPodNotReady)
				}
			}
		}
	}
	for _, it := range rt.Isolated(policyKey) {
		name, ours := brokerNameIn(ClusterBrokerPrefix(cl.Namespace, cl.Name), it.Broker)
		if _, ok := candidates[name]; ours && !ok {
			candidates[name] = string(it.Reason)
		}
	}
	return facade.CapHidden(candidates, brokers, pol.MaxIsolatedPercent)
}

// FacadeEvents records an Event on the Topic whose route hid or showed a broker, at most one per
// topic, broker and direction a second.
type FacadeEvents struct {
	View     *FacadeView
	Recorder recorder.EventRecorder
	limit    *writeLimiter
	once     sync.Once
}

// Record is a facade.Options.OnChange.
func (e *FacadeEvents) Record(c facade.Change) {
	e.once.Do(func() { e.limit = newWriteLimiter(time.Second) })
	key := types.NamespacedName{Namespace: c.Topic, Name: c.Broker + "/" + strconv.FormatBool(c.Hidden)}
	if e.limit.wait(key) > 0 {
		return
	}
	e.limit.wrote(key)
	ctx, cancel := context.WithTimeout(context.Background(), viewTimeout)
	defer cancel()
	_, t, ok := e.View.topicOnCluster(ctx, c.Topic)
	if !ok {
		return
	}
	if c.Hidden {
		e.Recorder.Eventf(t, nil, corev1.EventTypeWarning, EventBrokerHidden, "HideBroker",
			"Broker %s published read-only to RocketMQ clients of %s: %s", c.Broker, c.Topic, c.Reason)
		return
	}
	e.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventBrokerShown, "ShowBroker",
		"Broker %s published writable again to RocketMQ clients of %s", c.Broker, c.Topic)
}

// FacadeMetrics are the facade's Prometheus collectors.
type FacadeMetrics struct {
	routes    *prometheus.CounterVec
	hidden    *prometheus.GaugeVec
	refused   *prometheus.CounterVec
	coalesced *prometheus.CounterVec
	panics    prometheus.Counter
	conns     *prometheus.CounterVec
}

var _ facade.Metrics = (*FacadeMetrics)(nil)

var (
	facadeMetricsOnce sync.Once
	facadeMetrics     *FacadeMetrics
)

// NameServerFacadeMetrics returns the process's facade collectors, registered once in
// controller-runtime's registry.
func NameServerFacadeMetrics() *FacadeMetrics {
	facadeMetricsOnce.Do(func() {
		facadeMetrics = newFacadeMetrics()
		ctrlmetrics.Registry.MustRegister(facadeMetrics.collectors()...)
	})
	return facadeMetrics
}

// newFacadeMetrics creates the facade's collectors, unregistered.
func newFacadeMetrics() *FacadeMetrics {
	const ns = "detour"
	return &FacadeMetrics{
		routes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "routes_total",
			Help: "Topic routes served by the name-server facade, by topic (empty for topics detour does not govern) and whether brokers were hidden."},
			[]string{"topic", "rewritten"}),
		hidden: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "brokers_hidden",
			Help: "Brokers the last route answer for a topic published read-only."}, []string{"topic"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "refused_total",
			Help: "Requests the facade refused to forward (anything but the reads clients send a name server, and oneway requests), by request code; codes no name server serves are \"other\"."},
			[]string{"code"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "coalesced_total",
			Help: "Requests answered by an identical request's upstream request instead of their own, by request code."}, []string{"code"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "panics_total",
			Help: "Panics recovered while serving a client connection; each closed that connection."}),
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "namesrv_facade", Name: "connections_refused_total",
			Help: "Client connections the facade closed at once, by reason: full (it held its maximum) or source (the client's address held its share)."},
			[]string{"reason"}),
	}
}

// collectors are every collector of m.
func (m *FacadeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.routes, m.hidden, m.refused, m.coalesced, m.panics, m.conns}
}

// RouteServed implements facade.Metrics.
func (m *FacadeMetrics) RouteServed(topic string, rewritten bool) {
	m.routes.WithLabelValues(topic, strconv.FormatBool(rewritten)).Inc()
}

// BrokersHidden implements facade.Metrics.
func (m *FacadeMetrics) BrokersHidden(topic string, n int) {
	m.hidden.WithLabelValues(topic).Set(float64(n))
}

// Refused implements facade.Metrics.
func (m *FacadeMetrics) Refused(code int16) { m.refused.WithLabelValues(codeLabel(code)).Inc() }

// Coalesced implements facade.Metrics.
func (m *FacadeMetrics) Coalesced(code int16) { m.coalesced.WithLabelValues(codeLabel(code)).Inc() }

// ConnectionRefused implements facade.Metrics.
func (m *FacadeMetrics) ConnectionRefused(perSource bool) {
	reason := "full"
	if perSource {
		reason = "source"
	}
	m.conns.WithLabelValues(reason).Inc()
}

// Panicked implements facade.Metrics.
func (m *FacadeMetrics) Panicked() { m.panics.Inc() }

// codeLabel is a request code's label value: its number when a name server serves it, else
// "other", because any peer may send any of 65,536 codes and each would be a series of its own.
func codeLabel(code int16) string {
	if _, ok := facade.CodeName(code); ok {
		return strconv.Itoa(int(code))
	}
	return "other"
}
