package producer

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// Message is the message type the runtime sends.
type Message = remoting.Message

// Send statuses, as RocketMQ's SendStatus names them. All four mean the broker stored the message.
const (
	StatusSendOK            = "SEND_OK"
	StatusFlushDiskTimeout  = "FLUSH_DISK_TIMEOUT"
	StatusFlushSlaveTimeout = "FLUSH_SLAVE_TIMEOUT"
	StatusSlaveNotAvailable = "SLAVE_NOT_AVAILABLE"
)

// SendResult describes a message the broker stored.
type SendResult struct {
	// MsgID is the message's UNIQ_KEY (RocketMQ's client msgId), the same on every attempt.
	MsgID string
	// OffsetMsgID is the broker's id of the stored message (store host and commit-log offset).
	OffsetMsgID string
	// Topic, Broker and QueueID name the queue that stored the message.
	Topic   string
	Broker  string
	QueueID int
	// QueueOffset is the message's logical offset in that queue.
	QueueOffset int64
	// TransactionID is the broker's transaction id of a half message (its UNIQ_KEY, as a 5.x
	// broker answers), or what the broker answered for any other message.
	TransactionID string
	// Attempts counts the attempts made, this one included.
	Attempts int
	// BrokersTried lists the broker of every attempt, in order.
	BrokersTried []string
	// Latency is the time from the start of the send to this result.
	Latency time.Duration
	// Status is SEND_OK, or a "stored but" status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
	// SLAVE_NOT_AVAILABLE) when the policy does not retry those.
	Status string
}

// ErrNoRoute is wrapped by the error for a topic without a route or without any write queue.
var ErrNoRoute = errors.New("no route")

// NoRouteError reports a send to a topic the runtime has no queues for.
type NoRouteError struct{ Topic string }

// Error has RocketMQ's text for a topic without route info.
func (e *NoRouteError) Error() string { return "No route info of this topic: " + e.Topic }

// Is makes errors.Is(err, ErrNoRoute) true.
func (e *NoRouteError) Is(target error) bool { return target == ErrNoRoute }

// BrokerError is a broker's refusal: a response code other than success or the "stored but" codes.
type BrokerError struct {
	Code   int16
	Remark string
	Broker string
	Addr   string
}

// Error has RocketMQ's MQBrokerException form.
func (e *BrokerError) Error() string {
	return fmt.Sprintf("CODE: %d  DESC: %s BROKER: %s", e.Code, e.Remark, e.Addr)
}

// MessageRefusedError is the last cause of a send that several brokers refused as
// MESSAGE_ILLEGAL (under PresetDetour, which tries another broker after such a refusal) and none
// stored: every refusal, in the order of the attempts. errors.As reaches each *BrokerError.
type MessageRefusedError struct {
	Refusals []*BrokerError
}

// Error names each refusal with its attempt and broker.
func (e *MessageRefusedError) Error() string {
	var b strings.Builder
	b.WriteString("every broker tried refused the message as MESSAGE_ILLEGAL: ")
	for i, be := range e.Refusals {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "attempt %d on %s: %s", i+1, be.Broker, be.Error())
	}
	return b.String()
}

// Unwrap returns the refusals.
func (e *MessageRefusedError) Unwrap() []error {
	out := make([]error, len(e.Refusals))
	for i, be := range e.Refusals {
		out[i] = be
	}
	return out
}

// BrokerNotExistError is an attempt on a broker that its route names with write queues but
// without an address. Only RocketMQ 4.x's last-resort selection (PresetRocketMQ4) picks such a
// broker, and then, as RocketMQ's producer does, the attempt fails before any I/O, counts as the
// broker's fault and is retried.
type BrokerNotExistError struct{ Broker string }

// Error has RocketMQ's text.
func (e *BrokerNotExistError) Error() string { return "The broker[" + e.Broker + "] not exist" }

// ErrSendTimeout is matched (errors.Is) by a SendError whose time budget ran out.
var ErrSendTimeout = errors.New("send timeout")

// SendError is the final error of a send that no attempt completed. Its text is RocketMQ's
// "Send [n] times, still failed, cost [x]ms, Topic: T, BrokersSent: [...]" followed by the last
// cause, which it wraps, so errors.Is and errors.As reach remoting's transport errors, a
// *BrokerError or the context's error.
type SendError struct {
	Topic string
	// Attempts counts the attempts made; MaxAttempts is what the policy allowed.
	Attempts, MaxAttempts int
	// Elapsed is the time from the start of the send to the error.
	Elapsed time.Duration
	// BrokersTried lists the broker of every attempt, in order.
	BrokersTried []string
	// Timeout is set when the send's time budget (policy send timeout or context deadline) ran out.
	Timeout bool
	// MessageRefused is set when every attempt was refused by its broker as MESSAGE_ILLEGAL and
	// the send ended for that (not for its budget or its caller): no broker tried would store
	// the message, so it is the message that must change. Under PresetDetour each broker of the
	// route is tried once at most before that is concluded, within the attempts allowed.
	MessageRefused bool
	// Err is the last attempt's error (or the context's error, or ErrSendTimeout when the budget
	// ran out before any attempt).
	Err error
}

// Error renders RocketMQ's final-error line followed by the last cause.
func (e *SendError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Send [%d] times, still failed, cost [%d]ms, Topic: %s, BrokersSent: [", e.Attempts, e.Elapsed.Milliseconds(), e.Topic)
	// RocketMQ prints an array sized for every allowed attempt, unused slots as null.
	n := max(e.MaxAttempts, len(e.BrokersTried))
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		if i < len(e.BrokersTried) {
			b.WriteString(e.BrokersTried[i])
		} else {
			b.WriteString("null")
		}
	}
	b.WriteString("]")
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the last cause.
func (e *SendError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrSendTimeout) true when the budget ran out.
func (e *SendError) Is(target error) bool { return target == ErrSendTimeout && e.Timeout }
