package controllers

import (
	"slices"
	"testing"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
)

// TestEveryTopicMessageTypeIsOneRocketMQKnows proves that each value the API admits for
// spec.messageType reaches the brokers as one of the message.type values RocketMQ 5 accepts, and
// that no two API values meet in one.
func TestEveryTopicMessageTypeIsOneRocketMQKnows(t *testing.T) {
	seen := map[string]routingv1alpha1.TopicMessageType{}
	for _, v := range []routingv1alpha1.TopicMessageType{routingv1alpha1.TopicMessageNormal, routingv1alpha1.TopicMessageFIFO,
		routingv1alpha1.TopicMessageDelay, routingv1alpha1.TopicMessageTransaction, routingv1alpha1.TopicMessageMixed} {
		got := rocketMQMessageType(v)
		if !slices.Contains(producer.MessageTypes, got) {
			t.Errorf("%s reaches the brokers as %q, not one of %v", v, got, producer.MessageTypes)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("%s and %s both reach the brokers as %s", prev, v, got)
		}
		seen[got] = v
	}
	topic := &routingv1alpha1.Topic{}
	if opts := topicOptions(topic); len(opts) != 0 {
		t.Errorf("a Topic without messageType creates its topic with %d options, want none", len(opts))
	}
}
