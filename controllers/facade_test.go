package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/facade"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// javaPoll is the route poll interval of the Java producers here (RocketMQ's default is 30 s).
const javaPoll = 2 * time.Second

// window summarises the Java sends that started within [from, to).
type window struct {
	sends, failed int
	p99           time.Duration
	onBroker      map[string]int
}

func summarise(sends []rmqtest.JavaSend, from, to time.Time) window {
	w := window{onBroker: map[string]int{}}
	var lat []time.Duration
	for _, s := range sends {
		if s.Start.Before(from) || !s.Start.Before(to) {
			continue
		}
		w.sends++
		if !s.OK {
			w.failed++
		}
		lat = append(lat, s.Latency())
		for _, b := range s.Brokers {
			w.onBroker[b]++
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		w.p99 = lat[(len(lat)*99)/100]
	}
	return w
}

func (w window) String() string {
	return fmt.Sprintf("%d sends, %d failed, p99 %v, attempts per broker %v", w.sends, w.failed, w.p99.Round(time.Millisecond), w.onBroker)
}

// canary keeps detour's own runtime sending a trickle to topic, so it measures every broker
// (what the facade publishes is what detour learnt from its sends and probes), until the returned
// stop is called or the test ends.
func canary(t *testing.T, rt *producer.Runtime, topic *routingv1alpha1.Topic) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = rt.SendRoute(ctx, routeOf(topic), &producer.Message{Topic: topic.Spec.TopicName, Body: []byte("canary")})
				cancel()
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// TestNameServerFacadeSteersUnmodifiedJavaProducers runs RocketMQ's own Java producer with its
// default settings (no latency fault tolerance; route poll lowered to 2 s) against a real 5.x
// cluster, once through the real name server and once through detour's facade, while a broker is
// paused; then a rolling restart through the facade; then RocketMQ's own consumer through the
// facade while a broker is hidden; last, with no traffic through detour, a paused broker hidden by
// the policy's watch of its routed brokers.
func TestNameServerFacadeSteersUnmodifiedJavaProducers(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	c := rmqtest.Start(t, rmqtest.V5,
		rmqtest.BrokerConfig{Name: ns + "-broker-a", NoAutoCreate: true},
		rmqtest.BrokerConfig{Name: ns + "-broker-b", NoAutoCreate: true},
		rmqtest.BrokerConfig{Name: ns + "-broker-c", NoAutoCreate: true})
	a, b, cc := c.Brokers()[0], c.Brokers()[1], c.Brokers()[2]
	rt := startManager(t)
	ctx := context.Background()
	app := "rocketmq-" + ns
	pods := map[string]*corev1.Pod{}
	for _, br := range c.Brokers() {
		pods[br.Name] = createBrokerPod(t, ns, app, br.Name, br.Addr)
	}
	// Only failures isolate: on a loaded test machine a healthy broker may answer slowly now and
	// then, and what is measured here is the facade against a paused broker, not slowness.
	createPolicy(t, ns, "steer", routingv1alpha1.FaultPolicySpec{Rules: []routingv1alpha1.FaultRule{
		{LatencyMillis: 0, IsolationMillis: 0}, {LatencyMillis: 10000, IsolationMillis: 10000}}})
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{c.NameServer()}, RouteRefreshSeconds: 1,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	if err := k8sClient.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steered"},
		Spec: routingv1alpha1.TopicSpec{TopicName: "T_" + ns + "_steered", ClusterRef: &routingv1alpha1.ClusterReference{Name: "prod"},
			Create: ptr.To(true), WriteQueueNums: 4, ReadQueueNums: 4, Perm: 6,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "steer"}}}
	if err := k8sClient.Create(ctx, topic); err != nil {
		t.Fatal(err)
	}
	topicReady(t, topic, 3)
	name := topic.Spec.TopicName

	view := &FacadeView{Reader: startIndexedCache(t), Runtime: rt, Cluster: types.NamespacedName{Namespace: ns, Name: "prod"}}
	hides, routes := &hideLog{}, &routeLog{}
	fc, err := facade.Start(facade.Options{Addr: "127.0.0.1:0", View: view, OnChange: hides.record, Metrics: routes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Close() })
	stopCanary := canary(t, rt, topic)

	// A first Java producer warms the brokers and the JIT, so neither measured run pays for it.
	warm := c.StartProducer(rmqtest.ProducerOptions{Topic: name, Senders: 4, Rate: 100, Duration: 3 * time.Second, Shared: true, Warmup: 8})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, _ = warm.Wait(wctx)
	cancel()

	// Paused broker: the same schedule through the name server and through the facade.
	paused := func(nameServer string) window {
		p := c.StartProducer(rmqtest.ProducerOptions{NameServers: []string{nameServer}, Topic: name,
			Senders: 4, Rate: 100, Duration: 20 * time.Second, PollNameServerInterval: javaPoll, Shared: true, Warmup: 8})
		start := time.Now()
		time.Sleep(3 * time.Second) // healthy span
		b.Pause()
		pausedAt := time.Now()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		sends, err := p.Wait(wctx)
		cancel()
		b.Resume()
		if err != nil {
			t.Fatal(err)
		}
		healthy := summarise(sends, start, pausedAt)
		// Through the facade, the client stops sending to b at its first poll after the facade
		// first hid b; directly, nothing ever changes, so any span after the pause shows it.
		settled := pausedAt.Add(3*time.Second + javaPoll + time.Second)
		if nameServer == fc.Addr() {
			hidAt, ok := hides.firstHidden(b.Name, pausedAt)
			if !ok {
				t.Fatalf("the facade never hid the paused %s", b.Name)
			}
			settled = hidAt.Add(javaPoll + time.Second)
		}
		after := summarise(sends, settled, time.Now())
		t.Logf("through %s: healthy %v; paused, after the client's poll: %v", nameServer, healthy, after)
		// Let b work off what queued while it was paused, and detour see it recover (a good
		// probe), before the next run.
		eventuallyWithin(t, realTimeout, b.Name+" back in service", func() error {
			if slices.ContainsFunc(rt.Isolated(scope.PolicyKey(ns, "steer")), func(it fault.Item) bool { return it.Broker == scope.Cluster(ns, "prod").Broker(b.Name).String() }) {
				return fmt.Errorf("still isolated")
			}
			for range 5 {
				pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, err := b.MaxOffset(pctx, name, 0)
				cancel()
				if err != nil {
					return fmt.Errorf("not answering promptly: %w", err)
				}
			}
			return nil
		})
		return after
	}
	direct := paused(c.NameServer())
	through := paused(fc.Addr())
	t.Logf("paused broker, after the client's poll: p99 %v through the facade, %v directly (%.1fx); failed %d vs %d",
		through.p99.Round(time.Millisecond), direct.p99.Round(time.Millisecond), float64(direct.p99)/float64(max(through.p99, time.Millisecond)), through.failed, direct.failed)
	if direct.failed == 0 {
		t.Errorf("directly against the name server the default Java producer lost no send to the paused broker (%v); the comparison proves nothing", direct)
	}
	if through.sends == 0 || through.failed != 0 || through.onBroker[b.Name] != 0 {
		t.Errorf("through the facade, after the client's poll: %v; want sends, no failure and no attempt on %s", through, b.Name)
	}

	// Rolling restart: the pod is marked terminating first, then the broker stops gracefully and
	// starts again under the same name.
	p := c.StartProducer(rmqtest.ProducerOptions{NameServers: []string{fc.Addr()}, Topic: name,
		Senders: 4, Rate: 100, Duration: 30 * time.Second, PollNameServerInterval: javaPoll, Shared: true, Warmup: 8})
	// Traffic through the facade reaches the brokers before the restart: a run of stored sends.
	eventuallyWithin(t, realTimeout, "the Java producer's sends stored", func() error {
		if w := summarise(p.Sends(), time.Time{}, time.Now().Add(time.Hour)); w.sends-w.failed < 100 {
			return fmt.Errorf("%v", w)
		}
		return nil
	})
	pod := pods[a.Name]
	holdPod(t, pod)
	if err := k8sClient.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	marked := time.Now()
	// The facade hides the terminating broker in a route answer, and the producer (the one client
	// asking now) polls again after that answer: it has the route without the broker.
	eventuallyWithin(t, realTimeout, "a route poll after the facade hid "+a.Name, func() error {
		hidAt, ok := hides.firstHidden(a.Name, marked)
		if !ok {
			return fmt.Errorf("not hidden yet")
		}
		if n := routes.servedSince(name, hidAt); n < 2 {
			return fmt.Errorf("%d route answers since it was hidden at %v", n, hidAt)
		}
		return nil
	})
	polled := time.Now()
	a.Stop()
	a.Restart()
	releasePod(t, pod)
	eventuallyWithin(t, realTimeout, "the terminating pod gone", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	pods[a.Name] = createBrokerPod(t, ns, app, a.Name, a.Addr)
	wctx, cancel = context.WithTimeout(ctx, time.Minute)
	sends, err := p.Wait(wctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	restart := summarise(sends, polled, time.Now())
	t.Logf("rolling restart through the facade: before the client's poll %v; after it %v", summarise(sends, marked, polled), restart)
	if restart.failed != 0 {
		t.Errorf("rolling restart through the facade: %v; want no failed send once the client polled", restart)
	}

	// A hidden broker stays readable: RocketMQ's consumer through the facade reads every queue.
	setPodReady(t, pods[cc.Name], false)
	eventuallyWithin(t, realTimeout, cc.Name+" hidden by the facade", func() error {
		if h, _ := view.Hide(name, []string{a.Name, b.Name, cc.Name}); h[cc.Name] == "" {
			return fmt.Errorf("hidden %v", h)
		}
		return nil
	})
	stopCanary() // so what the brokers hold stays put while the consumer reads it
	stored, err := c.Stored(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range stored {
		total += n
	}
	if stored[cc.Name] == 0 {
		t.Fatalf("nothing stored on %s to read back", cc.Name)
	}
	got := c.ConsumeVia(t, ctx, fc.Addr(), name, int(total), 60*time.Second)
	t.Logf("consumer through the facade read %d of %d stored (%v), %d from the hidden %s", len(got), total, stored, countOn(got, cc.Name), cc.Name)
	if int64(len(got)) != total || countOn(got, cc.Name) != int(stored[cc.Name]) {
		t.Errorf("consumer through the facade read %d of %d messages, %d of %d on the hidden broker", len(got), total, countOn(got, cc.Name), stored[cc.Name])
	}

	// No traffic through detour at all now: with probe.routedBrokers the policy's runtime still
	// finds a paused broker silent, and the facade hides it.
	fp := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steer"}}
	updateObject(t, fp, func() { fp.Spec.Probe.RoutedBrokers = ptr.To(true) })
	eventually(t, "the policy's status shows the watch", func() error {
		st := getPolicy(t, ns, "steer").Status
		if st.Effective == nil || !st.Effective.ProbeRoutedBrokers || !strings.Contains(st.Behavior, "+watch") {
			return fmt.Errorf("behavior %q, effective %+v", st.Behavior, st.Effective)
		}
		return nil
	})
	eventuallyWithin(t, realTimeout, b.Name+" shown before it is paused", func() error {
		if h, _ := view.Hide(name, []string{a.Name, b.Name, cc.Name}); h[b.Name] != "" {
			return fmt.Errorf("hidden %v", h)
		}
		return nil
	})
	b.Pause()
	defer b.Resume()
	eventuallyWithin(t, realTimeout, b.Name+" hidden by the facade without traffic", func() error {
		if h, _ := view.Hide(name, []string{a.Name, b.Name, cc.Name}); h[b.Name] == "" {
			return fmt.Errorf("hidden %v", h)
		}
		return nil
	})
}

func countOn(msgs []rmqtest.Consumed, broker string) int {
	n := 0
	for _, m := range msgs {
		if m.BrokerName == broker {
			n++
		}
	}
	return n
}

// holdPod adds a finalizer, so a deleted pod stays terminating until releasePod.
func holdPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["routing.detour.dev/test-hold"]}}`))
	if err := k8sClient.Patch(context.Background(), pod, patch); err != nil {
		t.Fatal(err)
	}
}

// releasePod removes holdPod's finalizer.
func releasePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := k8sClient.Patch(context.Background(), pod, patch); err != nil {
		t.Fatal(err)
	}
}

// hideLog records when the facade hid or showed brokers.
type hideLog struct {
	mu      sync.Mutex
	changes []facade.Change
	at      []time.Time
}

func (h *hideLog) record(c facade.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, c)
	h.at = append(h.at, time.Now())
}

// routeLog is the facade's Metrics for these tests: it records when each route answer for a
// governed topic was served, and ignores the rest.
type routeLog struct {
	mu     sync.Mutex
	served map[string][]time.Time
}

// RouteServed implements facade.Metrics.
func (r *routeLog) RouteServed(topic string, _ bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.served == nil {
		r.served = map[string][]time.Time{}
	}
	r.served[topic] = append(r.served[topic], time.Now())
}

// servedSince counts the route answers for topic served at or after since.
func (r *routeLog) servedSince(topic string, since time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.served[topic] {
		if !at.Before(since) {
			n++
		}
	}
	return n
}

// BrokersHidden implements facade.Metrics.
func (r *routeLog) BrokersHidden(string, int) {}

// Refused implements facade.Metrics.
func (r *routeLog) Refused(int16) {}

// Coalesced implements facade.Metrics.
func (r *routeLog) Coalesced(int16) {}

// Panicked implements facade.Metrics.
func (r *routeLog) Panicked() {}

// Answered implements facade.Metrics.
func (r *routeLog) Answered(int16, time.Duration) {}

// ConnectionRefused implements facade.Metrics.
func (r *routeLog) ConnectionRefused(bool) {}

// firstHidden returns when the facade first hid broker after since.
func (h *hideLog) firstHidden(broker string, since time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.changes {
		if c.Broker == broker && c.Hidden && !h.at[i].Before(since) {
			return h.at[i], true
		}
	}
	return time.Time{}, false
}
