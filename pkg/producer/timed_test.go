package producer

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// timedCluster is a runtime routing testTopic over brokers reporting the given versions.
func timedCluster(t *testing.T, versions ...string) (*Runtime, []*brokersim.Broker) {
	t.Helper()
	r := New(Options{})
	t.Cleanup(func() { r.Close() })
	rt := Route{Topic: testTopic}
	var brokers []*brokersim.Broker
	for i, v := range versions {
		name := "broker-" + string(rune('a'+i))
		b, err := brokersim.StartBrokerWith(name, "127.0.0.1:0", brokersim.Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.CreateTopic(testTopic, 2)
		r.SetBroker(Broker{Name: name, Addr: b.Addr(), Ready: true})
		rt.Brokers = append(rt.Brokers, BrokerQueues{Broker: name, WriteQueues: 2})
		brokers = append(brokers, b)
	}
	if err := r.SetRoute(rt); err != nil {
		t.Fatal(err)
	}
	return r, brokers
}

// A 5.x broker rounds a timer message's time down to its second mark (TIMER_OUT_MS); the
// runtime asks for the mark after the time, so the broker's delivery time is never before it.
// The canary, the time itself as RocketMQ's producer sends setDeliverTimeMs, comes out earlier.
func TestTimedSendToA5xBrokerIsDeliveredNotBeforeTheTimeAsked(t *testing.T) {
	r, brokers := timedCluster(t, "V5_5_0")
	for _, offset := range []time.Duration{10*time.Second + 300*time.Millisecond, 20 * time.Second, time.Hour + time.Millisecond} {
		at := time.Now().Add(offset)
		if _, err := r.SendTimed(context.Background(), &Message{Topic: testTopic, Body: []byte("later")}, at); err != nil {
			t.Fatal(err)
		}
		timer := brokers[0].Messages(brokersim.TimerTopic, 0)
		m := timer[len(timer)-1]
		out, err := strconv.ParseInt(m.Properties["TIMER_OUT_MS"], 10, 64)
		if err != nil || out < at.UnixMilli() || out > at.UnixMilli()+int64(timerPrecision/time.Millisecond) {
			t.Fatalf("asked for %d, the broker delivers at %s (want within a second after)", at.UnixMilli(), m.Properties["TIMER_OUT_MS"])
		}
	}
	// The canary: TIMER_DELIVER_MS set to the time asked itself.
	at := time.Now().Add(10*time.Second + 300*time.Millisecond)
	c := remoting.NewClient(remoting.ClientOptions{})
	defer c.Close()
	h := &remoting.SendHeader{ProducerGroup: "g", Topic: testTopic, DefaultTopic: remoting.DefaultTopic, DefaultTopicQueueNums: 4,
		BornTimestamp: time.Now().UnixMilli(), Properties: (&remoting.Message{Properties: map[string]string{
			remoting.PropertyTimerDeliverMS: strconv.FormatInt(at.UnixMilli(), 10), remoting.PropertyUniqKey: remoting.NewUniqID()}}).EncodeProperties()}
	if resp, err := c.Invoke(context.Background(), brokers[0].Addr(), remoting.NewSendRequest(h, []byte("naive"), true)); err != nil || resp.Code != remoting.Success {
		t.Fatalf("canary: %v %v", resp, err)
	}
	timer := brokers[0].Messages(brokersim.TimerTopic, 0)
	if out, _ := strconv.ParseInt(timer[len(timer)-1].Properties["TIMER_OUT_MS"], 10, 64); out >= at.UnixMilli() {
		t.Fatalf("the canary asked for %d and is delivered at %d: the rounding the runtime corrects for is not there", at.UnixMilli(), out)
	}
}

func TestTimedSendToA4xBrokerTakesTheFirstDelayLevelNotShorter(t *testing.T) {
	r, brokers := timedCluster(t, "V4_9_7")
	for _, tc := range []struct {
		delay time.Duration
		level int
	}{{800 * time.Millisecond, 1}, {time.Second + 500*time.Millisecond, 2}, {12 * time.Second, 4}, {25 * time.Minute, 16}, {2*time.Hour - time.Minute, 18}} {
		if _, err := r.SendTimed(context.Background(), &Message{Topic: testTopic, Body: []byte("later")}, time.Now().Add(tc.delay)); err != nil {
			t.Fatal(err)
		}
		if got := brokers[0].Messages(brokersim.ScheduleTopic, tc.level-1); len(got) != 1 || got[0].Properties[remoting.PropertyDelayLevel] != strconv.Itoa(tc.level) {
			t.Fatalf("delay %v: schedule queue %d holds %v, want one message of level %d", tc.delay, tc.level-1, got, tc.level)
		}
	}
	if n := brokers[0].Stats().RequestsByCode[remoting.GetBrokerRuntimeInfo]; n != 1 {
		t.Fatalf("the broker was asked its version %d times for 5 sends within a minute", n)
	}
}

func TestTimedSendsTheBrokersCannotCarryOutAreRefusedBeforeSending(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		delay    time.Duration
	}{
		{"5.x beyond three days", []string{"V5_5_0"}, 73 * time.Hour},
		{"4.x beyond two hours", []string{"V4_9_7"}, 2*time.Hour + time.Second},
		{"brokers of both lines", []string{"V5_5_0", "V4_9_7"}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, brokers := timedCluster(t, tc.versions...)
			_, err := r.SendTimed(context.Background(), &Message{Topic: testTopic, Body: []byte("later")}, time.Now().Add(tc.delay))
			if !errors.Is(err, ErrTimedDeliveryUnsupported) {
				t.Fatalf("got %v", err)
			}
			for _, b := range brokers {
				if n := b.Stats().SendsReceived; n != 0 {
					t.Fatalf("%d sends reached %s", n, b.Name())
				}
			}
		})
	}
}

func TestTimedSendForATimePastIsSentAtOnce(t *testing.T) {
	r, brokers := timedCluster(t, "V4_9_7")
	res, err := r.SendTimed(context.Background(), &Message{Topic: testTopic, Body: []byte("now")}, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got := brokers[0].Messages(testTopic, res.QueueID); len(got) != 1 {
		t.Fatalf("the topic's queue holds %d messages", len(got))
	}
	if n := brokers[0].Stats().RequestsByCode[remoting.GetBrokerRuntimeInfo]; n != 0 {
		t.Fatalf("the broker was asked its version for a plain send")
	}
}
