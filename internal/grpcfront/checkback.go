package grpcfront

import (
	"bytes"
	"compress/zlib"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// A broker that holds a half message past its check time asks the runtime (it heartbeats the
// topic-named groups of the half messages detour sends), and the endpoint asks a producer that
// publishes the message's topic: a RecoverOrphanedTransactionCommand on its Telemetry stream,
// carrying the message and a transaction id detour made from the check, so the producer's
// TransactionChecker's verdict comes back as an EndTransaction (source SERVER_CHECK) that reaches
// the broker's copy of the half message. The Proxy does the same with the producers it knows by
// topic. A check no stream of this endpoint can take is declined; the broker asks again at its
// next round.

// Bounds of the orphan registry: the topics one stream is registered for, and the commands
// waiting to be written to one stream. A stream whose queue is full misses the check, which the
// broker repeats.
const (
	maxRegisteredTopicsPerStream = 256
	producerStreamQueue          = 16
)

// producerStream is one producer's Telemetry stream, which anything may write to through send.
type producerStream struct {
	stream grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand]
	sendMu sync.Mutex
	out    chan *rmqpb.TelemetryCommand
	done   chan struct{}
}

// send writes cmd; the stream's own loop and its writer share it.
func (ps *producerStream) send(cmd *rmqpb.TelemetryCommand) error {
	ps.sendMu.Lock()
	defer ps.sendMu.Unlock()
	return ps.stream.Send(cmd)
}

// writeQueued writes queued commands until the stream's loop ends.
func (ps *producerStream) writeQueued(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-ps.done:
			return
		case cmd := <-ps.out:
			if ps.send(cmd) != nil {
				return
			}
		}
	}
}

// registered is a stream's entry under one topic: the stream and the target its topic resolved
// to, whose broker scope says which brokers' checks are its.
type registered struct {
	ps     *producerStream
	target front.Target
}

// orphanRegistry holds the producer streams by the RocketMQ topics they publish.
type orphanRegistry struct {
	mu      sync.Mutex
	byTopic map[string][]registered
	next    int // spreads checks over a topic's streams
	checker *producer.TransactionChecker
}

// register puts ps under each target (replacing what it had), and tells the runtime which
// producer groups to heartbeat.
func (o *orphanRegistry) register(ps *producerStream, targets []front.Target) {
	o.mu.Lock()
	o.removeLocked(ps)
	for _, t := range targets {
		o.byTopic[t.Topic] = append(o.byTopic[t.Topic], registered{ps, t})
	}
	groups := o.groupsLocked()
	o.mu.Unlock()
	o.checker.SetProducerGroups(groups)
}

// remove takes ps out of the registry.
func (o *orphanRegistry) remove(ps *producerStream) {
	o.mu.Lock()
	o.removeLocked(ps)
	groups := o.groupsLocked()
	o.mu.Unlock()
	o.checker.SetProducerGroups(groups)
}

func (o *orphanRegistry) removeLocked(ps *producerStream) {
	for topic, regs := range o.byTopic {
		regs = slices.DeleteFunc(regs, func(r registered) bool { return r.ps == ps })
		if len(regs) == 0 {
			delete(o.byTopic, topic)
		} else {
			o.byTopic[topic] = regs
		}
	}
}

// groupsLocked are the half messages' producer groups of the registered topics.
func (o *orphanRegistry) groupsLocked() []string {
	groups := make([]string, 0, len(o.byTopic))
	for _, regs := range o.byTopic {
		groups = append(groups, transactionGroup(regs[0].target))
	}
	slices.Sort(groups)
	return groups
}

// pick is a stream registered for topic whose target's brokers include broker, taking turns.
func (o *orphanRegistry) pick(topic, broker string) (*producerStream, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var fit []*producerStream
	for _, r := range o.byTopic[topic] {
		if _, ours := r.target.Brokers.Local(broker); ours {
			fit = append(fit, r.ps)
		}
	}
	if len(fit) == 0 {
		return nil, false
	}
	o.next++
	return fit[o.next%len(fit)], true
}

// publishedTargets resolves the topics a producer's Settings publish; those that do not
// resolve (or past the bound) are left out.
func (s *Server) publishedTargets(ps *producerStream, settings *rmqpb.Settings) []front.Target {
	var targets []front.Target
	for _, topic := range settings.GetPublishing().GetTopics() {
		if len(targets) == maxRegisteredTopicsPerStream {
			break
		}
		if t, st := s.resolve(ps.stream.Context(), topic); st == nil {
			targets = append(targets, t)
		}
	}
	return targets
}

// recoverOrphan asks a producer of the checked message's topic for its verdict; it declines a
// check no stream here can take.
func (s *Server) recoverOrphan(tc producer.TransactionCheck) bool {
	ps, ok := s.orphans.pick(tc.Message.Topic, tc.Broker)
	if !ok {
		s.metrics.TransactionCheck(metrics.CheckNoProducer)
		return false
	}
	txID := tc.Header.TransactionID
	if txID == "" {
		txID = tc.Header.MsgID
	}
	id, err := encodeTransactionID(txRef{Broker: tc.Broker, CommitLogOffset: tc.Header.CommitLogOffset,
		TranStateTableOffset: tc.Header.TranStateTableOffset, TransactionID: txID})
	if err != nil {
		s.log.Info("A broker's transaction check names a half message detour cannot name", "broker", tc.Broker, "error", err.Error())
		return false
	}
	cmd := &rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &rmqpb.RecoverOrphanedTransactionCommand{Message: orphanMessage(tc.Message), TransactionId: id}}}
	select {
	case ps.out <- cmd:
		s.metrics.TransactionCheck(metrics.CheckAsked)
		return true
	default:
		s.metrics.TransactionCheck(metrics.CheckQueueFull)
		return false
	}
}

// systemPropertyNames are the properties RocketMQ reserves (MessageConst's STRING_HASH_SET): the
// Proxy hands a message's other properties to gRPC clients as user properties, and so does detour.
var systemPropertyNames = map[string]bool{
	"TRACE_ON": true, "MSG_REGION": true, "KEYS": true, "TAGS": true, "WAIT": true, "DELAY": true,
	"RETRY_TOPIC": true, "REAL_TOPIC": true, "REAL_QID": true, "TRAN_MSG": true, "PGROUP": true,
	"MIN_OFFSET": true, "MAX_OFFSET": true, "BUYER_ID": true, "ORIGIN_MESSAGE_ID": true,
	"TRANSFER_FLAG": true, "CORRECTION_FLAG": true, "MQ2_FLAG": true, "RECONSUME_TIME": true,
	"UNIQ_KEY": true, "MAX_RECONSUME_TIMES": true, "CONSUME_START_TIME": true, "POP_CK": true,
	"POP_CK_OFFSET": true, "1ST_POP_TIME": true, "TRAN_PREPARED_QUEUE_OFFSET": true, "DUP_INFO": true,
	"EXTEND_UNIQ_INFO": true, "INSTANCE_ID": true, "CORRELATION_ID": true, "REPLY_TO_CLIENT": true,
	"TTL": true, "ARRIVE_TIME": true, "PUSH_REPLY_TIME": true, "CLUSTER": true, "MSG_TYPE": true,
	"INNER_MULTI_QUEUE_OFFSET": true, "TIMER_DELAY_MS": true, "TIMER_DELAY_SEC": true,
	"TIMER_DELIVER_MS": true, "TIMER_ENQUEUE_MS": true, "TIMER_DEQUEUE_MS": true,
	"TIMER_ROLL_TIMES": true, "TIMER_OUT_MS": true, "TIMER_DEL_UNIQKEY": true,
	"TIMER_DELAY_LEVEL": true, "__BORNHOST": true, "BORN_TIMESTAMP": true, "DLQ_ORIGIN_TOPIC": true,
	"DLQ_ORIGIN_MESSAGE_ID": true, "__CRC32#": true,
}

// orphanMessage is a stored half message as a gRPC client reads it, as the Proxy builds it: the
// UNIQ_KEY as message_id, tag and keys, the body with its MD5 (inflated, see storedBody),
// TRANSACTION as its type, its born and store times and hosts, its
// queue and offset, and every property RocketMQ does not reserve as a user property.
func orphanMessage(m *remoting.StoredMessage) *rmqpb.Message {
	p := m.Properties
	body := storedBody(m)
	sum := md5.Sum(body)
	sys := &rmqpb.SystemProperties{
		MessageId:      p[remoting.PropertyUniqKey],
		BodyDigest:     &rmqpb.Digest{Type: rmqpb.DigestType_MD5, Checksum: strings.ToUpper(hex.EncodeToString(sum[:]))},
		BodyEncoding:   rmqpb.Encoding_IDENTITY,
		MessageType:    rmqpb.MessageType_TRANSACTION,
		BornTimestamp:  timestamppb.New(time.UnixMilli(m.BornTimestamp)),
		BornHost:       bornHost(m),
		StoreTimestamp: timestamppb.New(time.UnixMilli(m.StoreTimestamp)),
		QueueId:        m.QueueID,
		QueueOffset:    &m.QueueOffset,
	}
	if m.StoreHost.IsValid() {
		sys.StoreHost = m.StoreHost.String()
	}
	if sys.MessageId == "" {
		sys.MessageId = remoting.NewOffsetMsgID(m.StoreHost, m.CommitLogOffset)
	}
	if tag, ok := p[remoting.PropertyTags]; ok {
		sys.Tag = &tag
	}
	if keys := p[remoting.PropertyKeys]; keys != "" {
		sys.Keys = strings.Split(keys, keySeparator)
	}
	user := make(map[string]string, len(p))
	for k, v := range p {
		if !systemPropertyNames[k] {
			user[k] = v
		}
	}
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: m.Topic}, UserProperties: user, SystemProperties: sys, Body: body}
}

// storedBody is the body as the producer sent it: a body the runtime (or a remoting client)
// stored zlib-compressed is inflated, up to the largest message, so the checker reads what was
// sent. The Proxy passes such a body on marked GZIP, which the SDKs fail to read. A body that
// does not inflate is passed on as stored.
func storedBody(m *remoting.StoredMessage) []byte {
	if m.SysFlag&producer.SysFlagCompressed == 0 {
		return m.Body
	}
	// No type bits is the zlib of producers from before compression types.
	if t := m.SysFlag & producer.SysFlagCompressionType; t != 0 && t != producer.SysFlagZlib {
		return m.Body
	}
	zr, err := zlib.NewReader(bytes.NewReader(m.Body))
	if err != nil {
		return m.Body
	}
	out, err := io.ReadAll(io.LimitReader(zr, producer.MaxMessageSize+1))
	if err != nil || len(out) > producer.MaxMessageSize {
		return m.Body
	}
	return out
}

// bornHost is the __BORNHOST property when the message has one, the record's born host
// otherwise, as the Proxy reads it.
func bornHost(m *remoting.StoredMessage) string {
	if h := strings.TrimSpace(m.Properties["__BORNHOST"]); h != "" {
		return h
	}
	if !m.BornHost.IsValid() {
		return ""
	}
	return net.JoinHostPort(m.BornHost.Addr().String(), strconv.Itoa(int(m.BornHost.Port())))
}
