package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/demo"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// fleetCluster is two brokersim brokers behind a brokersim name server, a Cluster "prod" over
// them, a FaultPolicy "shared" (no growth, no watch of routed brokers: only traffic and the probes
// of isolated brokers learn) and a Topic "orders" on the Cluster, whose RocketMQ topic is named
// after the namespace.
type fleetCluster struct {
	ns, topic     string
	healthy, sick *brokersim.Broker
}

func startFleetCluster(t *testing.T) *fleetCluster {
	t.Helper()
	ns := newNamespace(t)
	healthy, err := brokersim.StartBroker("fleet-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { healthy.Close() })
	sick, err := brokersim.StartBroker("fleet-b", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sick.Close() })
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", healthy, sick)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsrv.Close() })
	ctx := context.Background()
	topic := "Fleet-" + ns
	objs := []client.Object{
		&routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: routingv1alpha1.FaultPolicySpec{
				IsolationGrowth: routingv1alpha1.IsolationGrowthNone,
				Retry:           routingv1alpha1.RetryPolicy{Attempts: 2, SendTimeoutMillis: 3000, PerAttemptTimeoutMillis: ptr.To[int32](300)},
				Probe:           routingv1alpha1.ProbePolicy{RoutedBrokers: ptr.To(false), IntervalMillis: 500},
			}},
		&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, RouteRefreshSeconds: 1}},
		&routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
			Spec: routingv1alpha1.TopicSpec{TopicName: topic, ClusterRef: &routingv1alpha1.ClusterReference{Name: "prod"},
				FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "shared"}, Create: ptr.To(true),
				WriteQueueNums: 2, ReadQueueNums: 2, Perm: 6}},
	}
	for _, o := range objs {
		if err := k8sClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return &fleetCluster{ns: ns, topic: topic, healthy: healthy, sick: sick}
}

func (c *fleetCluster) policy() string { return scope.PolicyKey(c.ns, "shared") }

// sickID is the runtime's identity of the sick broker.
func (c *fleetCluster) sickID() string {
	return scope.Cluster(c.ns, "prod").Broker(c.sick.Name()).String()
}

// startReplica starts a leader-electing replica named name with a facade on the Cluster; it
// returns the replica and its facade's address.
func (c *fleetCluster) startReplica(t *testing.T, name string, hooks ...operatorHooks) (*runningOperator, string) {
	t.Helper()
	facadeAddr := freeAddr(t)
	op := startOperator(t, adminConfig, testOptions(t, c.ns, "--leader-elect", "--replica-name="+name,
		"--namesrv-facade-bind-address="+facadeAddr, "--namesrv-facade-cluster="+c.ns+"/prod"), hooks...)
	op.waitForRoute(t, c.topic, 2)
	eventually(t, name+" to merge the fleet's views", func() error {
		if !op.ctrls.IsolationsRestored() {
			return errors.New("not yet")
		}
		return nil
	})
	return op, facadeAddr
}

// isolation returns the broker's item in the runtime's view of the policy, if it is isolated.
func isolation(op *runningOperator, policy, broker string) (fault.Item, bool) {
	items := op.rt.Isolated(policy)
	i := slices.IndexFunc(items, func(it fault.Item) bool { return it.Broker == broker })
	if i < 0 {
		return fault.Item{}, false
	}
	return items[i], true
}

// isolateThrough sends through op's gateway until op itself isolates the broker, and returns
// when it did (its own record of the moment).
func isolateThrough(t *testing.T, op *runningOperator, c *fleetCluster) time.Time {
	t.Helper()
	var since time.Time
	eventually(t, "the sending replica to isolate the frozen broker", func() error {
		if it, ok := isolation(op, c.policy(), c.sickID()); ok && !it.Peer {
			since = it.Since
			return nil
		}
		a := postMessage(t, &http.Client{Timeout: 10 * time.Second}, messagesURL(op.gw.URL(), c.ns, "orders"), "text/plain", "", []byte("m"), nil)
		return fmt.Errorf("not isolated yet (last send %d)", a.status)
	})
	return since
}

// peerIsolatedAt polls op (every millisecond) until it holds the broker out on another replica's
// claim, and returns when it saw it.
func peerIsolatedAt(t *testing.T, op *runningOperator, c *fleetCluster) time.Time {
	t.Helper()
	deadline := time.Now().Add(eventuallyTimeout)
	for time.Now().Before(deadline) {
		if it, ok := isolation(op, c.policy(), c.sickID()); ok {
			if !it.Peer {
				t.Fatalf("the replica without traffic isolates %s on its own: %+v", c.sick.Name(), it)
			}
			return time.Now()
		}
		time.Sleep(time.Millisecond) // the poll interval; the runtime's state is the synchronisation
	}
	t.Fatalf("the other replica never held %s out", c.sick.Name())
	return time.Time{}
}

// facadeHides succeeds when the facade at addr publishes the broker without its write bit.
func facadeHides(addr, topic, broker string) error {
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, remoting.NewGetRouteInfoRequest(topic))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("route answer %d %s", resp.Code, resp.Remark)
	}
	route, err := remoting.DecodeTopicRouteData(resp.Body)
	if err != nil {
		return err
	}
	for _, q := range route.QueueDatas {
		if q.BrokerName == broker {
			if q.Perm&remoting.PermWrite != 0 {
				return fmt.Errorf("%s published writable (perm %d)", broker, q.Perm)
			}
			return nil
		}
	}
	return fmt.Errorf("%s not in the route %+v", broker, route.QueueDatas)
}

// statusSeenBy succeeds when the FaultPolicy's status lists the broker as isolated, seen by
// replica.
func statusSeenBy(ns, policy, broker, replica string) error {
	var fp routingv1alpha1.FaultPolicy
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: policy}, &fp); err != nil {
		return err
	}
	for _, ib := range fp.Status.IsolatedBrokers {
		if ib.BrokerName == broker && slices.Contains(ib.SeenBy, replica) {
			if fp.Status.Replicas < 2 {
				return fmt.Errorf("status merges %d replicas, want 2", fp.Status.Replicas)
			}
			return nil
		}
	}
	return fmt.Errorf("isolatedBrokers %+v", fp.Status.IsolatedBrokers)
}

// TestReplicasShareIsolations runs two replicas on one API server, traffic and probes through
// replica A only, and freezes a broker, five times: replica B holds the broker out once A
// isolates it (the delay is logged as a distribution, not asserted), B's facade publishes it
// read-only, the FaultPolicy status lists it as seen by A, B's gateway never tries it, and when A
// readmits it on its probes' proof (a probation of good probes in a row) B does too.
func TestReplicasShareIsolations(t *testing.T) {
	needsEnvtest(t)
	c := startFleetCluster(t)
	a, _ := c.startReplica(t, "replica-a")
	b, facadeB := c.startReplica(t, "replica-b")
	var delays []time.Duration
	for round := range 5 {
		c.sick.SetFault(brokersim.Fault{BlackHole: true})
		isolatedAt := isolateThrough(t, a, c)
		delays = append(delays, peerIsolatedAt(t, b, c).Sub(isolatedAt))

		eventually(t, "B's facade to publish the frozen broker read-only", func() error {
			return facadeHides(facadeB, c.topic, c.sick.Name())
		})
		eventually(t, "the FaultPolicy status to list the broker as seen by replica-a", func() error {
			return statusSeenBy(c.ns, "shared", c.sick.Name(), "replica-a")
		})
		for range 20 {
			ans := postMessage(t, &http.Client{Timeout: 10 * time.Second}, messagesURL(b.gw.URL(), c.ns, "orders"), "text/plain", "", []byte("m"), nil)
			if ans.status != http.StatusOK || slices.Contains(ans.ok.BrokersTried, c.sick.Name()) {
				t.Fatalf("round %d: B's gateway answered %d, brokers tried %v (err %+v)", round, ans.status, ans.ok.BrokersTried, ans.err)
			}
		}

		c.sick.SetFault(brokersim.Fault{})
		eventually(t, "both replicas to readmit the thawed broker", func() error {
			for _, op := range []*runningOperator{a, b} {
				if it, ok := isolation(op, c.policy(), c.sickID()); ok {
					return fmt.Errorf("still isolated: %+v", it)
				}
			}
			return nil
		})
	}
	slices.Sort(delays)
	t.Logf("replica B held the broker out %v after replica A isolated it (min %v, median %v, max %v over %d rounds)",
		delays, delays[0], delays[len(delays)/2], delays[len(delays)-1], len(delays))
}

// TestReplicasShareIsolationsUntilTheClaimantDies proves that a replica that dies holding an
// isolation does not hold it out forever: its claim ends when its view expires (a 3 s lease here).
func TestReplicasShareIsolationsUntilTheClaimantDies(t *testing.T) {
	needsEnvtest(t)
	c := startFleetCluster(t)
	short := operatorHooks{fleetLease: 3 * time.Second}
	a, _ := c.startReplica(t, "replica-a", short)
	b, _ := c.startReplica(t, "replica-b", short)
	c.sick.SetFault(brokersim.Fault{BlackHole: true})
	isolateThrough(t, a, c)
	peerIsolatedAt(t, b, c)
	var view routingv1alpha1.ReplicaView
	eventually(t, "A's view to hold the frozen broker until a probe's proof (no end in time)", func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: "replica-a"}, &view); err != nil {
			return err
		}
		if !slices.ContainsFunc(view.Spec.Isolations, func(ri routingv1alpha1.ReplicaIsolation) bool {
			return ri.BrokerName == c.sick.Name() && ri.Until == nil
		}) {
			return fmt.Errorf("view %+v", view.Spec.Isolations)
		}
		return nil
	})
	if err := a.stop(); err != nil {
		t.Fatalf("stopping replica A: %v", err)
	}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: "replica-a"}, &view); err != nil {
		t.Fatalf("the dead replica's view: %v", err)
	}
	expiry := view.Spec.RenewTime.Add(time.Duration(view.Spec.LeaseDurationSeconds) * time.Second)
	eventually(t, "B to drop the dead replica's claim", func() error {
		if it, ok := isolation(b, c.policy(), c.sickID()); ok {
			return fmt.Errorf("still held out: %+v", it)
		}
		return nil
	})
	t.Logf("replica B dropped the dead replica's claim %v after its view expired (lease 3 s)", time.Since(expiry).Round(time.Millisecond))
}

// stormBrokers is how many brokers the isolation storm runs over; all but one refuse connections.
const stormBrokers = 11

// TestReplicaViewWritesStayBoundedUnderAnIsolationStorm has ten of eleven brokers refuse every
// connection under a policy whose failures isolate for 50 ms, with traffic on eight workers,
// and counts the replica's view writes: at most one a second, however many isolations change.
func TestReplicaViewWritesStayBoundedUnderAnIsolationStorm(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	for i := range stormBrokers {
		name := fmt.Sprintf("storm-%d", i)
		b, err := brokersim.StartBrokerWith(name, "127.0.0.1:0", brokersim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if i > 0 {
			// Connections refused: each send the broker gets isolates it for 50 ms, and it is
			// tried again soon after that ends (broker 0 takes the traffic meanwhile).
			b.SetFault(brokersim.Fault{Refuse: true})
		}
		if err := demo.CreateBrokerPod(context.Background(), k8sClient, ns, b, map[string]string{"app": "storm"}); err != nil {
			t.Fatal(err)
		}
	}
	fp := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storm"},
		Spec: routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.FaultPreset("RocketMQ5"),
			Rules:                []routingv1alpha1.FaultRule{{LatencyMillis: 0, IsolationMillis: 0}, {LatencyMillis: 1000, IsolationMillis: 50}},
			FailureLatencyMillis: ptr.To[int64](1000),
			Retry:                routingv1alpha1.RetryPolicy{Attempts: 3, SendTimeoutMillis: 2000}}}
	if err := k8sClient.Create(context.Background(), fp); err != nil {
		t.Fatal(err)
	}
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storm"},
		Spec: routingv1alpha1.TopicSpec{TopicName: "Storm", WriteQueueNums: 2, ReadQueueNums: 2,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "storm"}},
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "storm"}}}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, adminConfig, testOptions(t, ns, "--leader-elect", "--replica-name=storm"))
	op.waitForRoute(t, "Storm", stormBrokers)
	eventually(t, "the replica's first view", func() error {
		if op.ctrls.FleetWrites() == 0 {
			return errors.New("no view written")
		}
		return nil
	})

	policy := scope.PolicyKey(ns, "storm")
	isolations := func() float64 { return counterSum(t, "detour_isolations_total", "policy", policy) }
	// The storm runs at least 6 s and until it has entered more isolations than the writes the
	// bound allows in that time, so the bound is actually in play however slow the machine is.
	const minStorm, maxStorm = 6 * time.Second, 90 * time.Second
	isoBefore, writesBefore, start := isolations(), op.ctrls.FleetWrites(), time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, _ = op.rt.SendRoute(ctx, scope.TopicRoute(ns, "storm"), &producer.Message{Topic: "Storm", Body: []byte("m")})
				cancel()
			}
		})
	}
	allowed := func(d time.Duration) uint64 { return uint64(d/time.Second) + 1 }
	stormed := func(elapsed time.Duration) bool {
		return elapsed >= minStorm && isolations()-isoBefore > float64(allowed(elapsed))
	}
	ticker := time.NewTicker(100 * time.Millisecond)
	for elapsed := time.Duration(0); !stormed(elapsed) && elapsed < maxStorm; elapsed = time.Since(start) {
		<-ticker.C
	}
	ticker.Stop()
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	entered, writes := isolations()-isoBefore, op.ctrls.FleetWrites()-writesBefore
	t.Logf("isolation storm: %.0f isolations entered in %v (%.1f/s); %d view writes (%.2f/s)",
		entered, elapsed.Round(time.Millisecond), entered/elapsed.Seconds(), writes, float64(writes)/elapsed.Seconds())
	if entered <= float64(allowed(elapsed)) {
		t.Fatalf("only %.0f isolations in %v, no more than the writes allowed: no storm to bound", entered, elapsed)
	}
	if limit := allowed(elapsed); writes > limit {
		t.Fatalf("%d view writes in %v, more than one a second", writes, elapsed)
	}
}

// counterSum adds up the counter name over the series whose label has value, from the registry
// the operator's metrics are served from.
func counterSum(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
