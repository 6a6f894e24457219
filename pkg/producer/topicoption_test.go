package producer

import (
	"context"
	"strings"
	"testing"
)

// TestCreateTopicRefusesAMessageTypeRocketMQDoesNotKnow proves that a message type outside
// RocketMQ 5's values is refused before any request is sent.
func TestCreateTopicRefusesAMessageTypeRocketMQDoesNotKnow(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	// Nothing listens on port 1: an error that names the type shows the request was never made.
	err := r.CreateTopic(context.Background(), "127.0.0.1:1", "Orders", 4, 4, 6, WithMessageType("Fifo"))
	if err == nil || !strings.Contains(err.Error(), `message type "Fifo" is not one of`) {
		t.Fatalf("CreateTopic with message type Fifo: %v, want a refusal naming the type", err)
	}
}
