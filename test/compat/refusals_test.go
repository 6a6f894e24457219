package compat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// brokerCode returns the response code of the broker refusal err wraps, or 0.
func brokerCode(err error) int16 {
	var be *producer.BrokerError
	if errors.As(err, &be) {
		return be.Code
	}
	return 0
}

// TestRefusalsAsRocketMQRules sends what real brokers refuse and checks that each refusal ends as
// RocketMQ's producer rules say (a retry on another broker for the retry codes, a clear error
// after one attempt for the others, a refusal before any I/O for what the client rules forbid)
// and that nothing is ever stored twice.
func TestRefusalsAsRocketMQRules(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{NoAutoCreate: true}, rmqtest.BrokerConfig{NoAutoCreate: true})
			a, b := c.Brokers()[0], c.Brokers()[1]
			ctx := context.Background()

			t.Run("unknown topic on one broker is retried on the other", func(t *testing.T) {
				const topic = "DetourOnlyOnB"
				r := producer.New(producer.Options{})
				t.Cleanup(func() { _ = r.Close() })
				if err := r.CreateTopic(ctx, b.Addr, topic, 4, 4, 6); err != nil {
					t.Fatal(err)
				}
				pol := producer.DefaultPolicy("refusals")
				mustSetup(t, r, pol, producer.Route{Topic: topic, Policy: pol.Name, Brokers: []producer.BrokerQueues{
					{Broker: a.Name, WriteQueues: 4}, {Broker: b.Name, WriteQueues: 4}}}, c)
				retried := 0
				const n = 20
				for range n {
					res, err := r.Send(ctx, &producer.Message{Topic: topic, Body: []byte("x")})
					if err != nil {
						t.Fatalf("send: %v", err)
					}
					if res.Broker != b.Name {
						t.Fatalf("stored on %s, which lacks the topic", res.Broker)
					}
					if res.Attempts > 1 {
						retried++
					}
				}
				if retried == 0 {
					t.Errorf("no send was ever refused by %s: the test did not exercise TOPIC_NOT_EXIST", a.Name)
				}
				if got, per := storedTotal(t, c, topic); got != n {
					t.Errorf("brokers hold %d messages (%v), want %d", got, per, n)
				}
			})

			t.Run("topic on no broker fails naming every attempt", func(t *testing.T) {
				const topic = "DetourNowhere"
				r := producer.New(producer.Options{})
				t.Cleanup(func() { _ = r.Close() })
				pol := producer.DefaultPolicy("refusals")
				mustSetup(t, r, pol, producer.Route{Topic: topic, Policy: pol.Name, Brokers: []producer.BrokerQueues{
					{Broker: a.Name, WriteQueues: 4}, {Broker: b.Name, WriteQueues: 4}}}, c)
				_, err := r.Send(ctx, &producer.Message{Topic: topic, Body: []byte("x")})
				var se *producer.SendError
				if !errors.As(err, &se) || se.Attempts != 3 || brokerCode(err) != remoting.TopicNotExist {
					t.Fatalf("send to a topic no broker has: %v, want TOPIC_NOT_EXIST after 3 attempts", err)
				}
				t.Logf("error: %v", err)
			})

			// fresh returns a runtime with its own fault table that routes topic over a (with
			// queuesOnA write queues, which may be more than a holds) and b (4 queues); the topic
			// exists with 4 queues on both.
			fresh := func(t *testing.T, topic string, queuesOnA int) *producer.Runtime {
				t.Helper()
				r := producer.New(producer.Options{})
				t.Cleanup(func() { _ = r.Close() })
				for _, br := range c.Brokers() {
					if err := r.CreateTopic(ctx, br.Addr, topic, 4, 4, 6); err != nil {
						t.Fatal(err)
					}
				}
				pol := producer.DefaultPolicy("refusals")
				mustSetup(t, r, pol, producer.Route{Topic: topic, Policy: pol.Name, Brokers: []producer.BrokerQueues{
					{Broker: a.Name, WriteQueues: queuesOnA}, {Broker: b.Name, WriteQueues: 4}}}, c)
				return r
			}

			t.Run("body over 4 MiB is refused before any I/O", func(t *testing.T) {
				const topic = "DetourTooLarge"
				r := fresh(t, topic, 4)
				_, err := r.Send(ctx, &producer.Message{Topic: topic, Body: make([]byte, producer.MaxMessageSize+1)})
				var ve *producer.ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, producer.ErrBodyTooLarge) {
					t.Fatalf("send of 4 MiB + 1: %v, want a validation error", err)
				}
			})

			t.Run("properties no broker stores are refused before any I/O", func(t *testing.T) {
				const topic = "DetourTooLarge"
				r := fresh(t, topic, 4)
				_, err := r.Send(ctx, &producer.Message{Topic: topic, Body: []byte("x"),
					Properties: map[string]string{"big": strings.Repeat("p", 40000)}})
				if !errors.Is(err, producer.ErrPropertiesTooLarge) {
					t.Fatalf("send with 40000 bytes of properties: %v, want a validation error", err)
				}
			})

			t.Run("properties the broker's CLUSTER pushes over the limit fail once every broker refused them", func(t *testing.T) {
				// Under the limit as sent (with UNIQ_KEY and WAIT); over it once the broker adds
				// CLUSTER=DetourCluster, which it does before checking. The Detour preset tries
				// the other broker after the first refusal; when it refuses too, the message is
				// what is wrong.
				const topic = "DetourTooLarge"
				r := fresh(t, topic, 4)
				m := &producer.Message{Topic: topic, Body: []byte("x"),
					Properties: map[string]string{"big": strings.Repeat("p", producer.MaxPropertiesSize-len("big")-2-60)}}
				_, err := r.Send(ctx, m)
				var se *producer.SendError
				if !errors.As(err, &se) || se.Attempts != 2 || !se.MessageRefused || brokerCode(err) != remoting.MessageIllegal {
					t.Fatalf("send near the properties limit: %v, want MESSAGE_ILLEGAL from each of the 2 brokers", err)
				}
				// The message was wrong, not the brokers: nothing is isolated.
				if iso := r.Isolated("refusals"); len(iso) != 0 {
					t.Errorf("MESSAGE_ILLEGAL isolated %+v", iso)
				}
				if got, per := storedTotal(t, c, topic); got != 0 {
					t.Errorf("brokers hold %d messages (%v), want none", got, per)
				}
			})

			t.Run("queue id beyond the broker's queues", func(t *testing.T) {
				// a holds 4 queues where the route claims 8. RocketMQ 5.3.2+ answers INVALID_PARAMETER,
				// which RocketMQ's producer does not retry; 4.9.x answers SYSTEM_ERROR, which it
				// retries on another broker.
				const topic = "DetourStaleQueues"
				r := fresh(t, topic, 8)
				var ok, retried int
				codes := map[int16]int{}
				var firstErr error
				for range 60 {
					res, err := r.Send(ctx, &producer.Message{Topic: topic, Body: []byte("x")})
					if err != nil {
						var se *producer.SendError
						if !errors.As(err, &se) || se.Attempts != 1 {
							t.Fatalf("refused send: %v, want one attempt", err)
						}
						codes[brokerCode(err)]++
						if firstErr == nil {
							firstErr = err
						}
						continue
					}
					ok++
					if res.Attempts > 1 {
						retried++
						if res.BrokersTried[0] != a.Name || res.Broker != b.Name {
							t.Errorf("retried send went %v, stored on %s; want a refusal on %s, then %s", res.BrokersTried, res.Broker, a.Name, b.Name)
						}
					}
				}
				t.Logf("%d stored (%d after a retry), refusals by code %v; first: %v", ok, retried, codes, firstErr)
				switch line {
				case rmqtest.V5:
					if codes[remoting.InvalidParameter] == 0 || len(codes) != 1 {
						t.Errorf("refusals by code %v, want INVALID_PARAMETER only", codes)
					}
				case rmqtest.V4:
					if len(codes) != 0 || retried == 0 {
						t.Errorf("refusals by code %v and %d retried, want every refusal retried on %s", codes, retried, b.Name)
					}
				}
				if got, per := storedTotal(t, c, topic); got != int64(ok) {
					t.Errorf("brokers hold %d messages (%v), %d sends succeeded", got, per, ok)
				}
			})
		})
	}
}

// mustSetup pushes the cluster's brokers, the policy and the route into r.
func mustSetup(t *testing.T, r *producer.Runtime, pol producer.Policy, route producer.Route, c *rmqtest.Cluster) {
	t.Helper()
	for _, b := range c.Brokers() {
		r.SetBroker(producer.Broker{Name: b.Name, Addr: b.Addr, Ready: true})
	}
	if err := r.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	if err := r.SetRoute(route); err != nil {
		t.Fatal(err)
	}
}
