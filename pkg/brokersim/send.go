package brokersim

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/detourmq/detour/pkg/remoting"
)

// This file answers sends the way a RocketMQ 5.x broker does, in the order it does: a body
// must be present, then the checks of the send processor's msgCheck (topic name, topics clients
// may not send to, topic lookup or auto-creation, queue id), then what the processor and the
// store's put hooks do to a message (MSG_REGION, TRACE_ON, UNIQ_KEY and CLUSTER added,
// transactional half messages and delayed messages moved to system topics), then the store's
// size limits. Remarks are the Java broker's, so tests that read them see what production logs
// show.

// System topics where a Java broker keeps messages that consumers of the topic they were sent
// to must not see yet. Tests can read them with Broker.Messages.
const (
	// HalfTopic holds transactional half messages (TRAN_MSG=true) until the producer commits
	// or rolls them back (END_TRANSACTION, transaction.go). The simulator never checks back.
	HalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// ScheduleTopic holds messages with a delay level (DELAY > 0), in queue level-1, until they
	// are due. The simulator never delivers them.
	ScheduleTopic = "SCHEDULE_TOPIC_XXXX"
	// TimerTopic holds timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC or TIMER_DELAY_MS in the
	// future) in queue 0 until they are due. The simulator never delivers them.
	TimerTopic = "rmq_sys_wheel_timer"
)

// Limits and defaults of a Java broker that sends run into.
const (
	// maxMessageSize is MessageStoreConfig.maxMessageSize: the store refuses longer bodies.
	maxMessageSize = 4 << 20
	// maxPropertiesLength is the longest properties string the store can write: its length
	// goes into a Java short.
	maxPropertiesLength = 1<<15 - 1
	// maxDelayLevel is the number of levels in the default messageDelayLevel ("1s 5s ... 2h");
	// higher levels are lowered to it.
	maxDelayLevel = 18
	// timerMaxDelay is timerMaxDelaySec: timer messages due later are refused.
	timerMaxDelay = 3 * 24 * time.Hour
	// timerPrecisionMs is the timer wheel's default precision: due times are rounded down to it.
	timerPrecisionMs = 1000
	// sysFlagTransactionMask selects the transaction type in a message's sysFlag; zero means
	// not transactional and sysFlagTransactionCommit a committed transaction.
	sysFlagTransactionMask   = 0xC
	sysFlagTransactionCommit = 0x8
)

// Properties the broker adds or reads that the producer package has no name for.
const (
	propCluster         = "CLUSTER"
	propRealTopic       = "REAL_TOPIC"
	propRealQueueID     = "REAL_QID"
	propTimerOutMs      = "TIMER_OUT_MS"
	propTimerDelUniqKey = "TIMER_DEL_UNIQKEY"
)

// Remarks of the Java broker that do not depend on the request.
var (
	// remarkMessageIllegal answers a store refusal for size (body or properties).
	remarkMessageIllegal = fmt.Sprintf("the message is illegal, maybe msg body or properties length not matched. msg body length limit %dB, msg properties length limit 32KB.", maxMessageSize)
	// remarkTimerIllegal answers a timer message whose time does not parse or is too far off.
	// remarkSendQueueTimeout answers a send refused by flow control: the fast-failure sweep found
	// it waiting in the send queue past waitTimeMillsInSendQueue (200 ms by default).
	remarkSendQueueTimeout = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 200ms, size of queue: 1"
	remarkTimerIllegal     = fmt.Sprintf("timer message illegal, the delay time should not be bigger than the max delay %dms; or if set del msg, the delay time should be bigger than the current time", timerMaxDelay.Milliseconds())
)

// faqSuggestion is what the Java broker appends to remarks that ask the user to act.
const faqSuggestion = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."

// systemTopics are the topics UPDATE_AND_CREATE_TOPIC refuses to touch (TopicValidator's system
// set in 5.5.0); names starting with systemTopicPrefix are system topics too.
var systemTopics = map[string]bool{
	"TBW102": true, "SCHEDULE_TOPIC_XXXX": true, "BenchmarkTest": true, "RMQ_SYS_TRANS_HALF_TOPIC": true,
	"RMQ_SYS_TRACE_TOPIC": true, "RMQ_SYS_TRANS_OP_HALF_TOPIC": true, "TRANS_CHECK_MAX_TIME_TOPIC": true,
	"SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true, "CHECKPOINT_TOPIC": true,
	"RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC": true, "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC": true,
}

const systemTopicPrefix = "rmq_sys_"

// notSendableTopics are the topics no client may send to (TopicValidator's not-allowed-send set
// in 5.5.0): the broker fills them itself.
var notSendableTopics = map[string]bool{
	"SCHEDULE_TOPIC_XXXX": true, "RMQ_SYS_TRANS_HALF_TOPIC": true, "RMQ_SYS_TRANS_OP_HALF_TOPIC": true,
	"TRANS_CHECK_MAX_TIME_TOPIC": true, "SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true,
	"RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC": true, "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC": true,
}

func isSystemTopic(t string) bool { return systemTopics[t] || strings.HasPrefix(t, systemTopicPrefix) }

// topicRemark returns why a Java broker refuses a topic name, or "" when it takes it. The
// checks run in the broker's order, so a name with several faults gets the same remark.
func topicRemark(t string) string {
	if strings.TrimFunc(t, javaWhitespace) == "" {
		return "The specified topic is blank."
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			return "The specified topic: " + t + ", contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
		}
	}
	// Retry and dead-letter topics embed a group name, so they may be longer.
	if strings.HasPrefix(t, "%RETRY%") || strings.HasPrefix(t, "%DLQ%") {
		if len(t) > 255 {
			return "The specified topic is DLQ or Retry topic: " + t + ", and it's longer than topic max length: 255"
		}
		return ""
	}
	if len(t) > 127 {
		return "The specified topic: " + t + ", is longer than topic max length: 127"
	}
	return ""
}

// javaWhitespace reports whether Character.isWhitespace holds for r, which decides whether a
// Java broker calls a topic blank: Unicode spaces except the non-breaking ones, plus the ASCII
// control characters \t \n \v \f \r and 0x1C-0x1F.
func javaWhitespace(r rune) bool {
	switch {
	case r == '\u00a0' || r == '\u2007' || r == '\u202f':
		return false
	case r >= '\t' && r <= '\r' || r >= 0x1c && r <= 0x1f:
		return true
	}
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// describe renders a topic as TopicConfig.toString does; the queue id remark includes it.
func (t *topicState) describe(name string) string {
	perm := []byte("---")
	if t.perm&remoting.PermRead != 0 {
		perm[0] = 'R'
	}
	if t.perm&remoting.PermWrite != 0 {
		perm[1] = 'W'
	}
	if t.perm&remoting.PermInherit != 0 {
		perm[2] = 'X'
	}
	return fmt.Sprintf("TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%s, topicFilterType=SINGLE_TAG, topicSysFlag=%d, order=%t, attributes={}]",
		name, t.readQueues, t.writeQueues, perm, t.sysFlag, t.order)
}

// javaBool parses a flag as Boolean.parseBoolean does: "true" in any case, anything else false.
func javaBool(v string) bool { return strings.EqualFold(v, "true") }

// Some refusals are Java exceptions the broker's request handler catches: it answers
// SYSTEM_ERROR with the exception's text and its first stack frame. The frames below are those
// of RocketMQ 5.5.0 on Java 17; other versions name other lines.
const (
	frameNumberFormat = "java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)"
	remarkNoBody      = `java.lang.NullPointerException: Cannot read the array length because the return value of "org.apache.rocketmq.remoting.protocol.RemotingCommand.getBody()" is null, ` +
		"org.apache.rocketmq.broker.processor.AbstractSendMessageProcessor.buildMsgContext(AbstractSendMessageProcessor.java:361)"
	remarkNoWriteQueue = "java.lang.ArithmeticException: / by zero, " +
		"org.apache.rocketmq.broker.processor.AbstractSendMessageProcessor.randomQueueId(AbstractSendMessageProcessor.java:568)"
	remarkBatchTooLarge = "java.lang.RuntimeException: message body size exceeded, " +
		"org.apache.rocketmq.store.MessageExtEncoder.encode(MessageExtEncoder.java:290)"
)

// numberFormat is the remark of the SYSTEM_ERROR a Java broker answers when a number it parses
// is not one.
func numberFormat(v string) string {
	return `java.lang.NumberFormatException: For input string: "` + v + `", ` + frameNumberFormat
}

// delayLevel reads the DELAY property as Message.getDelayTimeLevel does: 0 when absent, an
// error when it is not a 32-bit integer.
func delayLevel(props map[string]string) (int, error) {
	v, ok := props[remoting.PropertyDelayLevel]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s", numberFormat(v))
	}
	return int(n), nil
}

// propertiesLength is the UTF-8 length of the properties string the store writes for props.
func propertiesLength(props map[string]string) int {
	n := 0
	for k, v := range props {
		n += len(k) + len(v) + 2
	}
	return n
}

// refusal is a send the broker answers with an error code.
type refusal struct {
	code   int16
	remark string
}

// placement is where a message is stored: the topic and queue it was sent to, or the system
// topic a half or delayed message is moved to.
type placement struct {
	topic string
	queue int
}

// moveTo stores the message in a system topic, recording where it was sent in REAL_TOPIC and
// REAL_QID as the broker does so it can deliver it there later.
func (p *placement) moveTo(props map[string]string, topic string, queue int) {
	props[propRealTopic] = p.topic
	props[propRealQueueID] = strconv.Itoa(p.queue)
	p.topic, p.queue = topic, queue
}

// schedule applies the store's put hook for delayed messages: a delay level moves the message to
// ScheduleTopic (and voids any TIMER_* property), a TIMER_* time in the future moves it to
// TimerTopic. It reports whether the message was moved.
func schedule(props map[string]string, p *placement, now time.Time) (bool, *refusal) {
	level, err := delayLevel(props)
	if err != nil {
		return false, &refusal{remoting.SystemError, err.Error()}
	}
	if level > 0 {
		delete(props, remoting.PropertyTimerDeliverMS)
		delete(props, remoting.PropertyTimerDelaySec)
		delete(props, remoting.PropertyTimerDelayMS)
		if level > maxDelayLevel {
			level = maxDelayLevel
			props[remoting.PropertyDelayLevel] = strconv.Itoa(level)
		}
		p.moveTo(props, ScheduleTopic, level-1)
		return true, nil
	}
	sec, hasSec := props[remoting.PropertyTimerDelaySec]
	ms, hasMs := props[remoting.PropertyTimerDelayMS]
	at, hasAt := props[remoting.PropertyTimerDeliverMS]
	if _, rolled := props[propTimerOutMs]; rolled || p.topic == TimerTopic || !(hasSec || hasMs || hasAt) {
		return false, nil
	}
	nowMs := now.UnixMilli()
	var due int64
	switch {
	case hasSec:
		n, err := strconv.ParseInt(sec, 10, 64)
		if err != nil {
			return false, &refusal{remoting.MessageIllegal, remarkTimerIllegal}
		}
		due = nowMs + n*1000
	case hasMs:
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return false, &refusal{remoting.MessageIllegal, remarkTimerIllegal}
		}
		due = nowMs + n
	default:
		n, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			return false, &refusal{remoting.MessageIllegal, remarkTimerIllegal}
		}
		due = n
	}
	if due <= nowMs {
		// Already due: delivered at once, unless it asks to delete a timer message.
		if _, del := props[propTimerDelUniqKey]; del {
			return false, &refusal{remoting.MessageIllegal, remarkTimerIllegal}
		}
		return false, nil
	}
	if due-nowMs > timerMaxDelay.Milliseconds() {
		return false, &refusal{remoting.MessageIllegal, remarkTimerIllegal}
	}
	if due%timerPrecisionMs == 0 {
		due -= timerPrecisionMs
	} else {
		due = due / timerPrecisionMs * timerPrecisionMs
	}
	props[propTimerOutMs] = strconv.FormatInt(due, 10)
	p.moveTo(props, TimerTopic, 0)
	return true, nil
}

// systemTopicLocked returns a system topic that holds hidden messages, creating it with the
// queue count a Java broker gives it. b.mu is held.
func (b *Broker) systemTopicLocked(name string) *topicState {
	if t := b.topics[name]; t != nil {
		return t
	}
	n := 1
	if name == ScheduleTopic {
		n = maxDelayLevel
	}
	return b.upsertTopicLocked(name, n, n, remoting.PermReadWrite, 0)
}

// remoteAddr is the producer's address as the broker writes it in remarks.
func (sc *serverConn) remoteAddr() string { return sc.nc.RemoteAddr().String() }

// send stores a send request's message(s) and builds the answer.
func (b *Broker) send(sc *serverConn, req *remoting.Command, h *remoting.SendHeader, parseErr error, batch []*remoting.Message) *remoting.Command {
	if parseErr != nil {
		return remoting.NewResponse(req, remoting.SystemError, "brokersim: "+parseErr.Error())
	}
	// A frame without a body reaches the processor with a null body, which it dereferences
	// before any check.
	if len(req.Body) == 0 {
		return remoting.NewResponse(req, remoting.SystemError, remarkNoBody)
	}
	// msgCheck. A Java broker refuses only when the broker itself is not writable and the topic
	// is ordered; the topic's own permission is never checked on a send (it only shapes the
	// routes clients get). The simulator has no broker-wide permission, so nothing is refused
	// for permission here.
	if remark := topicRemark(h.Topic); remark != "" {
		return remoting.NewResponse(req, remoting.InvalidParameter, remark)
	}
	if notSendableTopics[h.Topic] {
		return remoting.NewResponse(req, remoting.NoPermission, "Sending message to topic["+h.Topic+"] is forbidden.")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[h.Topic]
	if t == nil {
		if !b.autoCreateRuntime.Load() {
			return remoting.NewResponse(req, remoting.TopicNotExist, "topic["+h.Topic+"] not exist, apply first please!"+faqSuggestion)
		}
		n := b.opts.DefaultQueues
		if h.DefaultTopicQueueNums > 0 && int(h.DefaultTopicQueueNums) < n {
			n = int(h.DefaultTopicQueueNums)
		}
		t = b.upsertTopicLocked(h.Topic, n, n, remoting.PermReadWrite, 0)
	}
	// Any queue the topic has for reading or writing is valid; from 5.3.2 on others get
	// INVALID_PARAMETER, which producers do not retry (SYSTEM_ERROR before).
	qid := int(h.QueueID)
	if qid >= max(t.readQueues, t.writeQueues) {
		return remoting.NewResponse(req, remoting.InvalidParameter,
			fmt.Sprintf("request queueId[%d] is illegal, %s Producer: %s", qid, t.describe(h.Topic), sc.remoteAddr()))
	}
	if qid < 0 {
		if t.writeQueues <= 0 {
			// The broker picks a random write queue modulo their count, which throws.
			return remoting.NewResponse(req, remoting.SystemError, remarkNoWriteQueue)
		}
		qid = rand.IntN(t.writeQueues)
	}
	if h.Batch {
		return b.storeBatchLocked(req, h, t, qid, batch)
	}
	return b.storeOneLocked(req, h, t, qid, sc.remoteAddrPort())
}

// remoteAddrPort is the producer's address as a stored message's born host.
func (sc *serverConn) remoteAddrPort() netip.AddrPort {
	ap, _ := netip.ParseAddrPort(sc.nc.RemoteAddr().String())
	return ap
}

// storeOneLocked stores a single message sent from born. b.mu is held.
func (b *Broker) storeOneLocked(req *remoting.Command, h *remoting.SendHeader, t *topicState, qid int, born netip.AddrPort) *remoting.Command {
	// Before anything else the processor writes the broker's region and trace switch into the
	// properties (for its send hooks), and they are stored with the message.
	props := remoting.DecodeProperties(h.Properties)
	props[remoting.PropertyMsgRegion] = b.opts.Region
	props[remoting.PropertyTraceSwitch] = "true"
	if props[remoting.PropertyUniqKey] == "" {
		props[remoting.PropertyUniqKey] = remoting.NewUniqID()
	}
	props[propCluster] = b.opts.Cluster
	sysFlag := h.SysFlag
	at := placement{h.Topic, qid}

	// A half message goes to HalfTopic, unless it is a redelivery with a delay level (how old
	// clients sent retries of transactional messages).
	half := javaBool(props[remoting.PropertyTransactionPrep])
	if half && h.ReconsumeTimes > 0 {
		level, err := delayLevel(props)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		half = level <= 0
	}
	if half {
		props[remoting.PropertyTransactionID] = props[remoting.PropertyUniqKey]
		at.moveTo(props, HalfTopic, 0)
		sysFlag &^= sysFlagTransactionMask
	}
	// The store's delay hook applies to messages that are not transactional or are
	// committed, which includes half messages once marked as not transactional above.
	delayed := false
	if tx := sysFlag & sysFlagTransactionMask; tx == 0 || tx == sysFlagTransactionCommit {
		var r *refusal
		if delayed, r = schedule(props, &at, time.Now()); r != nil {
			return remoting.NewResponse(req, r.code, r.remark)
		}
	}
	plen := propertiesLength(props)
	if plen > maxPropertiesLength || len(req.Body) > maxMessageSize {
		return remoting.NewResponse(req, remoting.MessageIllegal, remarkMessageIllegal)
	}

	dest := t
	if at.topic != h.Topic {
		dest = b.systemTopicLocked(at.topic)
	}
	q := dest.queues[at.queue]
	msgID := remoting.NewOffsetMsgID(b.storeHost, b.commitLogOffset)
	b.commitLogOffset += int64(len(req.Body)) + int64(plen) + 100
	if !b.opts.CountOnly {
		q.msgs = append(q.msgs, StoredMessage{
			Topic: at.topic, QueueID: at.queue, QueueOffset: q.stored, MsgID: msgID,
			UniqKey: props[remoting.PropertyUniqKey], Tags: props[remoting.PropertyTags],
			Keys: props[remoting.PropertyKeys], Body: req.Body, Properties: props,
			ProducerGroup: h.ProducerGroup, BornTimestamp: h.BornTimestamp, BornHost: born, StoreTime: time.Now(),
			SysFlag: sysFlag, Flag: h.Flag,
		})
	}
	offset := q.stored
	q.stored++
	b.stored++
	if half {
		b.half++
	}
	if delayed {
		b.delayed++
	}
	// The answer names the queue the producer asked for but the offset in the queue that
	// holds the message, as a Java broker's does.
	resp := remoting.NewSendResponse(req, remoting.SendResponse{
		Code: remoting.Success, MsgID: msgID, QueueID: int32(qid), QueueOffset: offset,
		RegionID: b.opts.Region, TraceOn: true, TransactionID: props[remoting.PropertyUniqKey],
	})
	if handle := b.recallHandle(req, props); handle != "" {
		resp.ExtFields["recallHandle"] = handle
	}
	return resp
}

// recallHandle returns the handle a 5.x broker answers for a timer message, with which the
// producer may recall it before it is due: URL-safe base64 of "v1 topic broker dueMs+1 uniqKey".
// Other messages, retry topics and requests with the batch code get none.
func (b *Broker) recallHandle(req *remoting.Command, props map[string]string) string {
	out, real := props[propTimerOutMs], props[propRealTopic]
	if req.Code == remoting.SendBatchMessage || out == "" || real == "" || strings.HasPrefix(real, "%RETRY%") {
		return ""
	}
	due, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return ""
	}
	raw := strings.Join([]string{"v1", real, b.name, strconv.FormatInt(due+1, 10), props[remoting.PropertyUniqKey]}, " ")
	return base64.URLEncoding.EncodeToString([]byte(raw))
}

// storeBatchLocked stores the messages of a batch. A Java broker stores the inner messages as
// they come (no CLUSTER or UNIQ_KEY added) and refuses what a batch cannot be: transactional,
// delayed, or for a retry topic. b.mu is held.
func (b *Broker) storeBatchLocked(req *remoting.Command, h *remoting.SendHeader, t *topicState, qid int, batch []*remoting.Message) *remoting.Command {
	if strings.HasPrefix(h.Topic, "%RETRY%") {
		return remoting.NewResponse(req, remoting.MessageIllegal, "batch request does not support retry group "+h.Topic)
	}
	props := remoting.DecodeProperties(h.Properties)
	if h.SysFlag&sysFlagTransactionMask != 0 {
		return remoting.NewResponse(req, remoting.MessageIllegal, remarkMessageIllegal)
	}
	level, err := delayLevel(props)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	if level > 0 {
		return remoting.NewResponse(req, remoting.MessageIllegal, remarkMessageIllegal)
	}
	if len(req.Body) > maxMessageSize {
		// The batch encoder throws instead of returning a status.
		return remoting.NewResponse(req, remoting.SystemError, remarkBatchTooLarge)
	}
	if len(batch) == 0 {
		// Not reachable from the wire: an empty body is refused above.
		return remoting.NewResponse(req, remoting.SystemError, "brokersim: empty batch")
	}
	q := t.queues[qid]
	now := time.Now()
	first := q.stored
	ids := make([]string, 0, len(batch))
	for _, m := range batch {
		msgID := remoting.NewOffsetMsgID(b.storeHost, b.commitLogOffset)
		b.commitLogOffset += int64(len(m.Body)) + int64(propertiesLength(m.Properties)) + 100
		ids = append(ids, msgID)
		if !b.opts.CountOnly {
			q.msgs = append(q.msgs, StoredMessage{
				Topic: h.Topic, QueueID: qid, QueueOffset: q.stored, MsgID: msgID,
				UniqKey: m.Properties[remoting.PropertyUniqKey], Tags: m.Properties[remoting.PropertyTags],
				Keys: m.Properties[remoting.PropertyKeys], Body: m.Body, Properties: m.Properties,
				ProducerGroup: h.ProducerGroup, BornTimestamp: h.BornTimestamp, StoreTime: now,
				SysFlag: h.SysFlag, Flag: m.Flag, Batch: true,
			})
		}
		q.stored++
		b.stored++
	}
	// transactionId is the batch's own UNIQ_KEY, if the producer gave it one; batchUniqId is
	// only answered for topics with batch consume queues, which the simulator does not have.
	return remoting.NewSendResponse(req, remoting.SendResponse{
		Code: remoting.Success, MsgID: strings.Join(ids, ","), QueueID: int32(qid), QueueOffset: first,
		RegionID: b.opts.Region, TraceOn: true, TransactionID: props[remoting.PropertyUniqKey],
	})
}
