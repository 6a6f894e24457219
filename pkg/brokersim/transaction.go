package brokersim

import (
	"strconv"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// This file ends transactions as a 5.x broker's EndTransactionProcessor does. The half message is
// looked up by its commit-log offset alone (any message stored there qualifies, as the Java
// broker's lookup reads whatever the commit log holds at that offset), then checked against the
// request: its producer group (PGROUP) and its offset in the half topic's queue. A commit stores
// a copy in the topic and queue the message was sent to, where consumers see it; a rollback
// stores nothing. Neither marks the half message as ended: the Java broker writes that to an
// operation queue its commit path never reads, so a second commit stores the message again.

// endTransaction answers END_TRANSACTION; nil means no answer, as the Java broker gives none to
// an end that is neither a commit nor a rollback.
func (b *Broker) endTransaction(req *remoting.Command) *remoting.Command {
	h, err := remoting.ParseEndTransactionHeader(req)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if h.CommitOrRollback == remoting.TransactionNotType {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	half, ok := b.messageAtLocked(h.CommitLogOffset)
	if !ok {
		return remoting.NewResponse(req, remoting.SystemError, remoting.RemarkHalfNotFound)
	}
	if remark := checkHalf(half, h); remark != "" {
		return remoting.NewResponse(req, remoting.SystemError, remark)
	}
	if h.CommitOrRollback == remoting.TransactionCommit {
		if r := b.commitLocked(half); r != nil {
			return remoting.NewResponse(req, r.code, r.remark)
		}
	}
	b.settleLocked(h.CommitLogOffset)
	return remoting.NewResponse(req, remoting.Success, "")
}

// checkHalf is the remark refusing to end half by h, or "" when h names it.
func checkHalf(half StoredMessage, h *remoting.EndTransactionHeader) string {
	switch {
	case half.Properties[remoting.PropertyProducerGroup] != h.ProducerGroup:
		return remoting.RemarkWrongGroup
	case half.QueueOffset != h.TranStateTableOffset:
		return remoting.RemarkWrongQueueOffset
	}
	return ""
}

// messageAtLocked is the message stored at a commit-log offset. b.mu is held.
func (b *Broker) messageAtLocked(offset int64) (StoredMessage, bool) {
	if offset < 0 {
		return StoredMessage{}, false
	}
	for _, t := range b.topics {
		for _, q := range t.queues {
			for _, m := range q.msgs {
				if _, at, err := remoting.ParseOffsetMsgID(m.MsgID); err == nil && at == offset {
					return m, true
				}
			}
		}
	}
	return StoredMessage{}, false
}

// commitLocked stores the committed copy of half where it was sent: its properties without the
// transaction and placement ones, its sysFlag marked committed, its store time kept; a delay it
// carries applies now. b.mu is held.
func (b *Broker) commitLocked(half StoredMessage) *refusal {
	props := make(map[string]string, len(half.Properties))
	for k, v := range half.Properties {
		props[k] = v
	}
	topic := props[propRealTopic]
	qid, err := strconv.Atoi(props[propRealQueueID])
	if err != nil || topic == "" {
		return &refusal{remoting.SystemError, numberFormat(props[propRealQueueID])}
	}
	delete(props, remoting.PropertyTransactionPrep)
	delete(props, propRealTopic)
	delete(props, propRealQueueID)
	at := placement{topic, qid}
	if _, r := schedule(props, &at, time.Now()); r != nil {
		return r
	}
	dest := b.topics[at.topic]
	if at.topic != topic {
		dest = b.systemTopicLocked(at.topic)
	}
	if dest == nil || at.queue < 0 || at.queue >= len(dest.queues) {
		return &refusal{remoting.SystemError, "brokersim: committed message's queue " + strconv.Itoa(at.queue) + " of " + topic + " does not exist"}
	}
	q := dest.queues[at.queue]
	msgID := remoting.NewOffsetMsgID(b.storeHost, b.commitLogOffset)
	b.commitLogOffset += int64(len(half.Body)) + int64(propertiesLength(props)) + 100
	m := half
	m.Topic, m.QueueID, m.QueueOffset, m.MsgID, m.Properties = at.topic, at.queue, q.stored, msgID, props
	m.SysFlag = half.SysFlag&^remoting.TransactionTypeMask | remoting.TransactionCommit
	q.msgs = append(q.msgs, m)
	q.stored++
	b.stored++
	return nil
}
