package producer

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf16"

	"github.com/detourmq/detour/pkg/remoting"
)

// ErrBadMessageGroup is matched (errors.Is) by the *ValidationError of an ordered send whose
// message group is blank, holds a property separator or is not valid UTF-8.
var ErrBadMessageGroup = errors.New("bad message group")

// MaxMessageGroupLength is the longest message group accepted, in bytes (the 5.x Proxy's
// default maxMessageGroupSize).
const MaxMessageGroupLength = 64

// OrderedSendError is the error of an ordered send that failed: its message group is bound to one
// queue and was not moved to another broker, so later messages of the group keep their order
// behind it.
type OrderedSendError struct {
	Group   string
	Broker  string
	QueueID int
	// Err is the send's error, a *SendError.
	Err error
}

// Error names the group's queue and says it was not moved, then the send's error.
func (e *OrderedSendError) Error() string {
	return fmt.Sprintf("message group %q is bound to queue %d of broker %s and is not sent elsewhere: %v", e.Group, e.QueueID, e.Broker, e.Err)
}

// Unwrap returns the send's error.
func (e *OrderedSendError) Unwrap() error { return e.Err }

// SendOrdered sends m to the queue its message group selects (see SendOrderedRoute).
func (r *Runtime) SendOrdered(ctx context.Context, m *Message, group string) (*SendResult, error) {
	return r.SendOrderedRoute(ctx, topicOf(m), m, group)
}

// SendOrderedRoute sends m, by the route whose key is route, to the queue its message group
// selects: every message of a group goes to the same queue, so a consumer reads them in the order
// they were sent, as RocketMQ's send(msg, SelectMessageQueueByHash, group) does. The queue is the
// group's Java String.hashCode modulo the route's write queues (negative remainders made
// positive), over the queues in RocketMQ's order (brokers by name, queue ids ascending), whatever
// the fault table or pod health say: moving a group to another broker would let its later
// messages overtake earlier ones. A group's queue changes only when the route's queues change.
//
// Under RocketMQ's presets the send makes one attempt, as send(msg, selector, arg) does; under
// PresetDetour it retries on the same queue within the budget. Attempts are recorded in the
// fault table as any send's (RocketMQ's selector sends record nothing), so other sends learn
// from them. A failure is an *OrderedSendError naming the group's broker and queue. The message
// carries the group as the __SHARDINGKEY property, as RocketMQ's Proxy sends a message group.
func (r *Runtime) SendOrderedRoute(ctx context.Context, route string, m *Message, group string) (*SendResult, error) {
	begin := r.now()
	if err := checkMessageGroup(group); err != nil {
		if verr := ValidateMessage(m); verr != nil {
			return nil, verr
		}
		return nil, err
	}
	var c sendCall
	if err := c.open(r, ctx, route, m, ModeSync, begin); err != nil {
		return nil, err
	}
	if err := c.addProperties(remoting.EncodeProperty(remoting.PropertyShardingKey, group)); err != nil {
		return nil, err
	}
	c.fixed = &c.rt.queues[groupQueueIndex(group, len(c.rt.queues))]
	if c.pol.Preset.rocketMQ() {
		c.rules.attempts = 1
	}
	res, err := c.run()
	if err != nil {
		return nil, &OrderedSendError{Group: group, Broker: c.fixed.b.name, QueueID: int(c.fixed.id), Err: err}
	}
	return res, nil
}

// fixedQueue is the ordered send's queue for the next attempt, or nil once its broker refused
// the message itself (MESSAGE_ILLEGAL): the same broker would refuse it again.
func (c *sendCall) fixedQueue() *queueEntry {
	if refusedBy(c.refusals, c.fixed.b.name) {
		return nil
	}
	return c.fixed
}

// checkMessageGroup refuses a group no queue can be chosen by reliably.
func checkMessageGroup(group string) error {
	if javaBlank(group) {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBadMessageGroup, Message: "the message group is blank"}
	}
	if len(group) > MaxMessageGroupLength {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBadMessageGroup,
			Message: fmt.Sprintf("the message group is %d bytes, over the limit of %d", len(group), MaxMessageGroupLength)}
	}
	if err := checkString(group, func() string { return "message group" }); err != nil {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrBadMessageGroup, Message: err.Error()}
	}
	return nil
}

// groupQueueIndex is the index SelectMessageQueueByHash selects among n queues for group:
// group.hashCode() % n, made positive.
func groupQueueIndex(group string, n int) int {
	v := javaStringHash(group) % int32(n)
	if v < 0 {
		v = -v
	}
	return int(v)
}

// javaStringHash is Java's String.hashCode of s: s[0]*31^(n-1) + ... + s[n-1] over its UTF-16
// code units, in 32-bit arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}
