package producer

import (
	"context"
	"fmt"

	"github.com/detourmq/detour/pkg/remoting"
)

// CreateTopic creates or updates a topic on one broker (UPDATE_AND_CREATE_TOPIC), as the Topic
// controller does for each master. The topic must pass RocketMQ's topic rules and must not be a
// system topic; queue counts must be positive and perm a valid PermName value (0..7). A refusal
// by the broker is a *BrokerError.
func (r *Runtime) CreateTopic(ctx context.Context, addr, topic string, read, write, perm int) error {
	return r.createTopic(ctx, "", nil, addr, topic, read, write, perm)
}

// CreateTopicIn is CreateTopic signed with the credentials set for scope (SetCredentials), for a
// broker no route or pod of the runtime has made known yet (a topic's first broker, found by
// asking the name servers); without credentials for scope it is CreateTopic.
func (r *Runtime) CreateTopicIn(ctx context.Context, scope, addr, topic string, read, write, perm int) error {
	var signed *remoting.Credentials
	if c, ok := r.scopeCredentials(scope); ok {
		signed = &c
	}
	return r.createTopic(ctx, scope, signed, addr, topic, read, write, perm)
}

func (r *Runtime) createTopic(ctx context.Context, scope string, signed *remoting.Credentials, addr, topic string, read, write, perm int) error {
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
