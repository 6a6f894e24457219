package producer

import (
	"context"
	"errors"
	"time"
)

// SendMode says how a send was issued.
type SendMode int

// Send modes, as RocketMQ's CommunicationMode.
const (
	ModeSync SendMode = iota
	ModeAsync
	ModeOneway
)

// String returns the mode's name, as used in metric labels.
func (m SendMode) String() string {
	switch m {
	case ModeSync:
		return "sync"
	case ModeAsync:
		return "async"
	case ModeOneway:
		return "oneway"
	default:
		return "unknown"
	}
}

// Send sends m synchronously: up to the policy's attempts within one time budget (the earlier of
// the context's deadline and the policy's send timeout), retrying on transport errors and the
// policy's retry codes, each retry avoiding the previous broker. Every attempt carries the same
// UNIQ_KEY (m's own if it has one) and feeds its own latency and outcome into the policy's fault
// table. m is not modified.
func (r *Runtime) Send(ctx context.Context, m *Message) (*SendResult, error) {
	return r.send(ctx, topicOf(m), m, ModeSync, r.now())
}

// topicOf is m's topic, the key of its route for the sends that take none; "" for nil, which
// validation refuses.
func topicOf(m *Message) string {
	if m == nil {
		return ""
	}
	return m.Topic
}

// SendRoute is Send by the route whose key is route (see Route.Key), which must publish to
// m.Topic: one of several routes to the same RocketMQ topic, each with its own brokers and policy.
func (r *Runtime) SendRoute(ctx context.Context, route string, m *Message) (*SendResult, error) {
	return r.send(ctx, route, m, ModeSync, r.now())
}

// SendAsync sends m on another goroutine and calls cb exactly once with the outcome, always on a
// goroutine other than the caller's. Under RocketMQ's presets it retries transport failures only
// (a broker's refusal goes to cb at once), as RocketMQ's async send does; under PresetDetour it
// retries as Send does. m must not be modified until cb runs. At most
// Options.MaxAsyncInFlight async sends run at once; beyond that SendAsync waits for a slot or for
// ctx to end.
func (r *Runtime) SendAsync(ctx context.Context, m *Message, cb func(*SendResult, error)) {
	// As in RocketMQ, time spent waiting for a slot counts against the send's budget.
	begin := r.now()
	if err := ValidateMessage(m); err != nil {
		go cb(nil, err)
		return
	}
	select {
	case r.asyncSlots <- struct{}{}:
	case <-ctx.Done():
		err := ctx.Err()
		go cb(nil, err)
		return
	}
	go func() {
		defer func() { <-r.asyncSlots }()
		cb(r.send(ctx, topicOf(m), m, ModeAsync, begin))
	}()
}

// SendOneway writes m to a broker without waiting for an answer; a broker's refusal is never seen.
// Under RocketMQ's presets it makes one attempt and sees what RocketMQ's oneway send sees: under
// PresetRocketMQ5 and PresetDisabled no transport failure (the message is dropped and nil
// returned, as RocketMQ 5.x neither waits for the connection nor for the write), under
// PresetRocketMQ4 only a connection that cannot be made. Under PresetDetour a failed write is an
// error and is retried on another broker within the same budget.
func (r *Runtime) SendOneway(ctx context.Context, m *Message) error {
	_, err := r.send(ctx, topicOf(m), m, ModeOneway, r.now())
	return err
}

// Delivery says how one message asks to be sent: to its message group's queue (Group), to be
// delivered not before a time (At), or, with neither, plainly. The zero Delivery is a plain send.
type Delivery struct {
	// Group is the message group (FIFO); see SendOrderedRoute.
	Group string
	// At is the time before which the message is not delivered; see SendTimedRoute.
	At time.Time
}

// ErrGroupWithDeliveryTime is the rule a Delivery with both a message group and a delivery time
// breaks: a group's messages are stored at once, in the order they are sent.
var ErrGroupWithDeliveryTime = errors.New("message group with a delivery time")

// SendRouteAs sends m by route as d asks: SendOrderedRoute for a message group, SendTimedRoute for
// a delivery time, SendRoute otherwise. It is the one place that tells the kinds apart, so a
// front door hands over what a request asked for and gets the same send whichever door it came
// through. A Delivery with both a group and a time is a *ValidationError
// (ErrGroupWithDeliveryTime), refused before anything else is checked.
func (r *Runtime) SendRouteAs(ctx context.Context, route string, m *Message, d Delivery) (*SendResult, error) {
	switch {
	case d.Group != "" && !d.At.IsZero():
		return nil, &ValidationError{Code: CodeMessageIllegal, Rule: ErrGroupWithDeliveryTime,
			Message: "a message group's message is sent at once: set a group or a delivery time, not both"}
	case d.Group != "":
		return r.SendOrderedRoute(ctx, route, m, d.Group)
	case !d.At.IsZero():
		return r.SendTimedRoute(ctx, route, m, d.At)
	}
	return r.SendRoute(ctx, route, m)
}
