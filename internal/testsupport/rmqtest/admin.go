package rmqtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/remoting"
)

// Admin request codes of RocketMQ's RequestCode that only the harness sends.
const (
	codeUpdateBrokerConfig    int16 = 25
	codeGetBrokerConfig       int16 = 26
	codeWipeWritePermOfBroker int16 = 205
	codeDeleteTopicInBroker   int16 = 215
	codeAddWritePermOfBroker  int16 = 327
)

// invoke sends one request and turns a non-success answer into a *remoting.ResponseError.
func (c *Cluster) invoke(ctx context.Context, addr string, code int16, ext map[string]string, body []byte) (*remoting.Command, error) {
	resp, err := c.client.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return resp, &remoting.ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	return resp, nil
}

// ClusterInfo asks the name server which brokers are registered.
func (c *Cluster) ClusterInfo(ctx context.Context) (*remoting.ClusterInfo, error) {
	resp, err := c.invoke(ctx, c.nsAddr, remoting.GetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	return remoting.DecodeClusterInfo(resp.Body)
}

// Route asks the name server for a topic's route, as every RocketMQ client does.
func (c *Cluster) Route(ctx context.Context, topic string) (*remoting.TopicRouteData, error) {
	resp, err := c.invoke(ctx, c.nsAddr, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	if err != nil {
		return nil, err
	}
	return remoting.DecodeTopicRouteData(resp.Body)
}

// WipeWritePerm drains a broker the way `mqadmin wipeWritePerm` does: the name server publishes
// its queues without the write bit. It returns how many topics changed.
func (c *Cluster) WipeWritePerm(ctx context.Context, broker string) (int, error) {
	return c.permChange(ctx, codeWipeWritePermOfBroker, broker, "wipeTopicCount")
}

// AddWritePerm undoes WipeWritePerm (`mqadmin addWritePerm`).
func (c *Cluster) AddWritePerm(ctx context.Context, broker string) (int, error) {
	return c.permChange(ctx, codeAddWritePermOfBroker, broker, "addTopicCount")
}

func (c *Cluster) permChange(ctx context.Context, code int16, broker, countField string) (int, error) {
	resp, err := c.invoke(ctx, c.nsAddr, code, map[string]string{"brokerName": broker}, nil)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(resp.ExtFields[countField])
}

// SetPermission changes the broker's brokerPermission at run time (UPDATE_BROKER_CONFIG, as
// `mqadmin updateBrokerConfig -k brokerPermission` does): 6 read-write, 4 read-only, 2 write-only.
// The broker re-registers, so the name server's routes show the new perm.
func (b *Broker) SetPermission(ctx context.Context, perm int) error {
	return b.UpdateConfig(ctx, map[string]string{"brokerPermission": strconv.Itoa(perm)})
}

// UpdateConfig changes broker settings at run time (UPDATE_BROKER_CONFIG).
func (b *Broker) UpdateConfig(ctx context.Context, settings map[string]string) error {
	var body []byte
	for k, v := range settings {
		body = append(body, k+"="+v+"\n"...)
	}
	_, err := b.c.invoke(ctx, b.Addr, codeUpdateBrokerConfig, nil, body)
	return err
}

// Config returns the settings the broker runs with (GET_BROKER_CONFIG, as `mqadmin
// getBrokerConfig` reads them): every key of its broker, store and remoting configuration.
func (b *Broker) Config(ctx context.Context) (map[string]string, error) {
	resp, err := b.c.invoke(ctx, b.Addr, codeGetBrokerConfig, nil, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(resp.Body), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out, nil
}

// CreateTopic creates (or updates) a topic on the broker with queues read and write queues,
// readable and writable (UPDATE_AND_CREATE_TOPIC, as `mqadmin updateTopic` does).
func (b *Broker) CreateTopic(ctx context.Context, topic string, queues int) error {
	if queues < 1 || queues > 1<<16 {
		return fmt.Errorf("rmqtest: create topic %s: %d queues, want 1..65536", topic, queues)
	}
	n := int32(queues) //nolint:gosec // bounded above
	req := remoting.NewCreateTopicRequest(topic, n, n, 6)
	resp, err := b.c.client.Invoke(ctx, b.Addr, req)
	if err != nil {
		return fmt.Errorf("rmqtest: create topic %s on %s: %w", topic, b.Name, err)
	}
	if resp.Code != remoting.Success {
		return fmt.Errorf("rmqtest: create topic %s on %s: %w", topic, b.Name, &remoting.ResponseError{Code: resp.Code, Remark: resp.Remark})
	}
	return nil
}

// DeleteTopic deletes a topic's configuration and consume queues from the broker
// (DELETE_TOPIC_IN_BROKER, the broker's half of `mqadmin deleteTopic`). A broker that does not
// create topics on demand then refuses every send to it at once with TOPIC_NOT_EXIST.
func (b *Broker) DeleteTopic(ctx context.Context, topic string) error {
	_, err := b.c.invoke(ctx, b.Addr, codeDeleteTopicInBroker, map[string]string{"topic": topic}, nil)
	if err != nil {
		return fmt.Errorf("rmqtest: delete topic %s on %s: %w", topic, b.Name, err)
	}
	return nil
}

// CreateTypedTopic is CreateTopic with the topic's message.type attribute set to msgType
// (NORMAL, FIFO, DELAY, TRANSACTION or MIXED), as `mqadmin updateTopic -a +message.type=...`
// creates it on a RocketMQ 5 broker.
func (b *Broker) CreateTypedTopic(ctx context.Context, topic string, queues int, msgType string) error {
	if queues < 1 || queues > 1<<16 {
		return fmt.Errorf("rmqtest: create topic %s: %d queues, want 1..65536", topic, queues)
	}
	n := int32(queues) //nolint:gosec // bounded above
	req := remoting.NewCreateTopicRequest(topic, n, n, 6)
	req.ExtFields["attributes"] = "+" + remoting.AttributeMessageType + "=" + msgType
	if _, err := b.c.invoke(ctx, b.Addr, remoting.UpdateAndCreateTopic, req.ExtFields, nil); err != nil {
		return fmt.Errorf("rmqtest: create %s topic %s on %s: %w", msgType, topic, b.Name, err)
	}
	return nil
}

// MaxOffset is the number of messages a queue of a topic holds on the broker (GET_MAX_OFFSET).
func (b *Broker) MaxOffset(ctx context.Context, topic string, queueID int) (int64, error) {
	resp, err := b.c.invoke(ctx, b.Addr, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": strconv.Itoa(queueID)}, nil)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
}

// awaitDispatched waits until the broker has built its consume queues from everything its
// commit log holds: a broker acknowledges a send once the commit log has it and dispatches to the
// queues, whose offsets Stored reads, a moment later, longer on a loaded machine. A broker whose
// runtime table does not report it is not waited for.
func (b *Broker) awaitDispatched(ctx context.Context) error {
	err := poll.Wait(dispatchWait(ctx), 50*time.Millisecond, func() error {
		resp, err := b.c.client.Invoke(ctx, b.Addr, remoting.NewGetBrokerRuntimeInfoRequest())
		if err != nil {
			return err
		}
		table, err := remoting.ParseBrokerRuntimeInfo(resp)
		if err != nil {
			return err
		}
		if behind, ok := table["dispatchBehindBytes"]; ok && behind != "0" {
			return fmt.Errorf("%s bytes of the commit log not yet dispatched", behind)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("broker %s: %w", b.Name, err)
	}
	return nil
}

// dispatchWait is how long awaitDispatched may wait: until ctx's deadline, or 10 s.
func dispatchWait(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return 10 * time.Second
}

// Stored counts the messages a topic holds on every broker, summed over its queues as the name
// server's route lists them (read queues, the most a broker keeps).
func (c *Cluster) Stored(ctx context.Context, topic string) (map[string]int64, error) {
	rt, err := c.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, q := range rt.QueueDatas {
		b := c.findBroker(q.BrokerName)
		if b == nil {
			continue
		}
		if err := b.awaitDispatched(ctx); err != nil {
			return nil, err
		}
		for id := 0; id < int(max(q.ReadQueueNums, q.WriteQueueNums)); id++ {
			n, err := b.MaxOffset(ctx, topic, id)
			if err != nil {
				return nil, fmt.Errorf("max offset of %s/%d on %s: %w", topic, id, b.Name, err)
			}
			out[b.Name] += n
		}
	}
	return out, nil
}

func (c *Cluster) findBroker(name string) *Broker {
	for _, b := range c.brokers {
		if b.Name == name {
			return b
		}
	}
	return nil
}
