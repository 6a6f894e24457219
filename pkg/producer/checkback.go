package producer

import (
	"slices"
	"sync"

	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// A broker that holds a half message past its check time, with no end, asks a producer of the
// message's group for the verdict: CHECK_TRANSACTION_STATE, oneway, on a connection that
// heartbeat the group. The runtime heartbeats the groups its transaction checkers name, and
// offers each check it receives to them in turn until one takes it; the one that does ends the
// transaction (EndTransaction with FromTransactionCheck) once it knows the verdict. A check
// nobody takes is dropped: the broker checks again at its next round, up to its check limit.

// maxPendingChecks bounds the checks received and not yet offered to the checkers; beyond it a
// check is dropped, so a broker checking faster than the checkers answer costs no memory.
const maxPendingChecks = 256

// maxProducerGroups bounds the groups one checker may have heartbeat.
const maxProducerGroups = 4096

// TransactionCheckMetrics is implemented by Metrics that count the brokers' transaction checks
// the runtime drops; the runtime calls TransactionCheckDropped once per dropped check, with one
// of the CheckDropped reasons, when Options.Metrics implements it.
type TransactionCheckMetrics interface {
	TransactionCheckDropped(reason string)
}

// Reasons the runtime drops a broker's transaction check. The broker checks again at its next
// round, up to its check limit.
const (
	// CheckDroppedQueueFull: more than maxPendingChecks checks were waiting for the checkers.
	CheckDroppedQueueFull = "queue_full"
	// CheckDroppedMalformed: the check's header or its half message did not decode.
	CheckDroppedMalformed = "malformed"
	// CheckDroppedUnknownBroker: the check came from an address no route names.
	CheckDroppedUnknownBroker = "unknown_broker"
	// CheckDroppedNotTaken: no checker took the check (none was added, or none knows a producer
	// of the message's topic).
	CheckDroppedNotTaken = "not_taken"
)

// TransactionCheck is a broker's question about one half message it holds.
type TransactionCheck struct {
	// Broker is the runtime's name of the broker that asks: the one to end the transaction on.
	Broker string
	// Header says which half message, at which offsets the end must name.
	Header remoting.CheckTransactionStateHeader
	// Message is the half message as the broker stored it, its topic the real one.
	Message *remoting.StoredMessage
}

// TransactionChecker receives brokers' transaction checks for the producer groups it names.
type TransactionChecker struct {
	r      *Runtime
	take   func(TransactionCheck) bool
	groups []string // sorted, guarded by r.checks.mu
}

// checkBack holds the checkers and the queue of checks; checkers is guarded by mu.
type checkBack struct {
	mu       sync.Mutex
	checkers []*TransactionChecker
	pending  chan pendingCheck
	kick     chan struct{} // a heartbeat round is wanted now: a group was added
}

// pendingCheck is a check as it came off a connection, parsed by the worker.
type pendingCheck struct {
	addr string
	req  *remoting.Command
}

func newCheckBack() checkBack {
	return checkBack{pending: make(chan pendingCheck, maxPendingChecks), kick: make(chan struct{}, 1)}
}

// AddTransactionChecker offers every CHECK_TRANSACTION_STATE a broker sends the runtime to take,
// on a goroutine of the runtime's, one check at a time: take reports whether it took the check,
// and must not keep the runtime waiting long. Checkers added earlier are offered a check first.
// Only a runtime that owns its remoting client (Options.Client nil) receives checks.
func (r *Runtime) AddTransactionChecker(take func(TransactionCheck) bool) *TransactionChecker {
	c := &TransactionChecker{r: r, take: take}
	r.checks.mu.Lock()
	r.checks.checkers = append(r.checks.checkers, c)
	r.checks.mu.Unlock()
	return c
}

// Remove stops offering checks to c and drops its groups from the heartbeats.
func (c *TransactionChecker) Remove() {
	c.r.checks.mu.Lock()
	c.r.checks.checkers = slices.DeleteFunc(c.r.checks.checkers, func(o *TransactionChecker) bool { return o == c })
	c.r.checks.mu.Unlock()
}

// SetProducerGroups sets the producer groups c asks the runtime's heartbeats to name (at most
// maxProducerGroups, the rest left out): the groups of the half messages c's clients send, so
// that brokers check back on them with the runtime. A group no heartbeat named before gets a
// heartbeat round at once, so a broker knows it before its first check.
func (c *TransactionChecker) SetProducerGroups(groups []string) {
	groups = slices.Clone(groups)
	slices.Sort(groups)
	groups = slices.Compact(groups)
	if len(groups) > maxProducerGroups {
		c.r.log.Info("Too many producer groups to heartbeat; the rest get no check-back", "groups", len(groups), "limit", maxProducerGroups)
		groups = groups[:maxProducerGroups]
	}
	cb := &c.r.checks
	cb.mu.Lock()
	added := false
	for _, g := range groups {
		if !cb.namedLocked(g) {
			added = true
			break
		}
	}
	c.groups = groups
	cb.mu.Unlock()
	if added {
		select {
		case cb.kick <- struct{}{}:
		default: // a round is already due
		}
	}
}

// namedLocked reports whether a checker names group g. cb.mu is held.
func (cb *checkBack) namedLocked(g string) bool {
	for _, c := range cb.checkers {
		if _, found := slices.BinarySearch(c.groups, g); found {
			return true
		}
	}
	return false
}

// heartbeatGroups are the groups a heartbeat names: the runtime's own first.
func (r *Runtime) heartbeatGroups() []string {
	r.checks.mu.Lock()
	var named []string
	for _, c := range r.checks.checkers {
		named = append(named, c.groups...)
	}
	r.checks.mu.Unlock()
	slices.Sort(named)
	out := []string{r.group}
	for _, g := range slices.Compact(named) {
		if g != r.group {
			out = append(out, g)
		}
	}
	return out
}

// serveBrokerRequest answers what a broker asks the runtime on its own: it queues a
// CHECK_TRANSACTION_STATE for the check worker and answers anything else
// REQUEST_CODE_NOT_SUPPORTED, as before there was a check-back. It runs on a connection's
// reader, so it never waits.
func (r *Runtime) serveBrokerRequest(addr string, req *remoting.Command) *remoting.Command {
	if req.Code != remoting.CheckTransactionState {
		if req.IsOneway() {
			return nil
		}
		return remoting.NewNotSupportedResponse(req)
	}
	select {
	case r.checks.pending <- pendingCheck{addr: addr, req: req}:
	default:
		r.log.Info("Dropped a broker's transaction check: too many waiting; the broker checks again", "broker", addr, "waiting", maxPendingChecks)
		r.checkDropped(CheckDroppedQueueFull)
	}
	return nil
}

// checkDropped counts a dropped check when the runtime's metrics count them.
func (r *Runtime) checkDropped(reason string) {
	if m, ok := r.metrics.(TransactionCheckMetrics); ok {
		m.TransactionCheckDropped(reason)
	}
}

// checkWorker hands queued checks to the checker until the runtime closes.
func (r *Runtime) checkWorker() {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			return
		case pc := <-r.checks.pending:
			r.handOver(pc)
		}
	}
}

// handOver parses one check, names its broker and offers it to the checkers.
func (r *Runtime) handOver(pc pendingCheck) {
	r.checks.mu.Lock()
	checkers := slices.Clone(r.checks.checkers)
	r.checks.mu.Unlock()
	if len(checkers) == 0 {
		r.checkDropped(CheckDroppedNotTaken)
		return
	}
	h, err := remoting.ParseCheckTransactionStateHeader(pc.req)
	if err != nil {
		r.log.Info("Ignored a broker's transaction check with a broken header", "broker", pc.addr, "error", err.Error())
		r.checkDropped(CheckDroppedMalformed)
		return
	}
	m, err := remoting.DecodeStoredMessage(pc.req.Body)
	if err != nil {
		r.log.Info("Ignored a broker's transaction check with a broken message", "broker", pc.addr, "error", err.Error())
		r.checkDropped(CheckDroppedMalformed)
		return
	}
	name, ok := r.brokerAt(pc.addr, h.BrokerName)
	if !ok {
		r.log.Info("Ignored a transaction check from a broker the runtime does not know", "broker", pc.addr, "brokerName", h.BrokerName)
		r.checkDropped(CheckDroppedUnknownBroker)
		return
	}
	check := TransactionCheck{Broker: name, Header: *h, Message: m}
	for _, c := range checkers {
		if c.take(check) {
			return
		}
	}
	r.log.V(1).Info("No checker took a broker's transaction check; the broker checks again", "broker", name, "topic", m.Topic)
	r.checkDropped(CheckDroppedNotTaken)
}

// brokerAt is the runtime's name of the routed broker at addr (heartbeats go to routed brokers
// only, so only they check back). Of several at one address (one broker in the routes of two
// scopes), the one whose RocketMQ name is bname wins.
func (r *Runtime) brokerAt(addr, bname string) (string, bool) {
	var found []string
	for _, rt := range r.state.Load().routes.All() {
		for i := range rt.queues {
			if b := rt.queues[i].b; b.addr == addr && !slices.Contains(found, b.name) {
				found = append(found, b.name)
			}
		}
	}
	slices.Sort(found)
	for _, name := range found {
		if _, rocketmq := scope.SplitBrokerID(name); bname != "" && (name == bname || rocketmq == bname) {
			return name, true
		}
	}
	if len(found) == 0 {
		return "", false
	}
	return found[0], true
}
