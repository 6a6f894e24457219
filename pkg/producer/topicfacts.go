package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/detourmq/detour/pkg/remoting"
)

// TopicFacts are what a route's brokers say of its topic and of the bodies they store.
type TopicFacts struct {
	// MessageType is the topic's message.type attribute (NORMAL, FIFO, DELAY, TRANSACTION or
	// MIXED; NORMAL when unset) as the first broker that answered has it; "" when none answered
	// GET_TOPIC_CONFIG (a RocketMQ 4.x broker does not serve it).
	MessageType string
	// MaxMessageSize is the smallest maxMessageSize of the brokers that answered
	// GET_BROKER_CONFIG, the largest body every one of them stores; -1 when none did.
	MaxMessageSize int
}

// ErrNoTopicFacts is returned by TopicFacts when no broker of the route answered either request.
var ErrNoTopicFacts = errors.New("no broker of the route answered its topic or broker configuration")

// TopicFacts asks every broker of route (a Route's Key, else its topic) for the topic's
// configuration (GET_TOPIC_CONFIG) and for its own (GET_BROKER_CONFIG), two requests per broker
// in turn. It is meant for a cache refreshed in the background, never for every send.
func (r *Runtime) TopicFacts(ctx context.Context, route string) (TopicFacts, error) {
	if r.closed.Load() {
		return TopicFacts{}, ErrClosed
	}
	rt := r.state.Load().index.get(route)
	if rt == nil {
		return TopicFacts{}, &NoRouteError{Topic: route}
	}
	facts := TopicFacts{MaxMessageSize: -1}
	var errs []error
	seen := map[string]bool{}
	for i := range rt.queues {
		b := rt.queues[i].b
		if b.addr == "" || seen[b.name] {
			continue
		}
		seen[b.name] = true
		if err := r.readTopicFacts(ctx, rt.topic, b.name, b.addr, &facts); err != nil {
			errs = append(errs, err)
		}
	}
	if facts.MessageType == "" && facts.MaxMessageSize < 0 {
		return facts, fmt.Errorf("%w: %w", ErrNoTopicFacts, errors.Join(errs...))
	}
	return facts, nil
}

// readTopicFacts adds what one broker answers to facts: the topic's type when none is known yet,
// and its maxMessageSize when smaller than those known.
func (r *Runtime) readTopicFacts(ctx context.Context, topic, name, addr string, facts *TopicFacts) error {
	var errs []error
	if facts.MessageType == "" {
		resp, err := r.client.Invoke(ctx, addr, remoting.NewGetTopicConfigRequest(topic))
		if err == nil {
			var tc remoting.TopicConfig
			if tc, err = remoting.ParseTopicConfig(resp); err == nil {
				facts.MessageType = tc.MessageType()
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("topic config of %s from %s: %w", topic, name, err))
		}
	}
	resp, err := r.client.Invoke(ctx, addr, remoting.NewGetBrokerConfigRequest())
	if err == nil {
		var cfg remoting.BrokerConfig
		if cfg, err = remoting.ParseBrokerConfig(resp); err == nil {
			if n := remoting.MaxMessageSizeOf(cfg); n > 0 && (facts.MaxMessageSize < 0 || n < facts.MaxMessageSize) {
				facts.MaxMessageSize = n
			}
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("broker config of %s: %w", name, err))
	}
	return errors.Join(errs...)
}
