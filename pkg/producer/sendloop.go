package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// The send loop is RocketMQ's DefaultMQProducerImpl.sendDefaultImpl (with the per-attempt deadline
// of 5.3.3) as named steps:
//
//	prepare    once per send: the route, the budget, the request's header and body
//	nextQueue  per attempt: the queue's selection and the budget check, in RocketMQ's order
//	attempt    the request to the queue's broker, timed, under its deadline (attemptDeadline)
//	classify   what came back: interrupted, transport failure, sent oneway, stored, broken, refused
//	settle     the fault table's record of it, and whether the send goes on to another attempt
//	finish     the result or the final error, and the send's metrics
//
// How sync, async and oneway sends differ is retryRules' alone (see retryRulesOf); the steps
// consult its fields and never the mode.

// sendCall is one send's state across its attempts. It lives on send's stack, and holds no
// pointer to the message: escape analysis follows every pointer it holds out of the loop, and the
// caller's message would be moved to the heap for it.
type sendCall struct {
	r     *Runtime
	ctx   context.Context
	key   string
	topic string
	// metric is the topic label the send is counted under (route.metricTopic).
	metric string
	mode   SendMode
	begin  time.Time

	rt    *route
	pol   *Policy
	rules retryRules
	// sendCtx carries the whole budget, which ends at deadline; cancel releases it.
	sendCtx  context.Context
	cancel   context.CancelFunc
	deadline time.Time

	header remoting.SendHeader
	body   []byte
	uniq   string
	// fixed, when set, is the one queue every attempt goes to (an ordered send's).
	fixed *queueEntry
	// noHedge keeps the send from being hedged (a transaction's half message; see hedgeDelay).
	noHedge bool

	// now and remaining are the current attempt's start and the budget left at it.
	now       time.Time
	remaining time.Duration

	tried    []string
	last     string
	lastErr  error
	result   *SendResult
	timeout  bool
	refusals []messageRefusal
	// disconnected are the broker addresses whose connection failed in this send (see
	// connectionFailed), which its later attempts avoid while another broker is left
	// (rules.avoidDisconnected).
	disconnected []string
	// refreshed, when set, is closed once the route's name servers have been asked again after a
	// connection to a routed address was refused (see awaitRefresh).
	refreshed <-chan struct{}
}

// send is the retry loop shared by all modes: RocketMQ's sendDefaultImpl with the per-attempt
// deadline of 5.3.3. Under RocketMQ's presets each mode keeps RocketMQ's rules (see retryRules);
// under PresetDetour every mode retries as a sync send does.
func (r *Runtime) send(ctx context.Context, key string, m *Message, mode SendMode, begin time.Time) (*SendResult, error) {
	var c sendCall
	if err := c.open(r, ctx, key, m, mode, begin); err != nil {
		return nil, err
	}
	return c.run()
}

// open is the prologue every send of one message shares, begun at begin on the runtime's clock:
// the message checked by RocketMQ's rules, its route by key, and the request prepared (see
// prepare). A send that carries more (a message group, a delivery time, a transaction's marks)
// adds it with addProperties before run.
func (c *sendCall) open(r *Runtime, ctx context.Context, key string, m *Message, mode SendMode, begin time.Time) error {
	if err := ValidateMessage(m); err != nil {
		return err
	}
	rt, err := r.openRoute(key, m.Topic, mode, begin)
	if err != nil {
		return err
	}
	*c = sendCall{r: r, ctx: ctx, key: key, topic: m.Topic, metric: rt.metricTopic, mode: mode, begin: begin}
	return c.prepare(rt, m)
}

// addProperties appends encoded properties to the prepared request, within RocketMQ's bound on
// their size; a send that breaks it is released and ends before any attempt.
func (c *sendCall) addProperties(props string) error {
	c.header.Properties += props
	if err := checkPropertiesSize(len(c.header.Properties)); err != nil {
		c.release()
		return err
	}
	return nil
}

// run makes the attempts of a prepared send and finishes it.
func (c *sendCall) run() (*SendResult, error) {
	defer c.release()
	for i := 0; i < c.rules.attempts; i++ {
		q := c.nextQueue(i)
		if q == nil {
			break
		}
		q, res := c.attempt(i, q)
		if !c.settle(i, q, &res, c.classify(&res)) {
			break
		}
		if i+1 < c.rules.attempts {
			c.r.metrics.Retried(c.metric, q.b.name)
		}
	}
	return c.finish()
}

// routeFor is the route a send by key uses, or nil when it has none, has no write queue, or
// publishes to a topic other than topic: sending another topic's message by it would put the
// message where its route's owner did not ask for it.
func (r *Runtime) routeFor(key, topic string) *route {
	rt := r.state.Load().index.get(key)
	if rt == nil || rt.topic != topic || len(rt.queues) == 0 {
		return nil
	}
	return rt
}

// prepare sets up what every attempt shares: the rules, the budget and the request, whose
// properties and (compressed) body are built once, so every attempt sends the same bytes and
// m stays as the caller gave it.
func (c *sendCall) prepare(rt *route, m *Message) error {
	c.rt = rt
	c.pol = &rt.policy.Policy
	c.rules = retryRulesOf(c.pol, c.mode)
	if c.r.tweakRules != nil {
		c.rules = c.r.tweakRules(c.rules)
	}
	props, uniq := remoting.EncodeSendProperties(m)
	if err := checkPropertiesSize(len(props)); err != nil {
		return err
	}
	c.uniq = uniq
	var sysFlag int32
	c.body, sysFlag = sendBody(m.Body, c.r.compressAtFor(c.ctx))
	c.header = remoting.SendHeader{
		ProducerGroup:         c.r.group,
		Topic:                 c.topic,
		DefaultTopic:          defaultTopicKey,
		DefaultTopicQueueNums: defaultTopicQueueNums,
		SysFlag:               sysFlag,
		Flag:                  m.Flag,
		Properties:            props,
	}
	c.startBudget()
	return nil
}

// startBudget starts the send's time budget and its record of attempts.
func (c *sendCall) startBudget() {
	// One context carries the whole budget; attempts under a deadline of their own derive from it.
	// A caller's deadline that comes first already is that budget.
	c.deadline = c.begin.Add(c.pol.Retry.SendTimeout)
	c.sendCtx = c.ctx
	if d, ok := c.ctx.Deadline(); ok && !d.After(c.deadline) {
		c.deadline = d
	} else {
		c.sendCtx, c.cancel = context.WithDeadline(c.ctx, c.deadline)
	}
	c.tried = make([]string, 0, c.rules.attempts)
}

// release ends the budget's context.
func (c *sendCall) release() {
	if c.cancel != nil {
		c.cancel()
	}
}

// nextQueue starts attempt i: it selects the attempt's queue and checks the budget. It returns
// nil when the send ends before the attempt: the budget is spent, the caller gave up, or every
// broker of the route refused the message.
//
// Under RocketMQ's presets the selection comes first, as in sendDefaultImpl: a send whose budget
// ran out still selects the queue of the attempt it will not make, which moves the index (and,
// under RocketMQ 4.x, may drop the fault record of a broker the route does not use) exactly as
// RocketMQ's does. PresetDetour checks the budget first: a selection for an attempt never made
// would only move the index every sender shares and touch the fault table for nothing.
func (c *sendCall) nextQueue(i int) *queueEntry {
	if c.rules.selectBeforeBudget {
		q := c.selectQueueOf(i)
		if q == nil || !c.budgetLeft() {
			return nil
		}
		return q
	}
	if !c.budgetLeft() {
		return nil
	}
	return c.selectQueueOf(i)
}

// selectQueueOf selects the queue of attempt i on the route as it is now: retries see state
// pushed since the send began.
func (c *sendCall) selectQueueOf(i int) *queueEntry {
	if i > 0 {
		c.followRoute()
	}
	return c.selectQueue(i)
}

// budgetLeft reports whether the send may make another attempt, and notes why not: the caller's
// context ended, or the budget ran out.
func (c *sendCall) budgetLeft() bool {
	if err := c.ctx.Err(); err != nil {
		// Keep the attempt's own error (a remoting timeout already wraps the deadline).
		switch {
		case c.lastErr == nil:
			c.lastErr = err
		case !errors.Is(c.lastErr, err):
			c.lastErr = fmt.Errorf("%w: %w", err, c.lastErr)
		}
		c.timeout = errors.Is(err, context.DeadlineExceeded)
		return false
	}
	c.now = c.r.now()
	c.remaining = c.deadline.Sub(c.now)
	if c.spent() {
		c.timeout = true
		return false
	}
	return true
}

// spent reports whether the budget is spent at c.now. RocketMQ compares whole milliseconds of the
// wall clock and gives up only once more than the budget has passed (timeout < costTime), so an
// attempt can start in the budget's last millisecond with nothing left, and fail at once as a
// timeout; its presets do the same. PresetDetour gives up as soon as nothing is left.
func (c *sendCall) spent() bool {
	if c.rules.budgetInMillis {
		return c.now.UnixMilli()-c.begin.UnixMilli() > c.deadline.Sub(c.begin).Milliseconds()
	}
	return c.remaining <= 0
}

// followRoute lets a retry see state pushed since the send began (a pod that just turned
// NotReady); a route that lost its queues meanwhile is not followed.
func (c *sendCall) followRoute() {
	if cur := c.r.routeFor(c.key, c.topic); cur != nil {
		c.rt = cur
	}
}

// selectQueue picks the queue of attempt i (0 for the first). Under PresetDetour a retry after
// MESSAGE_ILLEGAL refusals avoids every broker that refused the message (nil when none is left),
// and a retry after a connection failed goes back to that broker only when no other is left.
func (c *sendCall) selectQueue(i int) *queueEntry {
	if c.fixed != nil {
		return c.fixedQueue()
	}
	if (c.rules.retryRefusedMessage && len(c.refusals) > 0) || len(c.disconnected) > 0 {
		q := c.rt.pickAvoiding(c.last, c.refusals, c.disconnected)
		if q != nil && c.refreshed != nil && slices.Contains(c.disconnected, q.b.addr) && c.awaitRoute() {
			q = c.rt.pickAvoiding(c.last, c.refusals, c.disconnected)
		}
		return q
	}
	return c.rt.pick(c.last, i > 0 && c.rules.resetOnRetry)
}

// maxRouteWait bounds how long a send waits for its route's name servers before it tries again
// an address that refused it.
const maxRouteWait = time.Second

// awaitRoute waits, when only addresses that refused the send's connection are left, for the
// route refresh asked for after the refusal (at most maxRouteWait and the budget), then follows
// the route: a broker that restarted at a new address has registered it with the name servers
// by the time its old one refuses connections, and the send goes there instead. It reports
// whether the send may go on (false: the budget ran out or the caller gave up meanwhile).
func (c *sendCall) awaitRoute() bool {
	wait := min(maxRouteWait, c.remaining)
	t := time.NewTimer(wait)
	select {
	case <-c.refreshed:
	case <-t.C:
	case <-c.sendCtx.Done():
	}
	t.Stop()
	c.refreshed = nil
	if !c.budgetLeft() {
		return false
	}
	c.followRoute()
	return true
}

// attemptResult is what one attempt came back with.
type attemptResult struct {
	resp    *remoting.Command
	err     error
	latency time.Duration
	// sent and status are the parsed response of a stored-class code; parseErr says it was
	// unreadable.
	sent     remoting.SendResponse
	status   string
	parseErr error
	// adaptiveDeadline says the attempt ran under an adaptive deadline shorter than the policy's
	// per-attempt timeout (see attemptDeadline).
	adaptiveDeadline bool
	// othersEnded says another attempt to the broker ended while this one waited
	// (fault.Entry.EndedSince): the broker served others and left this one unanswered.
	othersEnded bool
}

// attempt sends the request of attempt i to q and times it. The latency runs from before the
// attempt's deadline does, so an attempt cut at its deadline measures at least the deadline, and
// includes building the request, as RocketMQ's does. An attempt armed for a hedge (hedgeDelay)
// may be answered by its hedge: attempt returns the queue whose answer it returns.
func (c *sendCall) attempt(i int, q *queueEntry) (*queueEntry, attemptResult) {
	b := q.b
	c.tried = append(c.tried, b.name)
	c.last = b.name
	start := c.r.now()
	if b.addr == "" {
		// RocketMQ's sendKernelImpl finds no address for the broker and fails the attempt as
		// an MQClientException before any I/O.
		return q, attemptResult{err: &BrokerNotExistError{Broker: b.name}, latency: c.r.now().Sub(start)}
	}
	attemptCtx := c.sendCtx
	var cancel context.CancelFunc
	var res attemptResult
	d, cut := c.attemptDeadline(i, b)
	if d > 0 {
		attemptCtx, cancel = context.WithTimeout(c.sendCtx, d)
		res.adaptiveDeadline = cut
	}
	c.header.QueueID = q.id
	c.header.BrokerName = b.name
	c.header.BornTimestamp = c.now.UnixMilli()
	req := remoting.NewSendRequest(&c.header, c.body, true)
	if delay := c.hedgeDelay(i, b, d); delay > 0 {
		leg := c.raceAttempt(q, req, attemptCtx, cancel, cut, delay)
		return leg.q, leg.res
	}
	mark := b.entry.AttemptStarted()
	if c.rules.oneway {
		res.err = c.r.wire.InvokeOneway(attemptCtx, b.addr, req)
	} else {
		res.resp, res.err = c.r.wire.Invoke(attemptCtx, b.addr, req)
	}
	// Only a failed attempt asks: a stalled one the broker left unanswered while it served others.
	res.othersEnded = res.err != nil && b.entry.EndedSince(mark)
	b.entry.AttemptEnded()
	res.latency = c.r.now().Sub(start)
	if cancel != nil {
		cancel()
	}
	return q, res
}

// attemptDeadline is how long attempt i to b may wait for an answer, 0 for the send's own budget,
// and whether an adaptive deadline cuts it: fault.Entry.AttemptDeadline decides, from the
// policy's per-attempt timeout and AdaptivePerAttempt.
func (c *sendCall) attemptDeadline(i int, b *brokerSlot) (time.Duration, bool) {
	r := &c.pol.Retry
	return b.entry.AttemptDeadline(r.PerAttemptTimeout, r.AdaptivePerAttempt, i+1 >= c.rules.attempts, c.remaining)
}

// attemptClass is what an attempt came to.
type attemptClass uint8

const (
	// attemptInterrupted: the caller gave up while the attempt ran.
	attemptInterrupted attemptClass = iota
	// attemptTransportFailed: no answer (connection, write, read or timeout).
	attemptTransportFailed
	// attemptSentOneway: a oneway request was written, or failed in a way its RocketMQ line
	// never sees.
	attemptSentOneway
	// attemptStored: the broker stored the message (SEND_OK or a "stored but" status).
	attemptStored
	// attemptBroken: a stored-class code with an unreadable header.
	attemptBroken
	// attemptRefused: the broker answered with a code that does not mean stored.
	attemptRefused
	// attemptNoBroker: the broker has no address (RocketMQ 4.x's last-resort selection).
	attemptNoBroker
)

// isBrokerNotExist reports whether err is an attempt's failure for want of an address.
func isBrokerNotExist(err error) bool {
	_, ok := err.(*BrokerNotExistError)
	return ok
}

// classify says what res came to, parsing a stored-class response into res.
func (c *sendCall) classify(res *attemptResult) attemptClass {
	return classifyAttempt(c.ctx, &c.rules, res)
}

// classifyAttempt says what res, an attempt of a send under rules whose caller's context is ctx,
// came to, parsing a stored-class response into res.
func classifyAttempt(ctx context.Context, rules *retryRules, res *attemptResult) attemptClass {
	switch {
	case res.err != nil && errors.Is(ctx.Err(), context.Canceled):
		return attemptInterrupted
	case isBrokerNotExist(res.err):
		return attemptNoBroker
	case res.err != nil && !rules.unseen(res.err):
		return attemptTransportFailed
	case rules.oneway:
		return attemptSentOneway
	}
	status, ok := sendStatus(res.resp.Code)
	if !ok {
		return attemptRefused
	}
	res.status = status
	if res.sent, res.parseErr = remoting.ParseSendResponse(res.resp); res.parseErr != nil {
		return attemptBroken
	}
	return attemptStored
}

// settle records attempt i's outcome in the fault table, keeps its result or error, and reports
// whether the send goes on to another attempt.
func (c *sendCall) settle(i int, q *queueEntry, res *attemptResult, class attemptClass) bool {
	b := q.b
	switch class {
	case attemptInterrupted:
		// RocketMQ's InterruptedException: the broker is not to blame beyond the latency it
		// showed, and there is no retry.
		c.r.updateFault(c.rt, b, res.latency, fault.Interrupted)
		c.lastErr = fmt.Errorf("%w: %w", c.ctx.Err(), res.err)
		return false
	case attemptTransportFailed:
		if c.cutByAdaptiveDeadline(res) {
			// The broker has not answered within a few times its usual latency: a first sign
			// (perhaps a pause of the kind a healthy broker takes) holds it out as stalled (under
			// PresetDetour until its probation ends), a silence that goes on counts as a failure
			// (fault.Tolerance.Stalled), and the send goes on elsewhere.
			c.r.stalledFault(c.rt, b, res.latency, res.othersEnded)
			c.lastErr = res.err
			return true
		}
		// A connection that could not be made fails RocketMQ's invokeAsync itself, which marks
		// the broker unreachable.
		c.recordFailure(b, res.latency, fault.TransportError, !errors.Is(res.err, remoting.ErrConnect))
		c.lastErr = res.err
		if c.rules.avoidDisconnected && connectionFailed(res.err) {
			c.noteDisconnected(b)
		}
		return true
	case attemptSentOneway:
		c.r.updateFault(c.rt, b, res.latency, fault.Success)
		c.result = &SendResult{MsgID: c.uniq, Topic: c.topic, Broker: b.name, QueueID: int(q.id),
			Attempts: i + 1, BrokersTried: c.tried, Latency: c.r.now().Sub(c.begin)}
		return false
	case attemptNoBroker:
		// RocketMQ records the MQClientException (4.x: isolating) and tries again.
		c.r.updateFault(c.rt, b, res.latency, fault.ClientError)
		c.lastErr = res.err
		return true
	case attemptStored:
		return c.stored(i, q, res)
	case attemptBroken:
		// The broker answered but broke the protocol: a broken stream, tried elsewhere; the
		// UNIQ_KEY lets consumers drop a duplicate if it was stored after all.
		c.lastErr = fmt.Errorf("%w: %w", remoting.ErrFrame, res.parseErr)
		c.recordFailure(b, res.latency, fault.TransportError, true)
		return !c.rules.async
	}
	return c.refused(b, res)
}

// stored keeps the result of attempt i, which q's broker stored, and reports whether a "stored
// but" status sends the message to another broker as well.
func (c *sendCall) stored(i int, q *queueEntry, res *attemptResult) bool {
	c.r.updateFault(c.rt, q.b, res.latency, fault.Success)
	c.r.noteAccepted(q.b.addr, c.topic)
	c.result = &SendResult{
		MsgID: c.uniq, OffsetMsgID: res.sent.MsgID, Topic: c.topic, Broker: q.b.name, QueueID: int(res.sent.QueueID),
		QueueOffset: res.sent.QueueOffset, TransactionID: res.sent.TransactionID, Attempts: i + 1, BrokersTried: c.tried, Latency: c.r.now().Sub(c.begin),
		Status: res.status,
	}
	return res.status != StatusSendOK && c.pol.Retry.RetryAnotherBrokerWhenNotStoreOK && c.rules.retryNotStoreOK
}

// refused handles b's refusal of the message and reports whether it is retried.
func (c *sendCall) refused(b *brokerSlot, res *attemptResult) bool {
	code := res.resp.Code
	be := &BrokerError{Code: code, Remark: res.resp.Remark, Broker: b.name, Addr: b.addr}
	c.lastErr = be
	reqCode := remoting.SendMessageV2
	if c.header.Batch {
		reqCode = remoting.SendBatchMessage
	}
	if c.r.noteACL("", b.addr, b.name, c.topic, reqCode, res.resp) != remoting.NotACLRefusal && c.rules.credentialsAreCallers {
		// The broker refused who the send is from, not the message, and is as healthy as before:
		// nothing is isolated, and since every broker of a cluster holds the same users and
		// ACLs, another attempt would be refused alike.
		c.r.metrics.AttemptDone(c.rt.policy.Name, b.name, res.latency, fault.ClientError)
		return false
	}
	if code == remoting.MessageIllegal {
		c.refusals = append(c.refusals, messageRefusal{err: be, latency: res.latency})
	}
	if code == remoting.TopicNotExist || code == remoting.InvalidParameter {
		// The broker lacks the topic or the queue: a route from name servers is stale (a topic
		// deleted or shrunk with mqadmin); ask for it now rather than at the next refresh. A
		// no-op for static routes.
		c.r.RefreshRoute(c.key)
	}
	if c.rules.topicHold && code == remoting.TopicNotExist {
		// A probe cannot show the topic, only that the broker answers: the broker is held out
		// for this topic alone, until its timer or a check of the topic on it shows the topic
		// (see Runtime.checkTopicHolds), and stays in for every other topic.
		c.rt.policy.tol.RefusedTopic(b.name, c.topic)
		c.r.metrics.AttemptDone(c.rt.policy.Name, b.name, res.latency, fault.BrokerError)
		return c.pol.retries(code)
	}
	if c.rules.retryRefusedMessage && code == remoting.MessageIllegal {
		// The message or this broker's store is at fault, and only another broker can tell
		// which: until one stores the message, the refusal isolates nothing.
		c.r.updateFault(c.rt, b, res.latency, fault.ClientError)
		return c.rt.hasBrokerBesides(c.refusals)
	}
	if c.rules.busyIsPressure && busyRefusal(code, res.resp.Remark) {
		// The broker is alive and stores again once its queue drains: it is held out by its
		// timer, which a good probe does not end, and the message goes to another broker.
		c.r.busyFault(c.rt, b, res.latency)
		return true
	}
	c.recordFailure(b, res.latency, fault.BrokerError, true)
	return !c.rules.async && c.pol.retries(code)
}

// noteDisconnected records that b's address failed the send's connection and, when nothing
// answered there at all (refused, no route to it), asks the route's name servers again at once: a
// broker restarted in a new pod registers its new address with them, which the route would
// otherwise learn only at its next refresh.
func (c *sendCall) noteDisconnected(b *brokerSlot) {
	if !slices.Contains(c.disconnected, b.addr) {
		c.disconnected = append(c.disconnected, b.addr)
	}
	if c.refreshed == nil && errors.Is(c.lastErr, remoting.ErrConnect) {
		c.refreshed = c.r.awaitRefresh(c.key)
	}
}

// connectionFailed reports whether an attempt's transport error says the broker's connection does
// not work: it could not be made (remoting.ErrConnect: refused, no route, dial timeout) or was
// lost before the answer (remoting.ErrClosed: reset, closed by the broker, not read), as a
// restarting broker's does. A timeout (remoting.ErrTimeout) says the connection works and the
// broker is slow, and a broken frame says it answers; neither counts.
func connectionFailed(err error) bool {
	return errors.Is(err, remoting.ErrConnect) || errors.Is(err, remoting.ErrClosed)
}

// busyRefusal reports whether a broker refused a send because it is under pressure, not because
// of the message: SYSTEM_BUSY (its send queue waited too long, "[TIMEOUT_CLEAN_QUEUE]"; its page
// cache stayed locked, "[PCBUSY_CLEAN_QUEUE]" and "[REJECTREQUEST]"; or its send thread pool's
// queue is full) or SYSTEM_ERROR "[PC_SYNCHRONIZED]", which a broker answers when its page cache
// is busy as it puts the message.
func busyRefusal(code int16, remark string) bool {
	return code == remoting.SystemBusy || (code == remoting.SystemError && strings.HasPrefix(remark, "[PC_SYNCHRONIZED]"))
}

// cutByAdaptiveDeadline reports whether an attempt timed out on its adaptive deadline while the
// send's own budget runs on: a stalled attempt.
func (c *sendCall) cutByAdaptiveDeadline(res *attemptResult) bool {
	return res.adaptiveDeadline && errors.Is(res.err, remoting.ErrTimeout) && c.sendCtx.Err() == nil
}

// stalledFault records an attempt cut by its adaptive deadline (fault.Tolerance.Stalled) and
// reports it to metrics as the transport failure it was.
func (r *Runtime) stalledFault(rt *route, b *brokerSlot, latency time.Duration, othersEnded bool) {
	if othersEnded {
		// A request the broker left unanswered while it served others: a probe proves nothing
		// of it (fault.Tolerance.StalledAnswering).
		rt.policy.tol.StalledAnswering(b.name, latency)
	} else {
		rt.policy.tol.Stalled(b.name, latency)
	}
	r.metrics.AttemptDone(rt.policy.Name, b.name, latency, fault.TransportError)
	if m, ok := r.metrics.(StallMetrics); ok {
		m.AttemptStalled(rt.policy.Name, b.name, othersEnded)
	}
}

// busyFault records a busy refusal (fault.Tolerance.Busy) and reports the attempt to metrics.
func (r *Runtime) busyFault(rt *route, b *brokerSlot, latency time.Duration) {
	rt.policy.tol.Busy(b.name, latency)
	r.metrics.AttemptDone(rt.policy.Name, b.name, latency, fault.BrokerError)
}

// recordFailure records a failed attempt: by the fault table's rules for o, or, under RocketMQ's
// async rules, with the flags RocketMQ's async callback passes to updateFaultItem (isolating,
// reachable as given).
func (c *sendCall) recordFailure(b *brokerSlot, latency time.Duration, o fault.Outcome, reachable bool) {
	if c.rules.async {
		c.r.recordAttempt(c.rt, b, latency, o, true, reachable)
		return
	}
	c.r.updateFault(c.rt, b, latency, o)
}

// finish ends the send: its result, or the final error naming every attempt, and its metrics.
func (c *sendCall) finish() (*SendResult, error) {
	if c.result != nil {
		if c.rules.retryRefusedMessage {
			blameRefusals(c.rt, c.refusals)
		}
		c.r.metrics.SendDone(c.metric, c.mode, c.result.Attempts, c.result.Latency, nil)
		return c.result, nil
	}
	lastErr := c.lastErr
	if lastErr == nil {
		lastErr = ErrSendTimeout
	}
	timeout := c.timeout || errors.Is(lastErr, context.DeadlineExceeded)
	// Refusals that ended the send condemn the message; a send that ran out of time or was given
	// up after them has not heard every broker it could have tried.
	refused := len(c.tried) > 0 && len(c.refusals) == len(c.tried) && !timeout && !errors.Is(lastErr, context.Canceled)
	if refused && len(c.refusals) > 1 {
		lastErr = refusedError(c.refusals)
	}
	err := &SendError{Topic: c.topic, Attempts: len(c.tried), MaxAttempts: c.rules.attempts,
		Elapsed: c.r.now().Sub(c.begin), BrokersTried: c.tried, Timeout: timeout, MessageRefused: refused, Err: lastErr}
	c.r.metrics.SendDone(c.metric, c.mode, len(c.tried), err.Elapsed, err)
	return nil, err
}

// updateFault records one attempt in the route's policy table (RocketMQ's updateFaultItem after
// every attempt, with that attempt's own latency).
func (r *Runtime) updateFault(rt *route, b *brokerSlot, latency time.Duration, o fault.Outcome) {
	rt.policy.tol.Update(b.name, latency, o)
	r.metrics.AttemptDone(rt.policy.Name, b.name, latency, o)
}

// recordAttempt records an attempt with the arguments RocketMQ passes to updateFaultItem at a call
// site whose flags differ from the sync path's (the async callbacks); o is reported to metrics.
func (r *Runtime) recordAttempt(rt *route, b *brokerSlot, latency time.Duration, o fault.Outcome, isolation, reachable bool) {
	rt.policy.tol.UpdateFaultItem(b.name, latency, isolation, reachable)
	r.metrics.AttemptDone(rt.policy.Name, b.name, latency, o)
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

// retryRules are the rules one send follows, by mode and preset: the one place that knows how
// sync, async and oneway sends differ.
type retryRules struct {
	// attempts is the most attempts the send makes.
	attempts int
	// resetOnRetry: a retry resets the selection index (RocketMQ 5.x's sync retries) or, under
	// PresetDetour, starts from a random queue.
	resetOnRetry bool
	// oneway: the request is written without waiting for an answer.
	oneway bool
	// async: RocketMQ's async rules: only transport failures are retried; refusals and broken
	// responses end the send; failures are recorded with the callbacks' fault flags.
	async bool
	// retryNotStoreOK: RetryAnotherBrokerWhenNotStoreOK applies (RocketMQ: sync sends only).
	retryNotStoreOK bool
	// retryRefusedMessage (PresetDetour): a MESSAGE_ILLEGAL refusal isolates nothing and is
	// retried on a broker that has not refused the message, and a broker whose refusal another
	// broker's store then disproves is isolated (reason RefusesValidMessages). RocketMQ's
	// producer neither retries MESSAGE_ILLEGAL nor tells the message's fault from the broker's:
	// it isolates the broker for every refusal.
	retryRefusedMessage bool
	// avoidDisconnected (PresetDetour): once a broker's connection failed in a send (see
	// connectionFailed), the send's later attempts go to any other broker first, whatever its
	// pod's state (see route.pickAvoiding). RocketMQ's selection knows no pods, so its retry
	// already reaches another broker; PresetDetour's pod passes would otherwise hand every retry
	// back to a restarting broker whose pod is the only Ready one.
	avoidDisconnected bool
	// busyIsPressure (PresetDetour): a busy refusal (see busyRefusal) is retried on another
	// broker whatever the retry codes say, and isolates the broker with reason BrokerBusy, which
	// a good probe does not end (a probe does not pass the send queue). RocketMQ 4.x fails such
	// a send at once and 5.x retries it as any retry code, both isolating as for a failure.
	busyIsPressure bool
	// credentialsAreCallers (PresetDetour): a refusal of the credentials (NO_PERMISSION with an
	// authentication or authorization remark) ends the send at once and isolates nothing.
	// RocketMQ's producer retries NO_PERMISSION as a retry code and isolates the broker for it
	// as for any refusal.
	credentialsAreCallers bool
	// topicHold (PresetDetour): a TOPIC_NOT_EXIST refusal holds the broker out for the send's
	// topic alone (fault.Tolerance.RefusedTopic) and isolates nothing else. RocketMQ's producer
	// isolates the broker for it as for any refusal, and its probe readmits it at once.
	topicHold bool
	// unseenFailures are the oneway failures the preset's RocketMQ line never sees.
	unseenFailures unseenFailures
	// selectBeforeBudget: each attempt's queue is selected before the budget is checked, as
	// RocketMQ's sendDefaultImpl does (see nextQueue).
	selectBeforeBudget bool
	// budgetInMillis: the budget is spent once more whole milliseconds than it holds have passed,
	// as RocketMQ counts it (see spent).
	budgetInMillis bool
}

// brokerWire is what the send loop needs of a remoting client.
type brokerWire interface {
	Invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error)
	InvokeOneway(ctx context.Context, addr string, req *remoting.Command) error
}

// openRoute returns the route a send of topic by key goes by, or the error that ends the send
// before any attempt: ErrClosed once the runtime is closed, or a *NoRouteError, which is counted
// in the send metrics as a failed send of mode that took from begin to now.
func (r *Runtime) openRoute(key, topic string, mode SendMode, begin time.Time) (*route, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	rt := r.routeFor(key, topic)
	if rt == nil {
		err := &NoRouteError{Topic: topic}
		r.metrics.SendDone(topic, mode, 0, r.now().Sub(begin), err)
		return nil, err
	}
	return rt, nil
}

// now is the send loop's clock: the wall clock unless a replay set sendClock.
func (r *Runtime) now() time.Time {
	if r.sendClock != nil {
		return r.sendClock.Now()
	}
	return time.Now()
}

// unseenFailures says which failures of a oneway write a send does not see. RocketMQ writes a
// oneway request without waiting for the write, and 5.x connects without waiting either, so a
// oneway send to an unreachable broker returns as sent (4.x still fails when the connection
// cannot be made). Under PresetDetour every failure is seen.
type unseenFailures uint8

const (
	// seesAll: every failure is an error (PresetDetour, and every mode but oneway).
	seesAll unseenFailures = iota
	// seesNone: no failure is seen (RocketMQ 5.x's oneway send).
	seesNone
	// seesConnectOnly: only a connection that could not be made is seen (RocketMQ 4.x's).
	seesConnectOnly
)

// unseen reports whether err is a oneway failure the send does not see: the attempt then counts
// as sent.
func (rr retryRules) unseen(err error) bool {
	switch rr.unseenFailures {
	case seesNone:
		return true
	case seesConnectOnly:
		return !errors.Is(err, remoting.ErrConnect)
	}
	return false
}

// retryRulesOf returns the rules of a send in mode under pol. RocketMQ's sendDefaultImpl makes
// 1 + retryTimesWhenSendFailed attempts for a sync send and one for async and oneway sends; an
// async send retries inside its callback (up to retryTimesWhenSendAsyncFailed more times) on
// transport failures only, without resetting the index; a oneway send is never retried.
// PresetDetour retries every mode as a sync send.
func retryRulesOf(pol *Policy, mode SendMode) retryRules {
	rr := retryRules{attempts: pol.Retry.Attempts, resetOnRetry: true, retryNotStoreOK: true,
		oneway: mode == ModeOneway, selectBeforeBudget: pol.Preset.rocketMQ(), budgetInMillis: pol.Preset.rocketMQ()}
	if !pol.Preset.rocketMQ() {
		rr.retryRefusedMessage = true
		rr.busyIsPressure = true
		rr.avoidDisconnected = true
		rr.credentialsAreCallers = true
		rr.topicHold = true
		return rr
	}
	switch mode {
	case ModeOneway:
		rr.attempts = 1
		rr.retryNotStoreOK = false
		rr.unseenFailures = seesNone
		if pol.Preset == PresetRocketMQ4 {
			rr.unseenFailures = seesConnectOnly
		}
	case ModeAsync:
		rr.async = true
		rr.resetOnRetry = false
		rr.retryNotStoreOK = false
	}
	return rr
}
