package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// Message is the message type the runtime sends.
type Message = remoting.Message

// Header values RocketMQ's Java producer puts into every send.
const (
	defaultTopicKey       = "TBW102"
	defaultTopicQueueNums = 4
)

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

// messageRefusal is one broker's refusal of the message itself (MESSAGE_ILLEGAL), kept until the
// send ends: if another broker then stores the message, the refusing broker is at fault.
type messageRefusal struct {
	err     *BrokerError
	latency time.Duration
}

// refusedBy reports whether broker is among the refusals.
func refusedBy(refusals []messageRefusal, broker string) bool {
	for _, rf := range refusals {
		if rf.err.Broker == broker {
			return true
		}
	}
	return false
}

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

// Send sends m synchronously: up to the policy's attempts within one time budget (the earlier of
// the context's deadline and the policy's send timeout), retrying on transport errors and the
// policy's retry codes, each retry avoiding the previous broker. Every attempt carries the same
// UNIQ_KEY (m's own if it has one) and feeds its own latency and outcome into the policy's fault
// table. m is not modified.
func (r *Runtime) Send(ctx context.Context, m *Message) (*SendResult, error) {
	return r.send(ctx, topicOf(m), m, ModeSync, time.Now())
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
	return r.send(ctx, route, m, ModeSync, time.Now())
}

// SendAsync sends m on another goroutine and calls cb exactly once with the outcome, always on a
// goroutine other than the caller's. Under RocketMQ's presets it retries transport failures only
// (a broker's refusal goes to cb at once), as RocketMQ's async send does; under PresetDetour it
// retries as Send does. m must not be modified until cb runs. At most
// Options.MaxAsyncInFlight async sends run at once; beyond that SendAsync waits for a slot or for
// ctx to end.
func (r *Runtime) SendAsync(ctx context.Context, m *Message, cb func(*SendResult, error)) {
	// As in RocketMQ, time spent waiting for a slot counts against the send's budget.
	begin := time.Now()
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
	_, err := r.send(ctx, topicOf(m), m, ModeOneway, time.Now())
	return err
}

// sendProperties encodes m's properties for the wire with a UNIQ_KEY and RocketMQ's WAIT=true
// default added when m lacks them, without touching m. It sizes the result first so that the
// encoding costs one allocation.
func sendProperties(m *Message) (props, uniq string) {
	const uniqLen = 32
	uniq = m.Properties[remoting.PropertyUniqKey]
	wait := m.Properties[remoting.PropertyWaitStoreMsgOK] == ""
	n := 0
	if m.Tags != "" {
		n += len(remoting.PropertyTags) + len(m.Tags) + 2
	}
	if m.Keys != "" {
		n += len(remoting.PropertyKeys) + len(m.Keys) + 2
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	if uniq == "" {
		n += len(remoting.PropertyUniqKey) + uniqLen + 2
	}
	if wait {
		n += len(remoting.PropertyWaitStoreMsgOK) + len("true") + 2
	}
	var b strings.Builder
	b.Grow(n)
	put := func(k, v string) {
		b.WriteString(k)
		b.WriteByte(remoting.NameValueSeparator)
		b.WriteString(v)
		b.WriteByte(remoting.PropertySeparator)
	}
	// Tags and Keys win over the same keys in Properties, as in Message.AppendProperties.
	if m.Tags != "" {
		put(remoting.PropertyTags, m.Tags)
	}
	if m.Keys != "" {
		put(remoting.PropertyKeys, m.Keys)
	}
	for k, v := range m.Properties {
		if v == "" || (k == remoting.PropertyTags && m.Tags != "") || (k == remoting.PropertyKeys && m.Keys != "") {
			continue
		}
		put(k, v)
	}
	if wait {
		put(remoting.PropertyWaitStoreMsgOK, "true")
	}
	if uniq == "" {
		var id [uniqLen]byte
		b.WriteString(remoting.PropertyUniqKey)
		b.WriteByte(remoting.NameValueSeparator)
		start := b.Len()
		b.Write(remoting.AppendUniqID(id[:0]))
		end := b.Len()
		b.WriteByte(remoting.PropertySeparator)
		props = b.String()
		return props, props[start:end]
	}
	return b.String(), uniq
}

// sendStatus maps a stored-class response code to RocketMQ's SendStatus name.
func sendStatus(code int16) (string, bool) {
	switch code {
	case remoting.Success:
		return StatusSendOK, true
	case remoting.FlushDiskTimeout:
		return StatusFlushDiskTimeout, true
	case remoting.FlushSlaveTimeout:
		return StatusFlushSlaveTimeout, true
	case remoting.SlaveNotAvailable:
		return StatusSlaveNotAvailable, true
	}
	return "", false
}

// send is the retry loop shared by all modes: RocketMQ's sendDefaultImpl with the per-attempt cap
// of 5.3.3. Under RocketMQ's presets each mode keeps RocketMQ's rules (see retryRules); under
// PresetDetour every mode retries as a sync send does.
func (r *Runtime) send(ctx context.Context, key string, m *Message, mode SendMode, begin time.Time) (*SendResult, error) {
	if err := ValidateMessage(m); err != nil {
		return nil, err
	}
	if r.closed.Load() {
		return nil, ErrClosed
	}
	rt := r.state.Load().index.get(key)
	if rt != nil && rt.topic != m.Topic {
		// A route publishes to one topic: sending another topic's message by it would put the
		// message where its route's owner did not ask for it.
		rt = nil
	}
	if rt == nil || len(rt.queues) == 0 {
		err := &NoRouteError{Topic: m.Topic}
		r.metrics.SendDone(m.Topic, mode, 0, time.Since(begin), err)
		return nil, err
	}
	pol := &rt.policy.Policy
	rules := retryRulesOf(pol, mode)
	attempts := rules.attempts
	// One context carries the whole budget; attempts that need a tighter cap derive from it. A
	// caller's deadline that comes first already is that budget.
	deadline := begin.Add(pol.Retry.SendTimeout)
	sendCtx := ctx
	if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
		deadline = d
	} else {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}

	props, uniq := sendProperties(m)
	if err := checkPropertiesSize(props); err != nil {
		return nil, err
	}
	// Compressed once: every attempt sends the same bytes, and m.Body stays as the caller gave it.
	body, sysFlag := sendBody(m.Body, r.compressAt)
	header := remoting.SendHeader{
		ProducerGroup:         r.group,
		Topic:                 m.Topic,
		DefaultTopic:          defaultTopicKey,
		DefaultTopicQueueNums: defaultTopicQueueNums,
		SysFlag:               sysFlag,
		Flag:                  m.Flag,
		Properties:            props,
	}
	tried := make([]string, 0, attempts)
	var (
		last     string
		lastErr  error
		stored   *SendResult
		timeout  bool
		refusals []messageRefusal
	)
	for i := 0; i < attempts; i++ {
		if err := ctx.Err(); err != nil {
			// Keep the attempt's own error (a remoting timeout already wraps the deadline).
			switch {
			case lastErr == nil:
				lastErr = err
			case !errors.Is(lastErr, err):
				lastErr = fmt.Errorf("%w: %w", err, lastErr)
			}
			timeout = errors.Is(err, context.DeadlineExceeded)
			break
		}
		now := time.Now()
		remaining := deadline.Sub(now)
		if remaining <= 0 {
			timeout = true
			break
		}
		if i > 0 {
			// Retries see state pushed since the send began (a pod that just turned NotReady).
			if cur := r.state.Load().index.get(key); cur != nil && cur.topic == m.Topic && len(cur.queues) > 0 {
				rt = cur
			}
		}
		q := pickAttempt(rt, rules, last, i, refusals)
		if q == nil {
			break // every broker of the route refused the message
		}
		b := q.b
		tried = append(tried, b.name)
		last = b.name

		// The attempt's latency runs from before its cap does, so a capped attempt measures at
		// least the cap, and includes building the request, as RocketMQ's does.
		start := time.Now()
		attemptCtx := sendCtx
		var cancelAttempt context.CancelFunc
		if cap := pol.Retry.PerAttemptTimeout; cap > 0 && i+1 < attempts && remaining > cap {
			attemptCtx, cancelAttempt = context.WithTimeout(sendCtx, cap)
		}
		header.QueueID = q.id
		header.BrokerName = b.name
		header.BornTimestamp = now.UnixMilli()
		req := remoting.NewSendRequest(&header, body, true)

		var (
			resp *remoting.Command
			err  error
		)
		if mode == ModeOneway {
			err = r.client.InvokeOneway(attemptCtx, b.addr, req)
		} else {
			resp, err = r.client.Invoke(attemptCtx, b.addr, req)
		}
		latency := time.Since(start)
		if cancelAttempt != nil {
			cancelAttempt()
		}

		if err != nil {
			if ctxErr := ctx.Err(); errors.Is(ctxErr, context.Canceled) {
				// The caller gave up (RocketMQ's InterruptedException): the broker is not to blame
				// beyond the latency it showed, and there is no retry.
				r.updateFault(rt, b, latency, fault.Interrupted)
				lastErr = fmt.Errorf("%w: %w", ctxErr, err)
				break
			}
			if mode != ModeOneway || !rules.onewayUnseen(err) {
				if rules.async {
					// The async callback's operationFail records (isolation, reachable); a
					// connection that could not be made fails invokeAsync itself, which marks it
					// unreachable.
					r.recordAttempt(rt, b, latency, fault.TransportError, true, !errors.Is(err, remoting.ErrConnect))
				} else {
					r.updateFault(rt, b, latency, fault.TransportError)
				}
				lastErr = err
				if i+1 < attempts {
					r.metrics.Retried(m.Topic, b.name)
				}
				continue
			}
			// RocketMQ hands a oneway request to its channel and returns: a failure it does not
			// wait for goes unseen, and the attempt counts as a success (below).
		}
		if mode == ModeOneway {
			r.updateFault(rt, b, latency, fault.Success)
			res := &SendResult{MsgID: uniq, Topic: m.Topic, Broker: b.name, QueueID: int(q.id),
				Attempts: i + 1, BrokersTried: tried, Latency: time.Since(begin)}
			r.metrics.SendDone(m.Topic, mode, i+1, res.Latency, nil)
			return res, nil
		}
		status, ok := sendStatus(resp.Code)
		if !ok {
			be := &BrokerError{Code: resp.Code, Remark: resp.Remark, Broker: b.name, Addr: b.addr}
			lastErr = be
			if resp.Code == remoting.MessageIllegal {
				refusals = append(refusals, messageRefusal{err: be, latency: latency})
			}
			if resp.Code == remoting.TopicNotExist || resp.Code == remoting.InvalidParameter {
				// The broker lacks the topic or the queue: a route from name servers is stale (a
				// topic deleted or shrunk with mqadmin); ask for it now rather than at the next
				// refresh. A no-op for static routes.
				r.RefreshRoute(key)
			}
			if rules.async {
				// RocketMQ's async callback records a refusal as isolating but reachable and hands
				// it to the caller without a retry.
				r.recordAttempt(rt, b, latency, fault.BrokerError, true, true)
				break
			}
			if rules.retryRefusedMessage && resp.Code == remoting.MessageIllegal {
				// The message or this broker's store is at fault, and only another broker can
				// tell which: until one stores the message, the refusal isolates nothing.
				r.updateFault(rt, b, latency, fault.ClientError)
				if !rt.hasBrokerBesides(refusals) {
					break
				}
				if i+1 < attempts {
					r.metrics.Retried(m.Topic, b.name)
				}
				continue
			}
			r.updateFault(rt, b, latency, fault.BrokerError)
			if pol.retries(resp.Code) {
				if i+1 < attempts {
					r.metrics.Retried(m.Topic, b.name)
				}
				continue
			}
			break
		}
		sr, perr := remoting.ParseSendResponse(resp)
		if perr != nil {
			// A stored-class code with an unreadable header: the broker answered but broke the
			// protocol. Treat it as a broken stream and try elsewhere; the UNIQ_KEY lets consumers
			// drop a duplicate if it was stored after all. RocketMQ's async callback fails such a
			// response like a refusal, without a retry.
			lastErr = fmt.Errorf("%w: %w", remoting.ErrFrame, perr)
			if rules.async {
				r.recordAttempt(rt, b, latency, fault.TransportError, true, true)
				break
			}
			r.updateFault(rt, b, latency, fault.TransportError)
			if i+1 < attempts {
				r.metrics.Retried(m.Topic, b.name)
			}
			continue
		}
		r.updateFault(rt, b, latency, fault.Success)
		stored = &SendResult{
			MsgID: uniq, OffsetMsgID: sr.MsgID, Topic: m.Topic, Broker: b.name, QueueID: int(sr.QueueID),
			QueueOffset: sr.QueueOffset, Attempts: i + 1, BrokersTried: tried, Latency: time.Since(begin),
			Status: status,
		}
		if status == StatusSendOK || !pol.Retry.RetryAnotherBrokerWhenNotStoreOK || !rules.retryNotStoreOK {
			break
		}
		if i+1 < attempts {
			r.metrics.Retried(m.Topic, b.name)
		}
	}
	if stored != nil {
		if rules.retryRefusedMessage {
			blameRefusals(rt, refusals)
		}
		r.metrics.SendDone(m.Topic, mode, stored.Attempts, stored.Latency, nil)
		return stored, nil
	}
	if lastErr == nil {
		lastErr = ErrSendTimeout
	}
	timeout = timeout || errors.Is(lastErr, context.DeadlineExceeded)
	// Refusals that ended the send condemn the message; a send that ran out of time or was given
	// up after them has not heard every broker it could have tried.
	refused := len(tried) > 0 && len(refusals) == len(tried) && !timeout && !errors.Is(lastErr, context.Canceled)
	if refused && len(refusals) > 1 {
		lastErr = refusedError(refusals)
	}
	err := &SendError{Topic: m.Topic, Attempts: len(tried), MaxAttempts: attempts, Elapsed: time.Since(begin),
		BrokersTried: tried, Timeout: timeout, MessageRefused: refused, Err: lastErr}
	r.metrics.SendDone(m.Topic, mode, len(tried), err.Elapsed, err)
	return nil, err
}

// updateFault records one attempt in the route's policy table (RocketMQ's updateFaultItem after
// every attempt, with that attempt's own latency).
func (r *Runtime) updateFault(rt *route, b *brokerSlot, latency time.Duration, o fault.Outcome) {
	rt.policy.tol.Update(b.name, latency, o)
	r.metrics.AttemptDone(rt.policy.Name, b.name, latency, o)
}

// pickAttempt selects the queue of attempt i (0 for the first). Under PresetDetour a retry after
// MESSAGE_ILLEGAL refusals avoids every broker that refused the message (nil when none is left).
func pickAttempt(rt *route, rules retryRules, last string, i int, refusals []messageRefusal) *queueEntry {
	if rules.retryRefusedMessage && len(refusals) > 0 {
		return rt.pickAvoiding(last, refusals)
	}
	return rt.pick(last, i > 0 && rules.resetOnRetry)
}

// blameRefusals isolates the brokers that refused as MESSAGE_ILLEGAL a message another broker
// has just stored (fault.Tolerance.RefusedValidMessage): the message was fine, so their stores
// are at fault, and every message sent their way would be refused alike.
func blameRefusals(rt *route, refusals []messageRefusal) {
	for _, rf := range refusals {
		rt.policy.tol.RefusedValidMessage(rf.err.Broker, rf.latency)
	}
}

// refusedError is the cause of a send every tried broker refused as MESSAGE_ILLEGAL.
func refusedError(refusals []messageRefusal) *MessageRefusedError {
	e := &MessageRefusedError{Refusals: make([]*BrokerError, len(refusals))}
	for i, rf := range refusals {
		e.Refusals[i] = rf.err
	}
	return e
}

// recordAttempt records an attempt with the arguments RocketMQ passes to updateFaultItem at a call
// site whose flags differ from the sync path's (the async callbacks); o is reported to metrics.
func (r *Runtime) recordAttempt(rt *route, b *brokerSlot, latency time.Duration, o fault.Outcome, isolation, reachable bool) {
	rt.policy.tol.UpdateFaultItem(b.name, latency, isolation, reachable)
	r.metrics.AttemptDone(rt.policy.Name, b.name, latency, o)
}

// retryRules are the rules one send follows, by mode and preset.
type retryRules struct {
	// attempts is the most attempts the send makes.
	attempts int
	// resetOnRetry: a retry resets the selection index (RocketMQ 5.x's sync retries) or, under
	// PresetDetour, starts from a random queue.
	resetOnRetry bool
	// async: RocketMQ's async rules: only transport failures are retried; refusals and broken
	// responses end the send; the callbacks' fault flags apply.
	async bool
	// retryNotStoreOK: RetryAnotherBrokerWhenNotStoreOK applies (RocketMQ: sync sends only).
	retryNotStoreOK bool
	// retryRefusedMessage (PresetDetour): a MESSAGE_ILLEGAL refusal isolates nothing and is
	// retried on a broker that has not refused the message, and a broker whose refusal another
	// broker's store then disproves is isolated (reason RefusesValidMessages). RocketMQ's
	// producer neither retries MESSAGE_ILLEGAL nor tells the message's fault from the broker's:
	// it isolates the broker for every refusal.
	retryRefusedMessage bool
	// onewayUnseen reports the oneway failures the preset's RocketMQ line never sees: RocketMQ
	// writes a oneway request without waiting for the write, and 5.x connects without waiting
	// either, so a oneway send to an unreachable broker returns as sent (4.x still fails when the
	// connection cannot be made). Under PresetDetour every failure is seen.
	onewayUnseen func(error) bool
}

// retryRulesOf returns the rules of a send in mode under pol. RocketMQ's sendDefaultImpl makes
// 1 + retryTimesWhenSendFailed attempts for a sync send and one for async and oneway sends; an
// async send retries inside its callback (up to retryTimesWhenSendAsyncFailed more times) on
// transport failures only, without resetting the index; a oneway send is never retried.
// PresetDetour retries every mode as a sync send.
func retryRulesOf(pol *Policy, mode SendMode) retryRules {
	rr := retryRules{attempts: pol.Retry.Attempts, resetOnRetry: true, retryNotStoreOK: true,
		onewayUnseen: func(error) bool { return false }}
	if !pol.Preset.rocketMQ() {
		rr.retryRefusedMessage = true
		return rr
	}
	switch mode {
	case ModeOneway:
		rr.attempts = 1
		rr.retryNotStoreOK = false
		rr.onewayUnseen = func(err error) bool { return pol.Preset != PresetRocketMQ4 || !errors.Is(err, remoting.ErrConnect) }
	case ModeAsync:
		rr.async = true
		rr.resetOnRetry = false
		rr.retryNotStoreOK = false
	}
	return rr
}
