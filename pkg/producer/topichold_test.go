package producer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// topicHoldCluster is three brokersim brokers that create no topic on demand and answer
// GET_TOPIC_CONFIG as RocketMQ 5.x brokers do; "Held" is missing on broker-b, "Other" is on all
// three. Both routes are static (no name server) and share the test policy; the fault tables'
// clock is frozen, so no hold or isolation ends by its timer.
func topicHoldCluster(t *testing.T, preset Preset) (*Runtime, map[string]*brokersim.Broker) {
	t.Helper()
	r := New(Options{ExpiryInterval: 10 * time.Millisecond, Clock: fault.NewManualClock(time.Unix(1_700_000_000, 0))})
	t.Cleanup(func() { r.Close() })
	p := mustPresetPolicy(t, "test", preset)
	p.Probe.Interval = 100 * time.Millisecond
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	brokers := map[string]*brokersim.Broker{}
	held, other := Route{Topic: "Held", Policy: "test"}, Route{Topic: "Other", Policy: "test"}
	for _, n := range []string{"broker-a", "broker-b", "broker-c"} {
		b, err := brokersim.StartBrokerWith(n, "127.0.0.1:0", brokersim.Options{NoAutoCreate: true, TopicConfig: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		brokers[n] = b
		b.CreateTopic("Other", 2)
		if n != "broker-b" {
			b.CreateTopic("Held", 2)
		}
		r.SetBroker(Broker{Name: n, Addr: b.Addr(), Ready: true})
		held.Brokers = append(held.Brokers, BrokerQueues{Broker: n, WriteQueues: 2})
		other.Brokers = append(other.Brokers, BrokerQueues{Broker: n, WriteQueues: 2})
	}
	for _, rt := range []Route{held, other} {
		if err := r.SetRoute(rt); err != nil {
			t.Fatal(err)
		}
	}
	return r, brokers
}

// sendTopic sends n messages of topic one after another and returns how many attempts reached
// each broker; every send must succeed.
func sendTopic(t *testing.T, r *Runtime, topic string, n int) map[string]int {
	t.Helper()
	tried := map[string]int{}
	for i := range n {
		res, err := r.Send(context.Background(), &Message{Topic: topic, Body: []byte(fmt.Sprint(topic, i))})
		if err != nil {
			t.Fatalf("send %d of %s: %v", i, topic, err)
		}
		for _, b := range res.BrokersTried {
			tried[b]++
		}
	}
	return tried
}

// TestATopicNotExistHoldsTheBrokerOutForThatTopicAlone proves the Detour preset's hold for one
// topic on real sends: broker-b, which lacks topic Held and refuses it with TOPIC_NOT_EXIST, gets
// one attempt of Held's sends (the refusal, retried elsewhere) and no more, though probes find it
// answering, while Other's sends still reach it and it is never isolated; once the topic is
// created on it, a check of its topic configuration ends the hold and Held's sends reach it again.
// The canary is RocketMQ 5.x's rule, which the RocketMQ5 preset keeps: the refusal isolates
// broker-b for every topic.
func TestATopicNotExistHoldsTheBrokerOutForThatTopicAlone(t *testing.T) {
	cases := []struct {
		preset Preset
		// otherOnB is whether Other's sends reach broker-b after Held's refusal.
		otherOnB bool
	}{
		{preset: PresetDetour, otherOnB: true},
		{preset: PresetRocketMQ5},
	}
	for _, tc := range cases {
		t.Run(string(tc.preset), func(t *testing.T) {
			r, brokers := topicHoldCluster(t, tc.preset)
			for i := 0; sendTopic(t, r, "Held", 1)["broker-b"] == 0; i++ {
				if i > 100 {
					t.Fatal("no send of Held reached broker-b")
				}
			}
			if got := sendTopic(t, r, "Held", 60)["broker-b"]; got != 0 {
				t.Errorf("%d attempts of Held reached broker-b after its refusal, want 0", got)
			}
			if got := sendTopic(t, r, "Other", 60)["broker-b"]; (got > 0) != tc.otherOnB {
				t.Errorf("%d attempts of Other reached broker-b, want some: %v", got, tc.otherOnB)
			}
			isolated := slices.ContainsFunc(r.Isolated("test"), func(it fault.Item) bool { return it.Broker == "broker-b" })
			if isolated == tc.otherOnB {
				t.Errorf("broker-b isolated: %v, want %v", isolated, !tc.otherOnB)
			}
			if tc.preset != PresetDetour {
				return
			}
			brokers["broker-b"].CreateTopic("Held", 2)
			waitFor(t, "a check of Held on broker-b ends its hold", func() bool {
				return brokers["broker-b"].Stats().RequestsByCode[remoting.GetTopicConfig] > 0 && sendTopic(t, r, "Held", 10)["broker-b"] > 0
			})
		})
	}
}
