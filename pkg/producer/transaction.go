package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// ErrNotInRoute is wrapped by the error for a transaction end naming a broker the route does not
// send to.
var ErrNotInRoute = errors.New("broker not in route")

// SendTransactionRoute sends m by route as a transactional half message of producer group
// group: the broker keeps it out of consumers' sight until EndTransaction commits it, and checks
// back with a producer of group (CHECK_TRANSACTION_STATE) when no end comes. It goes through the
// send loop like any message, each attempt picking the broker by the route's policy, with one
// exception: a half message a broker stored with a "stored but" status (a flush or replica
// timeout) is not sent to another broker as well, since that would leave two half messages of one
// transaction. Only SEND_OK makes the half message safe to commit; the caller rolls back any
// other status. m is not modified.
func (r *Runtime) SendTransactionRoute(ctx context.Context, route string, m *Message, group string) (*SendResult, error) {
	begin := r.now()
	if group == "" {
		if err := ValidateMessage(m); err != nil {
			return nil, err
		}
		return nil, errors.New("a half message needs a producer group, which the broker checks back with")
	}
	var c sendCall
	if err := c.open(r, ctx, route, m, ModeSync, begin); err != nil {
		return nil, err
	}
	c.header.ProducerGroup = group
	c.header.SysFlag |= remoting.TransactionPrepared
	if err := c.addProperties(remoting.EncodeProperty(remoting.PropertyTransactionPrep, "true") +
		remoting.EncodeProperty(remoting.PropertyProducerGroup, group)); err != nil {
		return nil, err
	}
	c.rules.retryNotStoreOK = false
	// A half message stored twice would be two transactions' halves, each checked back alone.
	c.noHedge = true
	return c.run()
}

// endTransactionTimeout bounds an END_TRANSACTION whose context has no deadline.
const endTransactionTimeout = 3 * time.Second

// Resolution is how a transaction ends.
type Resolution int32

// The ends of a transaction, as RocketMQ's END_TRANSACTION names them.
const (
	// Commit makes the half message visible to consumers.
	Commit = Resolution(remoting.TransactionCommit)
	// Rollback drops the half message.
	Rollback = Resolution(remoting.TransactionRollback)
	// Unresolved passes on that the producer does not know yet; the broker answers nothing and
	// settles the transaction by a check-back.
	Unresolved = Resolution(remoting.TransactionNotType)
)

// HalfMessage names a half message a broker stored, as ending it must: the broker that holds it,
// where (its commit-log offset and its offset in the half queue, the SendResult's QueueOffset),
// its topic and producer group, its UNIQ_KEY and the broker's transaction id.
type HalfMessage struct {
	Topic, Group, Broker                  string
	CommitLogOffset, TranStateTableOffset int64
	MsgID, TransactionID                  string
}

// EndTransaction ends the half message half, by route, with resolution how; fromCheck says the
// end answers a broker's check-back. It sends END_TRANSACTION to half.Broker, one of route's
// brokers (the one that stored the half message), and waits for its answer: nil when the broker
// committed or rolled back, a *BrokerError when it refused (a half message it cannot find or
// that half does not name). An Unresolved end is sent oneway, as the broker answers none. The
// end is never sent to any other broker: only the one holding the half message can end it.
func (r *Runtime) EndTransaction(ctx context.Context, route string, half HalfMessage, how Resolution, fromCheck bool) error {
	return r.endTransaction(ctx, route, half.Broker, &remoting.EndTransactionHeader{
		Topic: half.Topic, ProducerGroup: half.Group, TranStateTableOffset: half.TranStateTableOffset,
		CommitLogOffset: half.CommitLogOffset, CommitOrRollback: int32(how), FromTransactionCheck: fromCheck,
		MsgID: half.MsgID, TransactionID: half.TransactionID,
	})
}

// endTransaction sends END_TRANSACTION for h to broker among route's brokers.
func (r *Runtime) endTransaction(ctx context.Context, route, broker string, h *remoting.EndTransactionHeader) error {
	if r.closed.Load() {
		return ErrClosed
	}
	addr, err := r.routeBrokerAddr(route, broker)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, endTransactionTimeout)
		defer cancel()
	}
	req := remoting.NewEndTransactionRequest(h)
	if h.CommitOrRollback == remoting.TransactionNotType {
		return r.client.InvokeOneway(ctx, addr, req)
	}
	resp, err := r.client.Invoke(ctx, addr, req)
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		r.noteACL("", addr, broker, h.Topic, remoting.EndTransaction, resp)
		return &BrokerError{Code: resp.Code, Remark: resp.Remark, Broker: broker, Addr: addr}
	}
	return nil
}

// routeBrokerAddr is the address of broker among route's brokers.
func (r *Runtime) routeBrokerAddr(route, broker string) (string, error) {
	rt := r.state.Load().index.get(route)
	if rt == nil {
		return "", &NoRouteError{Topic: route}
	}
	for i := range rt.queues {
		if b := rt.queues[i].b; b.name == broker && b.addr != "" {
			return b.addr, nil
		}
	}
	return "", fmt.Errorf("%w: route %s has no broker %s with an address", ErrNotInRoute, route, broker)
}
