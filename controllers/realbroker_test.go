package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// realTimeout bounds waits on state that real brokers and their name server produce: a JVM on a
// busy 2-core machine, shared with other brokers, answers in seconds rather than milliseconds.
const realTimeout = 90 * time.Second

// TestTopicCreatesTopicOnRealBrokers proves the Topic controller's UPDATE_AND_CREATE_TOPIC creates
// the topic, with the declared queue numbers and permission, on every real broker of both release
// lines, and that a message sent through the runtime once the Topic is Ready is stored there. The
// brokers have auto-create off, so only the controller can have created the topic.
func TestTopicCreatesTopicOnRealBrokers(t *testing.T) {
	needsEnvtest(t)
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			ns := newNamespace(t)
			// Broker names carry the namespace, as startCluster's do: envtest has no namespace
			// controller, so pods of earlier tests outlive their namespace and still name brokers.
			c := rmqtest.Start(t, line,
				rmqtest.BrokerConfig{Name: ns + "-broker-a", NoAutoCreate: true},
				rmqtest.BrokerConfig{Name: ns + "-broker-b", NoAutoCreate: true})
			rt := startManager(t)
			app := "rocketmq-" + ns
			for _, b := range c.Brokers() {
				createBrokerPod(t, ns, app, b.Name, b.Addr)
			}

			// Non-default shapes: read and write queue numbers differ, and the second topic is
			// read-only, so a route can only match if the broker applied what the controller sent.
			orders := createShapedTopic(t, ns, app, "orders", 6, 8, 6)
			archive := createShapedTopic(t, ns, app, "archive", 6, 8, 4)
			for _, topic := range []*routingv1alpha1.Topic{orders, archive} {
				topicReady(t, topic, 2)
				expectStatusBrokers(t, topic, c.Brokers())
				expectNameServerRoute(t, c, topic)
			}

			// The runtime routes orders over both brokers' six write queues; every message it
			// reports stored is on the broker it names.
			routedTo(t, rt, orders, 2)
			sent := map[string]int64{}
			for i := 0; i < 12; i++ {
				res, err := send(rt, orders)
				if err != nil {
					t.Fatalf("send %d to %s: %v", i, orders.Spec.TopicName, err)
				}
				if res.QueueID < 0 || res.QueueID >= 6 {
					t.Errorf("send %d went to queue %d of %s, beyond the 6 write queues", i, res.QueueID, res.Broker)
				}
				name, _ := front.TopicScope(orders).Local(res.Broker)
				sent[name]++
			}
			t.Logf("sends per broker: %v", sent)
			eventuallyWithin(t, realTimeout, "the brokers store what the runtime sent", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stored, err := c.Stored(ctx, orders.Spec.TopicName)
				if err != nil {
					return err
				}
				if !maps.Equal(stored, sent) {
					return fmt.Errorf("stored %v, sent %v", stored, sent)
				}
				return nil
			})

			// A read-only topic has no write queue in the runtime: the send is refused before it
			// reaches a broker.
			if _, err := send(rt, archive); !errors.Is(err, producer.ErrNoRoute) {
				t.Errorf("send to read-only %s: %v, want ErrNoRoute", archive.Spec.TopicName, err)
			}
		})
	}
}

// createShapedTopic creates a Topic selecting the pods labelled app with the given queue numbers
// and permission.
func createShapedTopic(t *testing.T, ns, app, name string, write, read, perm int32) *routingv1alpha1.Topic {
	t.Helper()
	topic := &routingv1alpha1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: routingv1alpha1.TopicSpec{
			TopicName:      "T_" + ns + "_" + name,
			BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			WriteQueueNums: write,
			ReadQueueNums:  read,
			Perm:           perm,
		},
	}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatalf("creating topic: %v", err)
	}
	return topic
}

// expectStatusBrokers checks the Topic's status lists each broker at its address, ready, with the
// spec's write queues (none when the topic is not writable).
func expectStatusBrokers(t *testing.T, topic *routingv1alpha1.Topic, brokers []*rmqtest.Broker) {
	t.Helper()
	var got routingv1alpha1.Topic
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
		t.Fatal(err)
	}
	want := topic.Spec.WriteQueueNums
	if !writable(topic.Spec.Perm) {
		want = 0
	}
	st := got.Status
	if st.BrokerCount != int32(len(brokers)) || st.WritableQueues != want*int32(len(brokers)) || len(st.Brokers) != len(brokers) {
		t.Fatalf("%s status = %+v", topic.Name, st)
	}
	for i, b := range brokers {
		sb := st.Brokers[i]
		if sb.Name != b.Name || sb.Address != b.Addr || !sb.Ready || sb.WriteQueues != want {
			t.Errorf("%s status broker %d = %+v, want %s at %s, ready, %d write queues", topic.Name, i, sb, b.Name, b.Addr, want)
		}
	}
}

// expectNameServerRoute waits until the real name server's route for the topic lists every broker
// with exactly the spec's queue numbers and permission. A broker registers a topic with the name
// server when it creates it, so this is what every RocketMQ client would be told.
func expectNameServerRoute(t *testing.T, c *rmqtest.Cluster, topic *routingv1alpha1.Topic) {
	t.Helper()
	spec := topic.Spec
	eventuallyWithin(t, realTimeout, "the name server routes "+spec.TopicName+" as declared", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt, err := c.Route(ctx, spec.TopicName)
		if err != nil {
			return err
		}
		if len(rt.QueueDatas) != len(c.Brokers()) {
			return fmt.Errorf("queue data %+v, want one per broker", rt.QueueDatas)
		}
		for _, b := range c.Brokers() {
			found := false
			for _, q := range rt.QueueDatas {
				if q.BrokerName != b.Name {
					continue
				}
				found = true
				if q.ReadQueueNums != spec.ReadQueueNums || q.WriteQueueNums != spec.WriteQueueNums || q.Perm != spec.Perm {
					return fmt.Errorf("%s: read %d write %d perm %d, want read %d write %d perm %d", b.Name,
						q.ReadQueueNums, q.WriteQueueNums, q.Perm, spec.ReadQueueNums, spec.WriteQueueNums, spec.Perm)
				}
			}
			if !found {
				return fmt.Errorf("no queue data for %s in %+v", b.Name, rt.QueueDatas)
			}
		}
		return nil
	})
}
