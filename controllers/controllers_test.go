package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// slowPolicy isolates a broker for 5 s once a send took 300 ms, and probes isolated brokers so a
// healed one returns as soon as it answers.
func slowPolicy() routingv1alpha1.FaultPolicySpec {
	return routingv1alpha1.FaultPolicySpec{
		Rules: []routingv1alpha1.FaultRule{
			{LatencyMillis: 100, IsolationMillis: 0},
			{LatencyMillis: 300, IsolationMillis: 5000},
		},
		// Slow answers are what these tests judge: no cap cuts them short and no stall holds the
		// broker out before its answer is measured.
		Retry:            routingv1alpha1.RetryPolicy{Attempts: 3, SendTimeoutMillis: 5000, AdaptivePerAttempt: ptr.To(false)},
		Probe:            routingv1alpha1.ProbePolicy{Enabled: ptr.To(true), IntervalMillis: 200, TimeoutMillis: 100},
		StallAfterMillis: ptr.To(int32(0)),
	}
}

// sendUntilBroker sends until one send lands on broker (at most 2*queues sends).
func sendUntilBroker(t *testing.T, rt *producer.Runtime, topic *routingv1alpha1.Topic, broker string) *producer.SendResult {
	t.Helper()
	for i := 0; i < 16; i++ {
		res, err := send(rt, topic)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Broker == scope.Pods(topic.Namespace).Broker(broker).String() {
			return res
		}
	}
	t.Fatalf("no send reached %s", broker)
	return nil
}

// TestSlowBrokerIsIsolatedAndReportedThenRecovers drives the design's data flow end to end:
// resources -> controllers -> runtime -> TCP -> brokersim, and the runtime's verdict back into
// FaultPolicy status, Events and kubectl.
func TestSlowBrokerIsIsolatedAndReportedThenRecovers(t *testing.T) {
	needsEnvtest(t)
	ns, rt, c, topic := routedCluster(t, "slow", slowPolicy())

	for i := 0; i < 12; i++ {
		if _, err := send(rt, topic); err != nil {
			t.Fatalf("healthy send %d: %v", i, err)
		}
	}
	slow := c.brokers[1]
	slow.SetFault(brokersim.Fault{Delay: 400 * time.Millisecond})
	res := sendUntilBroker(t, rt, topic, slow.Name())
	if res.Latency < 300*time.Millisecond {
		t.Fatalf("the slow send took %v", res.Latency)
	}

	eventually(t, "status lists the slow broker", func() error {
		fp := getPolicy(t, ns, "slow")
		ib := isolatedIn(fp, slow.Name())
		if ib == nil || fp.Status.Isolated != 1 {
			return fmt.Errorf("status = %+v", fp.Status)
		}
		if ib.Reason != routingv1alpha1.IsolationSlowSend && ib.Reason != routingv1alpha1.IsolationProbeFailed {
			return fmt.Errorf("reason = %s", ib.Reason)
		}
		// A probe that failed since then reports its own latency; the send's verdict reports the send's.
		if ib.Pod != c.pods[1].Name || (ib.Reason == routingv1alpha1.IsolationSlowSend && ib.LatencyMillis < 300) {
			return fmt.Errorf("entry = %+v", ib)
		}
		return nil
	})
	// The first status write is the SlowSend verdict with an end in the future.
	fp := getPolicy(t, ns, "slow")
	if ib := isolatedIn(fp, slow.Name()); ib.Reason == routingv1alpha1.IsolationSlowSend &&
		(ib.Until == nil || !ib.Until.After(time.Now().Add(-time.Second))) {
		t.Errorf("until = %v, want in the future", ib.Until)
	}
	if fp.Status.Brokers != 3 {
		t.Errorf("status.brokers = %d, want 3", fp.Status.Brokers)
	}

	eventually(t, "the Topic shows the isolated broker and fewer available queues", func() error {
		var got routingv1alpha1.Topic
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
			return err
		}
		st := got.Status
		if st.WritableQueues != 6 || st.AvailableQueues != 4 || len(st.Brokers) != 3 || !st.Brokers[1].Isolated ||
			st.Brokers[0].Isolated || st.Brokers[1].Address != slow.Addr() {
			return fmt.Errorf("status = %+v", st)
		}
		return nil
	})

	out, err := kubectl(t, "", "get", "faultpolicies", "-n", ns, "--no-headers")
	if err != nil {
		t.Fatalf("kubectl get faultpolicies: %v\n%s", err, out)
	}
	if f := strings.Fields(out); len(f) < 5 || f[0] != "slow" || f[2] != "3" || f[3] != "1" || f[4] != "True" {
		t.Errorf("kubectl get faultpolicies = %q, want slow <behavior> 3 1 True", out)
	}
	out, err = kubectl(t, "", "get", "topics.routing.detour.dev", "-n", ns, "--no-headers")
	if err != nil {
		t.Fatalf("kubectl get topics: %v\n%s", err, out)
	}
	if f := strings.Fields(out); len(f) < 5 || f[1] != topic.Spec.TopicName || f[2] != "3" || f[3] != "4" || f[4] != "True" {
		t.Errorf("kubectl get topics = %q, want orders %s 3 4 True", out, topic.Spec.TopicName)
	}
	eventually(t, "an Event reports the isolation", func() error {
		return findEvent(ns, "slow", EventBrokerIsolated, slow.Name())
	})

	for i := 0; i < 20; i++ {
		res, err := send(rt, topic)
		if err != nil {
			t.Fatalf("send while isolated: %v", err)
		}
		if res.Broker == scope.Pods(ns).Broker(slow.Name()).String() {
			t.Fatalf("send %d reached the isolated broker", i)
		}
	}

	slow.SetFault(brokersim.Fault{})
	eventually(t, "the healed broker leaves status", func() error {
		fp := getPolicy(t, ns, "slow")
		if fp.Status.Isolated != 0 || len(fp.Status.IsolatedBrokers) != 0 {
			return fmt.Errorf("status = %+v", fp.Status)
		}
		return nil
	})
	eventually(t, "an Event reports the recovery", func() error {
		return findEvent(ns, "slow", EventBrokerRecovered, slow.Name())
	})
	sendUntilBroker(t, rt, topic, slow.Name())
}

// TestPodNotReadyAndTerminatingAreSkippedWithoutFailedSends proves pod awareness: a broker whose
// pod is NotReady or terminating gets no send, no send fails on the way, and status says why.
func TestPodNotReadyAndTerminatingAreSkippedWithoutFailedSends(t *testing.T) {
	needsEnvtest(t)
	ns, rt, c, topic := routedCluster(t, "pods", routingv1alpha1.FaultPolicySpec{})

	markedAt := time.Now()
	setPodReady(t, c.pods[0], false)
	eventually(t, "the runtime stops selecting the NotReady broker", func() error {
		if podOK(rt, topic, c.brokers[0].Name()) {
			return errors.New("still selectable")
		}
		return nil
	})
	t.Logf("pod NotReady -> out of selection in %v", time.Since(markedAt).Round(time.Millisecond))
	eventually(t, "status lists the NotReady pod", func() error {
		ib := isolatedIn(getPolicy(t, ns, "pods"), c.brokers[0].Name())
		if ib == nil || ib.Reason != routingv1alpha1.IsolationPodNotReady || ib.Pod != c.pods[0].Name {
			return fmt.Errorf("entry = %+v", ib)
		}
		return nil
	})
	before := c.brokers[0].Stats().SendsReceived
	expectSendsAvoid(t, rt, topic, c.brokers[0].Name())
	if got := c.brokers[0].Stats().SendsReceived; got != before {
		t.Errorf("the NotReady broker received %d sends", got-before)
	}

	ctx := context.Background()
	pod := c.pods[1]
	updateObject(t, pod, func() { pod.Finalizers = append(pod.Finalizers, "routing.detour.dev/test-hold") })
	if err := k8sClient.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status lists the terminating pod", func() error {
		ib := isolatedIn(getPolicy(t, ns, "pods"), c.brokers[1].Name())
		if ib == nil || ib.Reason != routingv1alpha1.IsolationPodTerminating {
			return fmt.Errorf("entry = %+v", ib)
		}
		return nil
	})
	expectSendsAvoid(t, rt, topic, c.brokers[0].Name(), c.brokers[1].Name())

	// The pod comes back Ready: the broker is selectable again.
	setPodReady(t, c.pods[0], true)
	eventually(t, "the Ready pod leaves status", func() error {
		if ib := isolatedIn(getPolicy(t, ns, "pods"), c.brokers[0].Name()); ib != nil {
			return fmt.Errorf("still listed: %+v", ib)
		}
		return nil
	})
	sendUntilBroker(t, rt, topic, c.brokers[0].Name())
}

// expectSendsAvoid sends a round of messages and fails if any reached an avoided broker or needed
// more than one attempt.
func expectSendsAvoid(t *testing.T, rt *producer.Runtime, topic *routingv1alpha1.Topic, avoid ...string) {
	t.Helper()
	for i := 0; i < 12; i++ {
		res, err := send(rt, topic)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Attempts != 1 {
			t.Errorf("send %d took %d attempts (%v)", i, res.Attempts, res.BrokersTried)
		}
		for _, b := range avoid {
			if res.Broker == scope.Pods(topic.Namespace).Broker(b).String() {
				t.Fatalf("send %d reached %s", i, b)
			}
		}
	}
}

// TestChangedPolicyTakesEffectForTheNextSend proves a FaultPolicy edit reaches the runtime
// without a restart: a latency the old table tolerated isolates under the new one.
func TestChangedPolicyTakesEffectForTheNextSend(t *testing.T) {
	needsEnvtest(t)
	ns, rt, c, topic := routedCluster(t, "tunable", routingv1alpha1.FaultPolicySpec{
		Rules: []routingv1alpha1.FaultRule{{LatencyMillis: 100, IsolationMillis: 0}, {LatencyMillis: 2000, IsolationMillis: 5000}},
		Probe: routingv1alpha1.ProbePolicy{Enabled: ptr.To(false)},
		// The table alone judges the slow answers here.
		Retry:            routingv1alpha1.RetryPolicy{AdaptivePerAttempt: ptr.To(false)},
		StallAfterMillis: ptr.To(int32(0)),
	})
	key := scope.PolicyKey(ns, "tunable")

	slow := c.brokers[2]
	slow.SetFault(brokersim.Fault{Delay: 250 * time.Millisecond})
	sendUntilBroker(t, rt, topic, slow.Name())
	if iso := rt.Isolated(key); len(iso) != 0 {
		t.Fatalf("250 ms isolated under the 2000 ms table: %+v", iso)
	}

	fp := getPolicy(t, ns, "tunable")
	changedAt := time.Now()
	updateObject(t, fp, func() { fp.Spec.Rules[1].LatencyMillis = 200 })
	eventually(t, "the new table is in force", func() error {
		p, ok := rt.Policy(key)
		if !ok || p.Table.IsolationFor(250*time.Millisecond) != 5*time.Second {
			return errors.New("old table")
		}
		return nil
	})
	t.Logf("FaultPolicy change -> in force in %v", time.Since(changedAt).Round(time.Millisecond))
	sendUntilBroker(t, rt, topic, slow.Name())
	if iso := rt.Isolated(key); len(iso) != 1 || iso[0].Broker != scope.Pods(ns).Broker(slow.Name()).String() {
		t.Fatalf("isolated = %+v, want %s", iso, slow.Name())
	}
	eventually(t, "status follows", func() error {
		fp := getPolicy(t, ns, "tunable")
		if isolatedIn(fp, slow.Name()) == nil || fp.Status.ObservedGeneration != fp.Generation {
			return fmt.Errorf("status = %+v", fp.Status)
		}
		return nil
	})
}

// TestRestartedManagerHonoursIsolationsFromStatus proves nothing learnt is lost across a
// restart: an isolation written to status is in force in a new runtime before its first send,
// even though the broker has healed meanwhile.
func TestRestartedManagerHonoursIsolationsFromStatus(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	c := startCluster(t, ns, 3)
	spec := slowPolicy()
	spec.Rules[1].IsolationMillis = 60000
	spec.Probe.Enabled = ptr.To(false)
	createPolicy(t, ns, "sticky", spec)
	topic := c.createTopic(t, "orders", "sticky")
	slow := c.brokers[0]

	func() {
		first, stop := startStoppableManager(t)
		defer stop()
		routedTo(t, first, topic, 3)
		slow.SetFault(brokersim.Fault{Delay: 400 * time.Millisecond})
		sendUntilBroker(t, first, topic, slow.Name())
		eventually(t, "the isolation is written to status", func() error {
			if ib := isolatedIn(getPolicy(t, ns, "sticky"), slow.Name()); ib == nil || ib.Until == nil {
				return errors.New("not yet")
			}
			return nil
		})
	}()
	slow.SetFault(brokersim.Fault{})

	second := startManager(t)
	if iso := second.Isolated(scope.PolicyKey(ns, "sticky")); len(iso) != 1 || iso[0].Broker != scope.Pods(ns).Broker(slow.Name()).String() {
		t.Fatalf("the new runtime starts with isolations %+v, want %s", iso, slow.Name())
	}
	routedTo(t, second, topic, 3)
	before := slow.Stats().SendsReceived
	expectSendsAvoid(t, second, topic, slow.Name())
	if got := slow.Stats().SendsReceived; got != before {
		t.Errorf("the restored isolated broker received %d sends", got-before)
	}
}

// TestMissingPolicyAndDeletionsReachTheRuntime proves a Topic whose FaultPolicy does not exist is
// Ready=False with a clear reason yet routes with RocketMQ's defaults, and that deleting either
// resource removes it from the runtime.
func TestMissingPolicyAndDeletionsReachTheRuntime(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	rt := startManager(t)
	c := startCluster(t, ns, 2)
	topic := c.createTopic(t, "orders", "absent")
	eventually(t, "Ready=False FaultPolicyNotFound", func() error {
		var got routingv1alpha1.Topic
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
			return err
		}
		cond := apimeta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != routingv1alpha1.ReasonFaultPolicyNotFound ||
			!strings.Contains(cond.Message, `"absent"`) {
			return fmt.Errorf("condition = %+v", cond)
		}
		return nil
	})
	routedTo(t, rt, topic, 2)
	if info, _ := rt.RouteInfo(routeOf(topic)); info.Policy != "" {
		t.Errorf("route policy = %q, want the default", info.Policy)
	}
	if _, err := send(rt, topic); err != nil {
		t.Fatalf("send with the default policy: %v", err)
	}

	fp := createPolicy(t, ns, "absent", routingv1alpha1.FaultPolicySpec{})
	topicReady(t, topic, 2)
	eventually(t, "the route uses the new policy", func() error {
		if info, _ := rt.RouteInfo(routeOf(topic)); info.Policy != scope.PolicyKey(ns, "absent") {
			return fmt.Errorf("policy = %q", info.Policy)
		}
		return nil
	})

	ctx := context.Background()
	if err := k8sClient.Delete(ctx, topic); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the route leaves the runtime", func() error {
		if _, ok := rt.RouteInfo(routeOf(topic)); ok {
			return errors.New("still routed")
		}
		return nil
	})
	if _, err := send(rt, topic); !errors.Is(err, producer.ErrNoRoute) {
		t.Errorf("send after delete: %v, want ErrNoRoute", err)
	}
	if err := k8sClient.Delete(ctx, fp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy leaves the runtime", func() error {
		if _, ok := rt.Policy(scope.PolicyKey(ns, "absent")); ok {
			return errors.New("still known")
		}
		return nil
	})
}

// TestDeletingAPolicyInUseWaitsForItsTopicsAndKeepsWhatItLearnt proves the policy protection: a
// FaultPolicy that no Topic uses is deleted at once; one in use stays, in force with its
// isolations, with InUse and an Event naming its Topics, until the last Topic is gone.
func TestDeletingAPolicyInUseWaitsForItsTopicsAndKeepsWhatItLearnt(t *testing.T) {
	needsEnvtest(t)
	// No probes, and 60 s for a slow send: the isolation outlasts the test.
	ns, rt, c, topic := routedCluster(t, "held", routingv1alpha1.FaultPolicySpec{
		Rules:            []routingv1alpha1.FaultRule{{LatencyMillis: 100, IsolationMillis: 0}, {LatencyMillis: 300, IsolationMillis: 60000}},
		Retry:            routingv1alpha1.RetryPolicy{Attempts: 3, SendTimeoutMillis: 5000, AdaptivePerAttempt: ptr.To(false)},
		Probe:            routingv1alpha1.ProbePolicy{Enabled: ptr.To(false), IntervalMillis: 1000, TimeoutMillis: 100},
		StallAfterMillis: ptr.To(int32(0)),
	})
	ctx := context.Background()
	key := scope.PolicyKey(ns, "held")
	slow := c.brokers[1]
	slow.SetFault(brokersim.Fault{Delay: 400 * time.Millisecond})
	sendUntilBroker(t, rt, topic, slow.Name())
	slow.SetFault(brokersim.Fault{})
	eventually(t, "the policy is protected and used by orders", func() error {
		fp := getPolicy(t, ns, "held")
		cond := apimeta.FindStatusCondition(fp.Status.Conditions, routingv1alpha1.ConditionInUse)
		if !slices.Contains(fp.Finalizers, routingv1alpha1.FaultPolicyProtection) || cond == nil ||
			cond.Status != metav1.ConditionTrue || cond.Message != "Used by Topics: orders" {
			return fmt.Errorf("finalizers %v, InUse %+v", fp.Finalizers, cond)
		}
		if isolatedIn(fp, slow.Name()) == nil {
			return fmt.Errorf("status = %+v", fp.Status)
		}
		return nil
	})

	spare := createPolicy(t, ns, "spare", routingv1alpha1.FaultPolicySpec{})
	eventually(t, "the unused policy is protected and not in use", func() error {
		fp := getPolicy(t, ns, "spare")
		cond := apimeta.FindStatusCondition(fp.Status.Conditions, routingv1alpha1.ConditionInUse)
		if !slices.Contains(fp.Finalizers, routingv1alpha1.FaultPolicyProtection) || cond == nil ||
			cond.Status != metav1.ConditionFalse || cond.Reason != routingv1alpha1.ReasonNotReferenced {
			return fmt.Errorf("finalizers %v, InUse %+v", fp.Finalizers, cond)
		}
		return nil
	})
	if err := k8sClient.Delete(ctx, spare); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unused policy is gone", func() error { return gone(spare) })

	held := getPolicy(t, ns, "held")
	if err := k8sClient.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deletion waits for orders", func() error {
		fp := getPolicy(t, ns, "held")
		cond := apimeta.FindStatusCondition(fp.Status.Conditions, routingv1alpha1.ConditionInUse)
		if fp.DeletionTimestamp.IsZero() || cond == nil || cond.Status != metav1.ConditionTrue ||
			cond.Message != "Deletion waits for what uses this policy (Topics: orders)" {
			return fmt.Errorf("deletion %v, InUse %+v", fp.DeletionTimestamp, cond)
		}
		return findEvent(ns, "held", EventDeletionWaits, "orders")
	})
	if iso := rt.Isolated(key); len(iso) != 1 || iso[0].Broker != scope.Pods(ns).Broker(slow.Name()).String() {
		t.Fatalf("isolations while the deletion waits: %+v, want %s kept", iso, slow.Name())
	}
	if info, _ := rt.RouteInfo(routeOf(topic)); info.Policy != key {
		t.Fatalf("the route's policy while the deletion waits: %q, want %q", info.Policy, key)
	}
	expectSendsAvoid(t, rt, topic, slow.Name())

	if err := k8sClient.Delete(ctx, topic); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy is gone once orders is", func() error { return gone(held) })
	eventually(t, "the policy leaves the runtime", func() error {
		if _, ok := rt.Policy(key); ok {
			return errors.New("still known")
		}
		return nil
	})
}

// gone reports nil once obj no longer exists.
func gone(obj client.Object) error {
	err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%s still exists (finalizers %v)", obj.GetName(), obj.GetFinalizers())
}

// TestTopicIsCreatedOnEveryMaster proves the Topic controller sends UPDATE_AND_CREATE_TOPIC with
// the spec's queue numbers to each broker.
func TestTopicIsCreatedOnEveryMaster(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	startManager(t)
	c := startCluster(t, ns, 2)
	topic := c.createTopic(t, "orders", "")
	topicReady(t, topic, 2)
	for _, b := range c.brokers {
		eventually(t, "topic created on "+b.Name(), func() error {
			for _, tc := range b.Topics() {
				if tc.Name == topic.Spec.TopicName {
					if tc.WriteQueues != 2 || tc.ReadQueues != 4 {
						return fmt.Errorf("config = %+v", tc)
					}
					return nil
				}
			}
			return errors.New("not created")
		})
	}
}

// TestStatusWritesAreCoalescedUnderAnEventStorm proves at most one status write per policy per
// second while the runtime reports a thousand isolation changes a second.
func TestStatusWritesAreCoalescedUnderAnEventStorm(t *testing.T) {
	needsEnvtest(t)
	ns, rt, c, _ := routedCluster(t, "storm", routingv1alpha1.FaultPolicySpec{})
	eventually(t, "policy status settled", func() error {
		if fp := getPolicy(t, ns, "storm"); fp.Status.Brokers != 3 {
			return fmt.Errorf("status = %+v", fp.Status)
		}
		return nil
	})

	// The storm: one broker's pod flips between Ready and NotReady every millisecond, as the
	// broker-pod controller would push it; each flip is an isolation change.
	const stormFor = 3 * time.Second
	flipper := c.brokers[2]
	// writes counts the status writes the watch delivers; sawFinal is set once one of them holds
	// the state the storm ends on, so the count is read only after the watch has caught up.
	var writes atomic.Int64
	var sawFinal atomic.Bool
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	w, err := k8sWatchClient.Watch(watchCtx, &routingv1alpha1.FaultPolicyList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != "MODIFIED" {
				continue
			}
			writes.Add(1)
			if fp, ok := ev.Object.(*routingv1alpha1.FaultPolicy); ok {
				if ib := isolatedIn(fp, flipper.Name()); ib != nil && ib.Reason == routingv1alpha1.IsolationPodNotReady {
					sawFinal.Store(true)
				}
			}
		}
	}()

	flips := 0
	start := time.Now()
	for elapsed := time.Duration(0); elapsed < stormFor; elapsed = time.Since(start) {
		// Keep pace with a thousand flips per second of elapsed time, however slow the machine.
		for flips <= int(elapsed/time.Millisecond)+10 {
			rt.SetBroker(producer.Broker{Name: flipper.Name(), Addr: flipper.Addr(), Ready: flips%2 == 1})
			flips++
		}
		time.Sleep(500 * time.Microsecond)
	}
	elapsed := time.Since(start)
	// End on a state the cluster agrees with: the pod really goes NotReady, so the broker-pod
	// controller pushes the same verdict the storm ended near.
	setPodReady(t, c.pods[2], false)
	eventually(t, "status shows the final state", func() error {
		if ib := isolatedIn(getPolicy(t, ns, "storm"), flipper.Name()); ib == nil || ib.Reason != routingv1alpha1.IsolationPodNotReady {
			return fmt.Errorf("entry = %+v", ib)
		}
		return nil
	})
	eventually(t, "the watch to deliver the write of the final state", func() error {
		if !sawFinal.Load() {
			return fmt.Errorf("%d writes delivered, none with the final state yet", writes.Load())
		}
		return nil
	})
	stopWatch()
	limit := int64(elapsed/time.Second) + 2 // one per started second, plus the final state
	t.Logf("%d isolation changes in %v (%.0f/s) led to %d status writes", flips, elapsed.Round(time.Millisecond),
		float64(flips)/elapsed.Seconds(), writes.Load())
	if writes.Load() > limit {
		t.Errorf("%d status writes in %v, want at most %d", writes.Load(), elapsed, limit)
	}
	if writes.Load() == 0 {
		t.Error("no status write at all")
	}
}

// findEvent looks for an events.k8s.io Event with reason about broker regarding a FaultPolicy.
func findEvent(ns, policy, reason, broker string) error {
	var list eventsv1.EventList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.Reason == reason && ev.Regarding.Name == policy && ev.Regarding.Kind == "FaultPolicy" &&
			strings.Contains(ev.Note, broker) {
			return nil
		}
	}
	return fmt.Errorf("no %s Event for %s among %d", reason, broker, len(list.Items))
}

// TestBrokerRefusingTheTopicIsReportedAndRetried proves a broker that refuses
// UPDATE_AND_CREATE_TOPIC turns the Topic Ready=False with an Event, and the controller retries
// until the broker accepts.
func TestBrokerRefusingTheTopicIsReportedAndRetried(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	startManager(t)
	c := startCluster(t, ns, 2)
	refusing := c.brokers[1]
	refusing.SetFault(brokersim.Fault{Code: 1}) // SYSTEM_ERROR to every request
	topic := c.createTopic(t, "orders", "")
	eventually(t, "Ready=False TopicCreateFailed", func() error {
		var got routingv1alpha1.Topic
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
			return err
		}
		cond := apimeta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady)
		if cond == nil || cond.Reason != routingv1alpha1.ReasonTopicCreateFailed || !strings.Contains(cond.Message, refusing.Name()) {
			return fmt.Errorf("condition = %+v", cond)
		}
		return nil
	})
	eventually(t, "a Warning Event names the broker", func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == routingv1alpha1.ReasonTopicCreateFailed && ev.Regarding.Name == topic.Name &&
				ev.Type == "Warning" && strings.Contains(ev.Note, refusing.Name()) {
				return nil
			}
		}
		return errors.New("no TopicCreateFailed Event")
	})
	refusing.SetFault(brokersim.Fault{})
	topicReady(t, topic, 2)
	for _, tc := range refusing.Topics() {
		if tc.Name == topic.Spec.TopicName {
			return
		}
	}
	t.Errorf("the healed broker never got the topic")
}

// podOK reports the runtime's pod verdict for broker in topic's route.
func podOK(rt *producer.Runtime, topic *routingv1alpha1.Topic, broker string) bool {
	info, _ := rt.RouteInfo(routeOf(topic))
	for _, b := range info.Brokers {
		if b.Name == broker {
			return b.PodOK
		}
	}
	return false
}
