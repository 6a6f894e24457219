package producer

import (
	"context"
	"fmt"
	"slices"

	"github.com/detourmq/detour/pkg/remoting"
)

// CreateTopic creates or updates a topic on one broker (UPDATE_AND_CREATE_TOPIC), as the Topic
// controller does for each master. The topic must pass RocketMQ's topic rules and must not be a
// system topic; queue counts must be positive and perm a valid PermName value (0..7). A refusal
// by the broker is a *BrokerError.
func (r *Runtime) CreateTopic(ctx context.Context, addr, topic string, read, write, perm int, opts ...TopicOption) error {
	return r.createTopic(ctx, "", nil, addr, topic, read, write, perm, opts)
}

// TopicOption sets more of a topic CreateTopic creates.
type TopicOption func(*topicOptions)

type topicOptions struct{ messageType string }

// MessageTypes are the values of RocketMQ 5's message.type topic attribute.
var MessageTypes = []string{"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}

// WithMessageType creates the topic with RocketMQ 5's message.type attribute t (one of
// MessageTypes), which says what type of message the topic takes; "" leaves it unset.
func WithMessageType(t string) TopicOption { return func(o *topicOptions) { o.messageType = t } }

// CreateTopicIn is CreateTopic signed with the credentials set for scope (SetCredentials), for a
// broker no route or pod of the runtime has made known yet (a topic's first broker, found by
// asking the name servers); without credentials for scope it is CreateTopic.
func (r *Runtime) CreateTopicIn(ctx context.Context, scope, addr, topic string, read, write, perm int, opts ...TopicOption) error {
	var signed *remoting.Credentials
	if c, ok := r.scopeCredentials(scope); ok {
		signed = &c
	}
	return r.createTopic(ctx, scope, signed, addr, topic, read, write, perm, opts)
}

func (r *Runtime) createTopic(ctx context.Context, scope string, signed *remoting.Credentials, addr, topic string, read, write, perm int,
	opts []TopicOption) error {
	var o topicOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := CheckCreateTopic(topic); err != nil {
		return err
	}
	if read < 1 || write < 1 || read > 1<<16 || write > 1<<16 {
		return fmt.Errorf("create topic %s: queue counts must be within 1..65536, got read %d write %d", topic, read, write)
	}
	if perm < 0 || perm > 7 {
		return fmt.Errorf("create topic %s: perm %d is not a valid permission (0..7)", topic, perm)
	}
	req := remoting.NewCreateTopicRequest(topic, int32(read), int32(write), int32(perm))
	if o.messageType != "" {
		if !slices.Contains(MessageTypes, o.messageType) {
			return fmt.Errorf("create topic %s: message type %q is not one of %v", topic, o.messageType, MessageTypes)
		}
		// RocketMQ's attribute syntax: "+key=value" adds or changes an attribute.
		req.ExtFields["attributes"] = "+" + remoting.AttributeMessageType + "=" + o.messageType
	}
	if signed != nil {
		req = signed.Sign(req)
	}
	resp, err := r.client.Invoke(ctx, addr, req)
	if err != nil {
		return fmt.Errorf("create topic %s on %s: %w", topic, addr, err)
	}
	r.noteAnswer(scope, addr, "", topic, remoting.UpdateAndCreateTopic, resp)
	if resp.Code != remoting.Success {
		return &BrokerError{Code: resp.Code, Remark: resp.Remark, Addr: addr}
	}
	return nil
}
