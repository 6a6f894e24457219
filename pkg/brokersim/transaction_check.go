package brokersim

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/detourmq/detour/pkg/remoting"
)

// This file checks back on half messages as a 5.x broker's TransactionalMessageCheckService
// does, one round per CheckTransactions call rather than on a timer, so tests decide when. A
// half message no end has settled is put back in the half topic (a copy at new offsets, its
// check count raised) and the copy is checked: CHECK_TRANSACTION_STATE, oneway, to a connection
// that heartbeat the message's producer group, the header naming the copy's offsets and the
// body its stored record with the real topic and queue. An end settles the half message it
// names, so a later round does not check it again. A group with no connection gets no check,
// and the message waits for the next round, as the Java broker logs and moves on.

// propTransactionCheckTimes counts the checks of a half message (TRANSACTION_CHECK_TIMES).
const propTransactionCheckTimes = "TRANSACTION_CHECK_TIMES"

// maxProducerConnsPerGroup bounds the connections kept per producer group; a client's later
// connection replaces its oldest.
const maxProducerConnsPerGroup = 64

// registerProducers records sc under each producer group a HEART_BEAT body names.
func (b *Broker) registerProducers(sc *serverConn, body []byte) {
	var hb remoting.HeartbeatData
	if json.Unmarshal(body, &hb) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.producers == nil {
		b.producers = map[string][]*serverConn{}
	}
	for _, p := range hb.ProducerDataSet {
		conns := slices.DeleteFunc(b.producers[p.GroupName], func(c *serverConn) bool { return c == sc || c.isClosed() })
		if len(conns) >= maxProducerConnsPerGroup {
			conns = conns[1:]
		}
		b.producers[p.GroupName] = append(conns, sc)
	}
}

// settleLocked marks the half message at a commit-log offset as ended. b.mu is held.
func (b *Broker) settleLocked(offset int64) {
	if b.settled == nil {
		b.settled = map[int64]bool{}
	}
	b.settled[offset] = true
}

// CheckTransactions runs one check round over every half message not settled, whatever its
// age, and returns how many checks it sent.
func (b *Broker) CheckTransactions() int {
	type check struct {
		sc  *serverConn
		req *remoting.Command
	}
	var checks []check
	b.mu.Lock()
	halfTopic := b.systemTopicLocked(HalfTopic)
	q := halfTopic.queues[0]
	for _, m := range slices.Clone(q.msgs) {
		_, at, err := remoting.ParseOffsetMsgID(m.MsgID)
		if err != nil || b.settled[at] {
			continue
		}
		sc := b.producerConnLocked(m.Properties[remoting.PropertyProducerGroup])
		if sc == nil {
			continue
		}
		copyOf := b.putBackLocked(q, m)
		b.settleLocked(at)
		if req := b.checkRequest(copyOf); req != nil {
			checks = append(checks, check{sc, req})
		}
	}
	b.mu.Unlock()
	sent := 0
	for _, c := range checks {
		if c.sc.fw.WriteCommand(c.req, true) == nil {
			sent++
		}
	}
	return sent
}

// producerConnLocked is an open connection of the group, or nil. b.mu is held.
func (b *Broker) producerConnLocked(group string) *serverConn {
	conns := slices.DeleteFunc(b.producers[group], (*serverConn).isClosed)
	if len(conns) == 0 {
		delete(b.producers, group)
		return nil
	}
	b.producers[group] = conns
	return conns[len(conns)-1]
}

// putBackLocked stores a copy of half m at the end of the half topic's queue, its check count
// raised, as the Java broker does before each check. b.mu is held.
func (b *Broker) putBackLocked(q *queueState, m StoredMessage) StoredMessage {
	props := make(map[string]string, len(m.Properties)+1)
	for k, v := range m.Properties {
		props[k] = v
	}
	n, _ := strconv.Atoi(props[propTransactionCheckTimes])
	props[propTransactionCheckTimes] = strconv.Itoa(n + 1)
	c := m
	c.Properties, c.QueueOffset = props, q.stored
	c.MsgID = remoting.NewOffsetMsgID(b.storeHost, b.commitLogOffset)
	b.commitLogOffset += int64(len(m.Body)) + int64(propertiesLength(props)) + 100
	q.msgs = append(q.msgs, c)
	q.stored++
	b.stored++
	return c
}

// checkRequest is the CHECK_TRANSACTION_STATE for half m, or nil when m cannot be encoded.
func (b *Broker) checkRequest(m StoredMessage) *remoting.Command {
	_, at, err := remoting.ParseOffsetMsgID(m.MsgID)
	if err != nil {
		return nil
	}
	qid, _ := strconv.Atoi(m.Properties[propRealQueueID])
	born := m.BornHost
	if !born.IsValid() {
		born = b.storeHost
	}
	record, err := remoting.EncodeStoredMessage(&remoting.StoredMessage{
		QueueID: int32(qid), Flag: m.Flag, QueueOffset: m.QueueOffset, CommitLogOffset: at, SysFlag: m.SysFlag,
		BornTimestamp: m.BornTimestamp, BornHost: born, StoreTimestamp: m.StoreTime.UnixMilli(), StoreHost: b.storeHost,
		Body: m.Body, Topic: m.Properties[propRealTopic], Properties: m.Properties,
	})
	if err != nil {
		return nil
	}
	return remoting.NewCheckTransactionStateRequest(&remoting.CheckTransactionStateHeader{
		Topic: HalfTopic, TranStateTableOffset: m.QueueOffset, CommitLogOffset: at,
		MsgID: m.UniqKey, TransactionID: m.UniqKey, OffsetMsgID: m.MsgID, BrokerName: b.name,
	}, record)
}
