package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// getCluster reads a Cluster.
func getCluster(t *testing.T, ns, name string) *routingv1alpha1.Cluster {
	t.Helper()
	var cl routingv1alpha1.Cluster
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cl); err != nil {
		t.Fatal(err)
	}
	return &cl
}

// routeBrokerNames lists the brokers the runtime routes a Topic to, by RocketMQ name, with their
// addresses.
func routeBrokerNames(rt *producer.Runtime, topic *routingv1alpha1.Topic) []string {
	info, _ := rt.RouteInfo(routeOf(topic))
	var out []string
	for _, b := range info.Brokers {
		name, _ := front.TopicScope(topic).Local(b.Name)
		out = append(out, name+"@"+b.Addr)
	}
	return out
}

// expectRoute waits until the runtime routes topic to exactly the given brokers, at the addresses
// the real brokers registered, and then checks that sends reach only them.
func expectRoute(t *testing.T, rt *producer.Runtime, topic *routingv1alpha1.Topic, brokers ...*rmqtest.Broker) {
	t.Helper()
	var want []string
	for _, b := range brokers {
		want = append(want, b.Name+"@"+b.Addr)
	}
	eventuallyWithin(t, realTimeout, fmt.Sprintf("route of %s is %v", topic.Name, want), func() error {
		if got := routeBrokerNames(rt, topic); !slices.Equal(got, want) {
			return fmt.Errorf("route %v", got)
		}
		return nil
	})
	for i := 0; i < 8; i++ {
		res, err := send(rt, topic)
		if err != nil {
			t.Fatalf("send to %s: %v", topic.Name, err)
		}
		if !slices.ContainsFunc(brokers, func(b *rmqtest.Broker) bool { return front.TopicScope(topic).Broker(b.Name).String() == res.Broker }) {
			t.Fatalf("send to %s stored on %s, outside the route %v", topic.Name, res.Broker, want)
		}
	}
}

// TestClusterTopicsRouteAsTheRealNameServerPublishes runs a Cluster and Topics on it against real
// RocketMQ name servers and brokers of both lines: the Cluster's status lists the brokers with
// their writability and pods, a Topic with create gets the declared queues on every broker, the
// runtime routes to exactly the writable masters the name server publishes, and drains
// (wipeWritePerm, brokerPermission=4) and a killed master leave the route within a refresh.
func TestClusterTopicsRouteAsTheRealNameServerPublishes(t *testing.T) {
	needsEnvtest(t)
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			ns := newNamespace(t)
			c := rmqtest.Start(t, line,
				rmqtest.BrokerConfig{Name: ns + "-broker-a", NoAutoCreate: true},
				rmqtest.BrokerConfig{Name: ns + "-broker-b", NoAutoCreate: true})
			a, b := c.Brokers()[0], c.Brokers()[1]
			rt := startManager(t)
			ctx := context.Background()
			app := "rocketmq-" + ns
			// Only broker-b has a pod here: pods add health, the route comes from the name server.
			pod := createBrokerPod(t, ns, app, b.Name, b.Addr)

			cl := &routingv1alpha1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
				Spec: routingv1alpha1.ClusterSpec{NameServers: []string{c.NameServer()}, RouteRefreshSeconds: 1,
					BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			}
			if err := k8sClient.Create(ctx, cl); err != nil {
				t.Fatal(err)
			}
			clusterShows := func(what string, wantWritable map[string]bool) {
				t.Helper()
				eventuallyWithin(t, realTimeout, "Cluster status "+what, func() error {
					st := getCluster(t, ns, "prod").Status
					if !meta.IsStatusConditionTrue(st.Conditions, routingv1alpha1.ConditionReady) {
						return fmt.Errorf("not Ready: %+v", st.Conditions)
					}
					got := map[string]bool{}
					for _, cb := range st.Brokers {
						got[cb.Name] = cb.Writable
						want := map[string]string{a.Name: a.Addr, b.Name: b.Addr}[cb.Name]
						if cb.MasterAddress != want {
							return fmt.Errorf("broker %+v, want master %s", cb, want)
						}
						if (cb.Name == b.Name) != (cb.Pod == pod.Name) {
							return fmt.Errorf("broker %+v: pod matched wrongly", cb)
						}
					}
					if len(got) != len(wantWritable) {
						return fmt.Errorf("brokers %v, want %v", got, wantWritable)
					}
					for n, w := range wantWritable {
						if got[n] != w {
							return fmt.Errorf("writable %v, want %v", got, wantWritable)
						}
					}
					return nil
				})
			}
			clusterShows("with both brokers writable", map[string]bool{a.Name: true, b.Name: true})
			out, err := kubectl(t, "", "get", "clusters.routing.detour.dev", "-n", ns)
			if err != nil {
				t.Fatalf("kubectl get clusters: %v\n%s", err, out)
			}
			if header := strings.Join(strings.Fields(firstLine(out)), " "); header != "NAME BROKERS WRITABLE POLICY HIDDEN UNDECLARED READY AGE" {
				t.Errorf("kubectl get clusters header = %q, want NAME BROKERS WRITABLE POLICY HIDDEN UNDECLARED READY AGE", header)
			}
			if !strings.HasPrefix(strings.Join(strings.Fields(strings.Split(out, "\n")[1]), " "), "prod 2 2 True") {
				t.Errorf("kubectl get clusters row:\n%s", out)
			}

			// A Topic on a topic nobody created: the name server does not publish it.
			missing := clusterTopic(t, ns, "missing", "T_"+ns+"_missing", false)
			eventuallyWithin(t, realTimeout, "missing topic not published", func() error {
				return readyReason(missing, routingv1alpha1.ReasonTopicNotPublished)
			})

			orders := clusterTopic(t, ns, "orders", "T_"+ns+"_orders", true)
			topicReady(t, orders, 2)
			eventuallyWithin(t, realTimeout, "orders status shows the published queues", func() error {
				var got routingv1alpha1.Topic
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(orders), &got); err != nil {
					return err
				}
				if !meta.IsStatusConditionTrue(got.Status.Conditions, routingv1alpha1.ConditionQueuesMatchSpec) {
					return fmt.Errorf("queues do not match: %+v", got.Status.Conditions)
				}
				for _, sb := range got.Status.Brokers {
					if sb.ReadQueues != 8 || sb.WriteQueues != 6 || sb.Perm&6 != 6 {
						return fmt.Errorf("broker %+v, want read 8 write 6 perm 6", sb)
					}
				}
				return nil
			})
			topic := orders
			expectRoute(t, rt, topic, a, b)

			// A drain on the name server (mqadmin wipeWritePerm) and back.
			if _, err := c.WipeWritePerm(ctx, a.Name); err != nil {
				t.Fatal(err)
			}
			expectRoute(t, rt, topic, b)
			clusterShows("with broker-a drained", map[string]bool{a.Name: false, b.Name: true})
			if _, err := c.AddWritePerm(ctx, a.Name); err != nil {
				t.Fatal(err)
			}
			expectRoute(t, rt, topic, a, b)

			// A read-only broker (brokerPermission=4) and back.
			if err := b.SetPermission(ctx, 4); err != nil {
				t.Fatal(err)
			}
			expectRoute(t, rt, topic, a)
			if err := b.SetPermission(ctx, 6); err != nil {
				t.Fatal(err)
			}
			expectRoute(t, rt, topic, a, b)

			// A NotReady pod keeps its broker out of selection; the route still lists it.
			setPodReady(t, pod, false)
			eventuallyWithin(t, realTimeout, "broker-b's pod health reaches the route", func() error {
				info, _ := rt.RouteInfo(routeOf(topic))
				for _, rb := range info.Brokers {
					if rb.Name == front.TopicScope(topic).Broker(b.Name).String() && !rb.PodOK {
						return nil
					}
				}
				return fmt.Errorf("route %+v", info.Brokers)
			})
			setPodReady(t, pod, true)

			// A killed master leaves the route once the name server drops it.
			a.Kill()
			expectRoute(t, rt, topic, b)
		})
	}
}

// clusterTopic creates a Topic on the Cluster "prod" (write 6, read 8, perm 6).
func clusterTopic(t *testing.T, ns, name, topicName string, create bool) *routingv1alpha1.Topic {
	t.Helper()
	topic := &routingv1alpha1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{TopicName: topicName, ClusterRef: &routingv1alpha1.ClusterReference{Name: "prod"},
			Create: ptr.To(create), WriteQueueNums: 6, ReadQueueNums: 8, Perm: 6},
	}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatalf("creating topic: %v", err)
	}
	return topic
}

// readyReason succeeds when the Topic's Ready condition is False with reason.
func readyReason(topic *routingv1alpha1.Topic, reason string) error {
	var got routingv1alpha1.Topic
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
		return err
	}
	c := meta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
		return fmt.Errorf("Ready = %+v, want False %s", c, reason)
	}
	return nil
}
