package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// MaxBatchMessages is the most messages one batch may hold. RocketMQ bounds a batch only by its
// encoded size (MaxMessageSize); detour also bounds the count, so a batch of tiny messages
// cannot make the process hold hundreds of thousands of them (and their ids) per request.
const MaxBatchMessages = 4096

// Errors of batch rules, matched with errors.Is on the *ValidationError a batch send returns.
var (
	// ErrEmptyBatch is a batch without messages.
	ErrEmptyBatch = errors.New("empty batch")
	// ErrBatchTooLarge is a batch over MaxBatchMessages messages.
	ErrBatchTooLarge = errors.New("too many messages in a batch")
	// ErrBatchMixedTopics is a batch whose messages name more than one topic.
	ErrBatchMixedTopics = errors.New("batch messages name different topics")
	// ErrBatchRetryTopic is a batch to a retry topic (%RETRY%...).
	ErrBatchRetryTopic = errors.New("batch to a retry topic")
	// ErrBatchMixedWait is a batch whose messages differ in WAIT (waitStoreMsgOK).
	ErrBatchMixedWait = errors.New("batch messages differ in waitStoreMsgOK")
)

// retryTopicPrefix starts the retry topics of consumer groups (MixAll.RETRY_GROUP_TOPIC_PREFIX).
const retryTopicPrefix = "%RETRY%"

// BatchResult describes a batch the broker stored: all its messages on one queue, in order.
type BatchResult struct {
	// SendResult is the batch's result as RocketMQ's SendResult gives it: MsgID is the
	// comma-joined UNIQ_KEYs of the messages, OffsetMsgID the broker's comma-joined ids, and
	// QueueOffset the first message's offset.
	SendResult
	// MsgIDs holds each message's UNIQ_KEY, in the order of the batch.
	MsgIDs []string
	// OffsetMsgIDs holds the broker's id of each stored message, in the order of the batch; nil
	// when the broker's answer does not name one id per message.
	OffsetMsgIDs []string
}

// SendBatch sends msgs, which must all name one topic, as one SEND_BATCH_MESSAGE: stored
// together on one queue, in order, or not at all. The queue's selection, the retries, the time
// budget and the fault table's records are those of Send; a retry resends the same bytes, so
// every message keeps its UNIQ_KEY. A batch RocketMQ's producer refuses (mixed topics, a retry
// topic, mixed WAIT, an encoded size over MaxMessageSize, a message Send would refuse) is
// refused here before any I/O. Batches are never compressed, as in RocketMQ. msgs are not
// modified.
func (r *Runtime) SendBatch(ctx context.Context, msgs []*Message) (*BatchResult, error) {
	key := ""
	if len(msgs) > 0 && msgs[0] != nil {
		key = msgs[0].Topic
	}
	return r.SendBatchRoute(ctx, key, msgs)
}

// SendBatchRoute is SendBatch by the route whose key is route (see Route.Key), which must
// publish to the messages' topic.
func (r *Runtime) SendBatchRoute(ctx context.Context, route string, msgs []*Message) (*BatchResult, error) {
	begin := r.now()
	if err := ValidateBatch(msgs); err != nil {
		return nil, err
	}
	b, err := encodeBatch(msgs)
	if err != nil {
		return nil, err
	}
	res, err := r.sendEncodedBatch(ctx, route, msgs[0].Topic, b, begin)
	if err != nil {
		return nil, err
	}
	out := &BatchResult{SendResult: *res, MsgIDs: b.ids}
	if ids := strings.Split(res.OffsetMsgID, ","); len(ids) == len(msgs) {
		out.OffsetMsgIDs = ids
	}
	return out, nil
}

// ValidateBatch applies RocketMQ's batch rules (MessageBatch.generateFromList, then
// Validators.checkMessage on every message) and detour's bound on the count: at least one and
// at most MaxBatchMessages messages, each valid for Send, all to one topic that is not a retry
// topic, all with the same WAIT. The encoded size is checked when the batch is encoded.
func ValidateBatch(msgs []*Message) error {
	if len(msgs) == 0 {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrEmptyBatch, Message: "the batch holds no message"}
	}
	if len(msgs) > MaxBatchMessages {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBatchTooLarge,
			Message: fmt.Sprintf("the batch holds %d messages, over the limit of %d", len(msgs), MaxBatchMessages)}
	}
	for i, m := range msgs {
		if err := ValidateMessage(m); err != nil {
			return batchMessageError(i, err)
		}
		if strings.HasPrefix(m.Topic, retryTopicPrefix) {
			return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBatchRetryTopic, Message: "Retry Group is not supported for batching"}
		}
		if i == 0 {
			continue
		}
		if m.Topic != msgs[0].Topic {
			return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBatchMixedTopics,
				Message: fmt.Sprintf("The topic of the messages in one batch should be the same (message %d names %s, message 0 %s)", i, m.Topic, msgs[0].Topic)}
		}
		if waitStoreMsgOK(m) != waitStoreMsgOK(msgs[0]) {
			return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBatchMixedWait,
				Message: "The waitStoreMsgOK of the messages in one batch should the same"}
		}
	}
	return nil
}

// batchMessageError names the message of a batch that broke a rule, keeping the rule.
func batchMessageError(i int, err error) error {
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		return &ValidationError{Code: ve.Code, Rule: ve.Rule, Message: fmt.Sprintf("batch message %d: %s", i, ve.Message)}
	}
	return err
}

// waitStoreMsgOK is Java's Message.isWaitStoreMsgOK: true unless WAIT is set to anything but
// "true" (in any case).
func waitStoreMsgOK(m *Message) bool {
	v, ok := m.Properties[remoting.PropertyWaitStoreMsgOK]
	return !ok || strings.EqualFold(v, "true")
}

// encodedBatch is a batch ready for the wire: its body, its own properties and every message's
// UNIQ_KEY.
type encodedBatch struct {
	body  []byte
	props string
	// ids are the messages' UNIQ_KEYs, slices of joined (their comma-joined form, RocketMQ's
	// batch msgId), so the ids cost one string for the whole batch.
	ids    []string
	joined string
}

// The batch's own properties: WAIT as its first message has it.
var (
	batchWaitTrue  = remoting.EncodeProperty(remoting.PropertyWaitStoreMsgOK, "true")
	batchWaitFalse = remoting.EncodeProperty(remoting.PropertyWaitStoreMsgOK, "false")
)

// encodeBatch encodes msgs as RocketMQ's DefaultMQProducer.batch does: every message with its
// properties, a UNIQ_KEY (its own if it has one) and WAIT=true unless it sets WAIT; the batch with
// the first message's WAIT, but without a UNIQ_KEY of its own (see below). The body and the ids
// are each built in one buffer sized up front: no allocation per message.
func encodeBatch(msgs []*Message) (*encodedBatch, error) {
	size, idsLen := 0, 0
	for i, m := range msgs {
		props := remoting.SendPropertiesSize(m)
		if err := checkPropertiesSize(props); err != nil {
			return nil, batchMessageError(i, err)
		}
		size += remoting.BatchEntryFixedSize + len(m.Body) + props
		if id := m.Properties[remoting.PropertyUniqKey]; id != "" {
			idsLen += len(id) + 1
		} else {
			idsLen += remoting.UniqIDLength + 1
		}
	}
	if size > MaxMessageSize {
		return nil, &ValidationError{Code: CodeMessageIllegal, Rule: ErrBodyTooLarge,
			Message: fmt.Sprintf("the message body size over max value, MAX: %d (the batch encodes to %d bytes)", MaxMessageSize, size)}
	}
	body, spans, err := remoting.AppendBatch(make([]byte, 0, size), msgs, make([]int, 0, 2*len(msgs)))
	if err != nil {
		return nil, err
	}
	ids := make([]byte, 0, idsLen)
	for i := 0; i < len(spans); i += 2 {
		if i > 0 {
			ids = append(ids, ',')
		}
		// From here on the span names the id in ids, not in body.
		start := len(ids)
		ids = append(ids, body[spans[i]:spans[i+1]]...)
		spans[i], spans[i+1] = start, len(ids)
	}
	eb := &encodedBatch{body: body, joined: string(ids), ids: make([]string, len(msgs))}
	for i := range eb.ids {
		eb.ids[i] = eb.joined[spans[2*i]:spans[2*i+1]]
	}
	// The batch's own properties carry WAIT only. RocketMQ's producer also gives the batch a
	// UNIQ_KEY of its own, but 4.9.x brokers append the batch's properties to every message's
	// (CommitLog's batch encoder; RocketMQ issue #9416, fixed in 5.x's store), so that UNIQ_KEY
	// overrides each message's and consumers read every message of the batch under one id.
	eb.props = batchWaitTrue
	if !waitStoreMsgOK(msgs[0]) {
		eb.props = batchWaitFalse
	}
	return eb, nil
}

// sendEncodedBatch sends b by the route key as one SEND_BATCH_MESSAGE through the send loop, as a
// sync send: the same selection, retries, budget and fault records.
func (r *Runtime) sendEncodedBatch(ctx context.Context, key, topic string, b *encodedBatch, begin time.Time) (*SendResult, error) {
	rt, err := r.openRoute(key, topic, ModeSync, begin)
	if err != nil {
		return nil, err
	}
	c := sendCall{r: r, ctx: ctx, key: key, topic: topic, metric: rt.metricTopic, mode: ModeSync, begin: begin}
	c.prepareBatch(rt, b)
	return c.run()
}

// prepareBatch is prepare for a batch: the request carries the encoded batch as it is (batches
// are never compressed) and the batch's own properties, and the result names the messages'
// comma-joined ids, as RocketMQ's SendResult does for a batch.
func (c *sendCall) prepareBatch(rt *route, b *encodedBatch) {
	c.rt = rt
	c.pol = &rt.policy.Policy
	c.rules = retryRulesOf(c.pol, c.mode)
	c.uniq = b.joined
	c.body = b.body
	c.header = remoting.SendHeader{
		ProducerGroup:         c.r.group,
		Topic:                 c.topic,
		DefaultTopic:          defaultTopicKey,
		DefaultTopicQueueNums: defaultTopicQueueNums,
		Properties:            b.props,
		Batch:                 true,
	}
	c.startBudget()
}
