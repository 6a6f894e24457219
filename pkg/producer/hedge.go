package producer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// Hedged sends. With Policy.Hedge on, a send's first attempt that has waited past its broker's
// hedge delay (fault.Entry.HedgeDelay, beside the attempt deadline) while no answer came also
// sends the same request, the same message id (UNIQ_KEY) included, to another writable broker,
// if the runtime's hedge budget allows. Whichever attempt stores the message first answers the
// send; the other runs on, and its outcome reaches the fault table as any attempt's does (a
// success, a slow answer, a stalled attempt, a refusal). Neither attempt is cut for the other: a
// broker that stores the message late still counts as the success it was, and the copy it stored
// is counted (HedgeCopyStored).
//
// An attempt armed for a hedge runs on its own goroutine while the send waits for it or the hedge
// delay, whichever comes first; the race's channel and timer come from a pool, so an armed hedge
// that never fires costs the goroutine's start and no more.

// HedgeEvent is what happened to a hedge, as Metrics.Hedged reports it.
type HedgeEvent uint8

const (
	// HedgeSent: a hedge was sent to another broker.
	HedgeSent HedgeEvent = iota
	// HedgeWon: the hedge answered its send.
	HedgeWon
	// HedgeLost: the attempt it hedged answered its send, or neither stored the message.
	HedgeLost
	// HedgeCopyStored: both attempts stored the message, so two copies with one message id exist.
	HedgeCopyStored
	// HedgeBudgetSpent: an attempt waited past its hedge delay, another broker could have taken
	// the hedge, but the budget had none left: the send waited on its slow broker.
	HedgeBudgetSpent
)

// String names the event as metrics label it.
func (e HedgeEvent) String() string {
	switch e {
	case HedgeSent:
		return "sent"
	case HedgeWon:
		return "won"
	case HedgeLost:
		return "lost"
	case HedgeCopyStored:
		return "copy_stored"
	case HedgeBudgetSpent:
		return "budget_spent"
	}
	return "unknown"
}

// hedgeCost is one hedge in the budget's units: a send with hedging on earns its policy's
// BudgetPercent hundredths of it.
const hedgeCost = 100 * 100

// hedgeBurst is the most hedges the budget saves up: after a quiet spell a burst of slow answers
// gets at most this many hedges before the share applies again.
const hedgeBurst = 10 * hedgeCost

// hedgeBudget is the runtime's token bucket for hedges: refilled by sends, spent by hedges, so
// hedges stay at most the share of sends that earned them, however slow the brokers are.
type hedgeBudget struct {
	tokens atomic.Int64
}

// earn credits one send with hedging on under a budget of percent.
func (b *hedgeBudget) earn(percent int) {
	if b.tokens.Add(int64(percent)*100) > hedgeBurst {
		// Concurrent earners may both see the excess; either store leaves the bucket full.
		b.tokens.Store(hedgeBurst)
	}
}

// spend takes one hedge from the budget, or reports that none is left.
func (b *hedgeBudget) spend() bool {
	for {
		t := b.tokens.Load()
		if t < hedgeCost {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-hedgeCost) {
			return true
		}
	}
}

// hedgeLeg is one attempt of a race and what it came back with.
type hedgeLeg struct {
	q     *queueEntry
	hedge bool
	res   attemptResult
}

// hedgeRace is an attempt armed for a hedge, and the hedge once sent. The send waits on done; a
// leg that ends after the send has returned (abandoned) records its own outcome, and the last one
// to end releases the race. It holds copies of what the legs need, never the sendCall, which
// lives on its send's stack.
type hedgeRace struct {
	done  chan hedgeLeg
	timer *time.Timer

	r      *Runtime
	rt     *route
	ctx    context.Context
	topic  string
	rules  retryRules
	winner string // the broker that answered the send, for a late leg's copy

	mu        sync.Mutex
	inflight  int
	abandoned bool
	// cancelSend is the send budget's cancel, handed over by a send that returned while a leg still
	// ran on that budget: the last leg calls it.
	cancelSend context.CancelFunc
}

var hedgeRaces = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &hedgeRace{done: make(chan hedgeLeg, 2), timer: t}
}}

// fly makes one leg's attempt, whose request and deadline the send prepared, and delivers it.
func (h *hedgeRace) fly(req *remoting.Command, ctx context.Context, cancel context.CancelFunc, leg hedgeLeg) {
	b := leg.q.b
	start := h.r.now()
	b.entry.AttemptStarted()
	leg.res.resp, leg.res.err = h.r.wire.Invoke(ctx, b.addr, req)
	b.entry.AttemptEnded()
	leg.res.latency = h.r.now().Sub(start)
	if cancel != nil {
		cancel()
	}
	h.mu.Lock()
	h.inflight--
	if !h.abandoned {
		h.done <- leg
		h.mu.Unlock()
		return
	}
	last := h.inflight == 0
	h.mu.Unlock()
	h.settleLate(&leg)
	if last {
		h.release()
	}
}

// release ends the send's budget if it was handed over and returns the race to the pool. A leg that
// delivered may still hold mu for a moment after its send on done: release waits for it first.
func (h *hedgeRace) release() {
	h.mu.Lock()
	cancel := h.cancelSend
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	*h = hedgeRace{done: h.done, timer: h.timer}
	hedgeRaces.Put(h)
}

// settleLate records the outcome of a leg that did not answer its send in the fault table, as the
// send loop would have recorded it (the Detour preset's rules: only it hedges).
func (h *hedgeRace) settleLate(leg *hedgeLeg) {
	r, rt, b, res := h.r, h.rt, leg.q.b, &leg.res
	switch classifyAttempt(h.ctx, &h.rules, res) {
	case attemptStored:
		r.updateFault(rt, b, res.latency, fault.Success)
		r.noteAccepted(b.addr, h.topic)
		if h.winner != "" {
			r.metrics.Hedged(rt.policy.Name, HedgeCopyStored)
		}
	case attemptInterrupted:
		r.updateFault(rt, b, res.latency, fault.Interrupted)
	case attemptTransportFailed, attemptBroken:
		if res.adaptiveDeadline && errors.Is(res.err, remoting.ErrTimeout) {
			r.stalledFault(rt, b, res.latency, false)
			return
		}
		r.updateFault(rt, b, res.latency, fault.TransportError)
	case attemptRefused:
		switch code := res.resp.Code; {
		case busyRefusal(code, res.resp.Remark):
			r.busyFault(rt, b, res.latency)
		case code == remoting.MessageIllegal:
			// The message or this broker's store is at fault; the send's own attempts judge it.
			r.updateFault(rt, b, res.latency, fault.ClientError)
		default:
			r.updateFault(rt, b, res.latency, fault.BrokerError)
		}
	default:
		r.updateFault(rt, b, res.latency, fault.ClientError)
	}
}

// hedgeDelay is how long attempt i to b, under an attempt deadline of deadline (0: none), waits
// before it is hedged; 0 when the send is not hedged: hedging off, not the first attempt, a
// message that must not be hedged (ordered, a transaction's half, oneway) or a delay that does not
// come before the deadline (fault.Entry.HedgeDelay).
func (c *sendCall) hedgeDelay(i int, b *brokerSlot, deadline time.Duration) time.Duration {
	h := &c.pol.Hedge
	if !h.Enabled || i > 0 || c.noHedge || c.fixed != nil || c.rules.oneway || c.pol.Preset.rocketMQ() {
		return 0
	}
	c.r.hedges.earn(h.BudgetPercent)
	return b.entry.HedgeDelay(deadline, c.remaining)
}

// hedgeQueue is the queue a hedge of an attempt to primary goes to: another broker the fault table
// holds available and whose pod is ready, or nil when the route has none.
func (c *sendCall) hedgeQueue(primary *brokerSlot) *queueEntry {
	q := c.rt.pick(primary.name, true)
	if q == nil || q.b == primary || q.b.name == primary.name || q.b.addr == "" || !q.b.podOK || !q.b.entry.Available() {
		return nil
	}
	return q
}

// raceAttempt makes an attempt armed for a hedge after delay: the request req to q under ctx
// (cancel ends it), on a goroutine of its own. It returns the leg that answers the send.
func (c *sendCall) raceAttempt(q *queueEntry, req *remoting.Command, ctx context.Context, cancel context.CancelFunc, adaptive bool, delay time.Duration) hedgeLeg {
	h := hedgeRaces.Get().(*hedgeRace)
	h.r, h.rt, h.ctx, h.topic, h.rules, h.inflight = c.r, c.rt, c.ctx, c.topic, c.rules, 1
	go h.fly(req, ctx, cancel, hedgeLeg{q: q, res: attemptResult{adaptiveDeadline: adaptive}})
	h.timer.Reset(delay)
	var fired bool
	select {
	case leg := <-h.done:
		h.timer.Stop()
		h.release()
		return leg
	case <-h.timer.C:
		fired = c.sendHedge(h, q)
	}
	if !fired {
		leg := <-h.done
		h.release()
		return leg
	}
	return c.awaitHedge(h)
}

// sendHedge sends the hedge of the attempt to primary, if the budget allows and another broker is
// there to take it, and reports whether it did.
func (c *sendCall) sendHedge(h *hedgeRace, primary *queueEntry) bool {
	hq := c.hedgeQueue(primary.b)
	if hq == nil {
		return false
	}
	if !c.r.hedges.spend() {
		c.r.metrics.Hedged(c.rt.policy.Name, HedgeBudgetSpent)
		return false
	}
	hdr := c.header
	hdr.QueueID = hq.id
	hdr.BrokerName = hq.b.name
	req := remoting.NewSendRequest(&hdr, c.body, true)
	ctx, cancel := c.sendCtx, context.CancelFunc(nil)
	d, cut := c.attemptDeadline(0, hq.b)
	if d > 0 {
		ctx, cancel = context.WithTimeout(c.sendCtx, d)
	}
	h.mu.Lock()
	h.inflight++
	h.mu.Unlock()
	c.tried = append(c.tried, hq.b.name)
	c.r.metrics.Hedged(c.rt.policy.Name, HedgeSent)
	go h.fly(req, ctx, cancel, hedgeLeg{q: hq, hedge: true, res: attemptResult{adaptiveDeadline: cut}})
	return true
}

// awaitHedge waits for the first leg that stores the message, or for both, and returns the leg
// that answers the send: the first to store it, else the hedged attempt's own. A leg still in
// flight is abandoned to record its own outcome; one that came back but does not answer is
// recorded here.
func (c *sendCall) awaitHedge(h *hedgeRace) hedgeLeg {
	first := <-h.done
	if classifyAttempt(c.ctx, &c.rules, &first.res) == attemptStored {
		c.hedgeSettled(h, first, first.q.b.name)
		return first
	}
	second := <-h.done
	// Neither may have stored it: then the hedged attempt's own outcome answers, as without a
	// hedge, and the send goes on by it.
	win, lose := first, second
	if classifyAttempt(c.ctx, &c.rules, &second.res) == attemptStored || first.hedge {
		win, lose = second, first
	}
	stored := ""
	if classifyAttempt(c.ctx, &c.rules, &win.res) == attemptStored {
		stored = win.q.b.name
	}
	h.winner = stored
	h.settleLate(&lose)
	c.hedgeSettled(h, win, stored)
	return win
}

// hedgeSettled counts the race's outcome (won when the hedge answers with a stored message) and
// abandons a leg still in flight, handing it the send's budget to end.
func (c *sendCall) hedgeSettled(h *hedgeRace, win hedgeLeg, stored string) {
	event := HedgeLost
	if win.hedge && stored != "" {
		event = HedgeWon
	}
	c.r.metrics.Hedged(c.rt.policy.Name, event)
	h.mu.Lock()
	h.winner = stored
	h.abandoned = true
	last := h.inflight == 0
	if !last {
		h.cancelSend, c.cancel = c.cancel, nil
	}
	h.mu.Unlock()
	if last {
		// The other leg came back before the race was abandoned: it waits in done.
		select {
		case leg := <-h.done:
			h.settleLate(&leg)
		default:
		}
		h.release()
	}
}
