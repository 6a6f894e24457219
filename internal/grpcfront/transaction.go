package grpcfront

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// A transactional message is sent as RocketMQ's half message, as the Proxy sends it for gRPC
// clients: TRAN_MSG set, the prepared type in the sysFlag, and the topic's name as the producer
// group (PGROUP and the header's group), the group the broker checks back with and the end must
// name. The client ends it with EndTransaction, which goes to the broker that stored it.

// rollbackTimeout bounds the rollback of a half message a broker stored without SEND_OK.
const rollbackTimeout = 3 * time.Second

// transactionGroup is the producer group of a topic's half messages, as the Proxy names it.
func transactionGroup(target front.Target) string { return target.Topic }

// sendHalf sends o as a half message and answers its entry: OK with a transaction id only when
// the broker stored it with SEND_OK. A half message stored with another status is rolled back at
// once, as RocketMQ's Java producer does, and answered with that status.
func (s *Server) sendHalf(ctx context.Context, target front.Target, o outgoing) *rmqpb.SendResultEntry {
	group := transactionGroup(target)
	res, err := s.opts.Runtime.SendTransactionRoute(ctx, target.RouteKey(), o.msg, group)
	if err != nil {
		return &rmqpb.SendResultEntry{Status: s.sendStatus(err), MessageId: o.id}
	}
	ref, refErr := halfRef(res, o.id)
	if res.Status != producer.StatusSendOK {
		st := storedStatus(res.Status)
		st.Message += "; a transactional message needs SEND_OK, so its half message was rolled back"
		if refErr == nil {
			s.rollbackUnsafe(target, group, ref, o.id)
		}
		return &rmqpb.SendResultEntry{Status: st, MessageId: o.id}
	}
	if refErr != nil {
		s.log.Error(refErr, "A broker stored a half message under an id detour cannot read", "broker", res.Broker, "offsetMsgId", res.OffsetMsgID)
		return &rmqpb.SendResultEntry{Status: newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "the broker's answer does not name where it stored the half message: %v", refErr), MessageId: o.id}
	}
	id, err := encodeTransactionID(ref)
	if err != nil {
		return &rmqpb.SendResultEntry{Status: newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err), MessageId: o.id}
	}
	return &rmqpb.SendResultEntry{Status: okStatus(), MessageId: o.id, TransactionId: id, Offset: res.QueueOffset}
}

// halfRef is where res says the half message lies. A broker that answers no transaction id
// still uses the message's UNIQ_KEY as it (5.x brokers answer exactly that).
func halfRef(res *producer.SendResult, uniq string) (txRef, error) {
	_, offset, err := remoting.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return txRef{}, err
	}
	txID := res.TransactionID
	if txID == "" {
		txID = uniq
	}
	ref := txRef{Broker: res.Broker, CommitLogOffset: offset, TranStateTableOffset: res.QueueOffset, TransactionID: txID}
	return ref, ref.check()
}

// rollbackUnsafe rolls back a half message stored without SEND_OK; a failure only leaves it to
// the broker's check-back.
func (s *Server) rollbackUnsafe(target front.Target, group string, ref txRef, msgID string) {
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	if err := s.opts.Runtime.EndTransaction(ctx, target.RouteKey(), halfMessage(target, group, ref, msgID), producer.Rollback, false); err != nil {
		s.log.Info("Rolling back a half message stored without SEND_OK failed; the broker will check back", "broker", ref.Broker, "error", err.Error())
	}
}

// halfMessage is the half message ref names, as the runtime ends it.
func halfMessage(target front.Target, group string, ref txRef, msgID string) producer.HalfMessage {
	return producer.HalfMessage{
		Topic: target.Topic, Group: group, Broker: ref.Broker, TranStateTableOffset: ref.TranStateTableOffset,
		CommitLogOffset: ref.CommitLogOffset, MsgID: msgID, TransactionID: ref.TransactionID,
	}
}

// EndTransaction commits or rolls back a transactional message detour sent: it sends
// END_TRANSACTION to the broker its transaction id names and answers OK once that broker has
// ended it (the Proxy answers OK once it has written the end, oneway, without the broker's word).
// A resolution left unspecified is passed on oneway, as the Proxy does, and the broker waits
// for it to be settled by a check-back. An id detour did not make is INVALID_TRANSACTION_ID, as
// is one whose half message the broker does not hold.
func (s *Server) EndTransaction(ctx context.Context, req *rmqpb.EndTransactionRequest) (*rmqpb.EndTransactionResponse, error) {
	answer := func(st *rmqpb.Status) (*rmqpb.EndTransactionResponse, error) {
		return &rmqpb.EndTransactionResponse{Status: st}, nil
	}
	who, st := s.admit(ctx)
	if st != nil {
		return answer(st)
	}
	if st := who.authorizeSend(req.GetTopic()); st != nil {
		return answer(st)
	}
	// The Proxy's order: the topic, a transaction id at all, then the rest.
	if st := checkTopicName(req.GetTopic().GetName()); st != nil {
		return answer(st)
	}
	if strings.TrimSpace(req.GetTransactionId()) == "" {
		return answer(newStatus(rmqpb.Code_INVALID_TRANSACTION_ID, "transaction id cannot be empty"))
	}
	how, st := commitOrRollback(req.GetResolution())
	if st != nil {
		return answer(st)
	}
	ref, err := decodeTransactionID(req.GetTransactionId())
	if err != nil {
		return answer(newStatus(rmqpb.Code_INVALID_TRANSACTION_ID, "%v", err))
	}
	if id := req.GetMessageId(); strings.TrimSpace(id) == "" || len(id) > 128 {
		return answer(newStatus(rmqpb.Code_ILLEGAL_MESSAGE_ID, "an end needs the message_id of 1 to 128 characters the send answered"))
	}
	target, st := s.resolve(ctx, req.GetTopic())
	if st != nil {
		return answer(st)
	}
	ctx, cancel := sendContext(ctx)
	defer cancel()
	half := halfMessage(target, transactionGroup(target), ref, req.GetMessageId())
	fromCheck := req.GetSource() == rmqpb.TransactionSource_SOURCE_SERVER_CHECK
	if err := s.opts.Runtime.EndTransaction(ctx, target.RouteKey(), half, how, fromCheck); err != nil {
		return answer(s.endStatus(err, ref))
	}
	return answer(okStatus())
}

// commitOrRollback is the runtime's end for a resolution.
func commitOrRollback(r rmqpb.TransactionResolution) (producer.Resolution, *rmqpb.Status) {
	switch r {
	case rmqpb.TransactionResolution_COMMIT:
		return producer.Commit, nil
	case rmqpb.TransactionResolution_ROLLBACK:
		return producer.Rollback, nil
	case rmqpb.TransactionResolution_TRANSACTION_RESOLUTION_UNSPECIFIED:
		return producer.Unresolved, nil
	}
	return 0, newStatus(rmqpb.Code_BAD_REQUEST, "resolution %d is neither COMMIT nor ROLLBACK", int32(r))
}

// endStatus maps a failed end to the code the client acts on.
func (s *Server) endStatus(err error, ref txRef) *rmqpb.Status {
	if errors.Is(err, producer.ErrNotInRoute) {
		return newStatus(rmqpb.Code_INVALID_TRANSACTION_ID, "the transaction id names broker %s, which does not serve this topic: %v", ref.Broker, err)
	}
	if be, ok := errors.AsType[*producer.BrokerError](err); ok {
		switch {
		case be.Code == remoting.SystemError && halfMissing(be.Remark):
			return newStatus(rmqpb.Code_INVALID_TRANSACTION_ID, "broker %s holds no such half message of this topic at commit-log offset %s: %s",
				ref.Broker, strconv.FormatInt(ref.CommitLogOffset, 10), be.Remark)
		case be.Code == remoting.IllegalOperation:
			return newStatus(rmqpb.Code_BAD_REQUEST, "broker %s refused the end as past the orphaned-transaction recovery time; it checks back instead: %s", ref.Broker, be.Remark)
		case be.Code == remoting.SystemBusy:
			return newStatus(rmqpb.Code_TOO_MANY_REQUESTS, "%v", be)
		}
		return newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "broker %s refused the end: %v", ref.Broker, be)
	}
	return s.sendStatus(err)
}

// halfMissing reports whether a broker's SYSTEM_ERROR remark says the end names no half message
// it holds.
func halfMissing(remark string) bool {
	switch remark {
	case remoting.RemarkHalfNotFound, remoting.RemarkWrongGroup, remoting.RemarkWrongQueueOffset:
		return true
	}
	return false
}
