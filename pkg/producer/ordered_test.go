package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// groupQueue is the broker and queue id a group's messages must go to on c's route.
func (c *simCluster) groupQueue(group string) (string, int) {
	names := slices.Sorted(slices.Values(c.names))
	i := groupQueueIndex(group, len(names)*c.queues)
	return names[i/c.queues], i % c.queues
}

func TestOrderedSendsOfAGroupGoToItsQueueInOrder(t *testing.T) {
	c := startCluster(t, 4, []string{"broker-c", "broker-a", "broker-b"})
	groups := []string{"order-1", "order-2", "customer-émile", "😀", "g", "a much longer message group name"}
	for seq := range 5 {
		for _, g := range groups {
			m := &Message{Topic: testTopic, Body: []byte(fmt.Sprintf("%s/%d", g, seq))}
			res, err := c.r.SendOrdered(context.Background(), m, g)
			if err != nil {
				t.Fatal(err)
			}
			if broker, q := c.groupQueue(g); res.Broker != broker || res.QueueID != q {
				t.Fatalf("group %q sent to %s/%d, its queue is %s/%d", g, res.Broker, res.QueueID, broker, q)
			}
		}
	}
	for _, g := range groups {
		broker, q := c.groupQueue(g)
		var seq int
		for _, m := range c.brokers[broker].Messages(testTopic, q) {
			if m.Properties[remoting.PropertyShardingKey] != g {
				continue
			}
			if want := fmt.Sprintf("%s/%d", g, seq); string(m.Body) != want {
				t.Fatalf("group %q: message %d on its queue is %q, want %q", g, seq, m.Body, want)
			}
			seq++
		}
		if seq != 5 {
			t.Fatalf("group %q: %d of 5 messages on its queue %s/%d", g, seq, broker, q)
		}
	}
	if c.stored() != 5*len(groups) {
		t.Fatalf("%d messages stored, sent %d", c.stored(), 5*len(groups))
	}
}

func TestOrderedSendIsNeverMovedToAnotherBroker(t *testing.T) {
	for _, tc := range []struct {
		preset   Preset
		attempts int
	}{{PresetRocketMQ5, 1}, {PresetRocketMQ4, 1}, {PresetDetour, 3}} {
		t.Run(string(tc.preset), func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withPolicy(func(p *Policy) {
				pp, err := PresetPolicy(p.Name, tc.preset)
				if err != nil {
					t.Fatal(err)
				}
				pp.Retry.PerAttemptTimeout = 0
				*p = pp
			}))
			const group = "order-42"
			broker, q := c.groupQueue(group)
			c.brokers[broker].SetFault(brokersim.Fault{Refuse: true})
			for range 3 {
				_, err := c.r.SendOrdered(context.Background(), &Message{Topic: testTopic, Body: []byte("x")}, group)
				var oe *OrderedSendError
				var se *SendError
				if !errors.As(err, &oe) || !errors.As(err, &se) || !errors.Is(err, remoting.ErrConnect) {
					t.Fatalf("send to a refusing broker: %v", err)
				}
				if oe.Broker != broker || oe.QueueID != q || len(se.BrokersTried) != tc.attempts ||
					slices.ContainsFunc(se.BrokersTried, func(b string) bool { return b != broker }) {
					t.Fatalf("error names %s/%d after attempts on %v; want %d attempts on %s/%d", oe.Broker, oe.QueueID, se.BrokersTried, tc.attempts, broker, q)
				}
				if !strings.Contains(err.Error(), `message group "order-42" is bound to queue`) {
					t.Fatalf("error text %q", err.Error())
				}
			}
			if c.stored() != 0 {
				t.Fatalf("%d messages stored elsewhere", c.stored())
			}
			// The broker, isolated by now, takes the group's next message once it answers again.
			c.brokers[broker].SetFault(brokersim.Fault{})
			res, err := c.r.SendOrdered(context.Background(), &Message{Topic: testTopic, Body: []byte("y")}, group)
			if err != nil || res.Broker != broker || res.QueueID != q {
				t.Fatalf("after recovery: %+v, %v; want %s/%d", res, err, broker, q)
			}
		})
	}
}

func TestOrderedSendRefusesGroupsItCannotHash(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"})
	for name, group := range map[string]string{
		"empty": "", "blank": " \t", "separator": "a\x01b", "not UTF-8": "a\xffb", "too long": strings.Repeat("g", 65),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.r.SendOrdered(context.Background(), &Message{Topic: testTopic, Body: []byte("x")}, group)
			if !errors.Is(err, ErrBadMessageGroup) {
				t.Fatalf("group %q: %v", group, err)
			}
		})
	}
	if got := c.brokers["broker-a"].Stats().SendsReceived; got != 0 {
		t.Fatalf("the broker received %d sends", got)
	}
}
