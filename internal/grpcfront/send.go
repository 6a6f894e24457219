package grpcfront

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// keySeparator joins a message's keys in the KEYS property, as RocketMQ's clients do.
const keySeparator = " "

// A send leaves part of the call's time for its answer: a client whose deadline passes while the
// runtime is still trying sees DEADLINE_EXCEEDED with no reason and no RocketMQ status. The
// Proxy answers within its 2 s broker budget of the Java SDK's 3 s; detour keeps a fifth of what
// remains, at most answerReserveMax, and answers PROXY_TIMEOUT in time.
const (
	answerReserveShare = 5
	answerReserveMax   = time.Second
)

// sendContext is ctx with a deadline that leaves room for the answer before the client's.
func sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-min(time.Until(dl)/answerReserveShare, answerReserveMax)))
}

// storeAsSent is ctx under which the runtime stores every body as the client sent it (plain,
// after any GZIP the client applied is undone), never compressed, as the Proxy does for the gRPC
// SDKs. The runtime would compress bodies from 4 KiB as RocketMQ's remoting producer does, and
// the Proxy hands a compressed stored body to gRPC consumers as it is, zlib bytes marked GZIP:
// the Java, Go, Python, C++ and C# SDKs inflate them, but the Node.js SDK gunzips (and fails)
// and the Rust SDK hands the compressed bytes to the application. Stored plain, every consumer
// reads the body the producer sent.
func storeAsSent(ctx context.Context) context.Context {
	return producer.WithBodyAsIs(ctx)
}

// outgoing is a request's message as the runtime sends it, with how it asks to be sent.
type outgoing struct {
	msg       *producer.Message
	id        string
	group     string
	deliverAt time.Time
	// transactional: sent as a half message, ended by EndTransaction.
	transactional bool
}

// SendMessage sends the request's messages, detour picking the broker whatever queue the client
// chose: one message by the runtime's send loop, its message group's queue (FIFO) or its delivery
// time (delay) as it asks; several messages as one batch, stored together on one queue. Each
// entry says whether its message was stored; the answer's status is the first entry's failure,
// or OK. The sending ends early enough for the answer to reach the client before its deadline.
func (s *Server) SendMessage(ctx context.Context, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	who, st := s.admit(ctx)
	if st != nil {
		return &rmqpb.SendMessageResponse{Status: st}, nil
	}
	msgs := req.GetMessages()
	out, st := s.decodeRequest(msgs)
	if st != nil {
		return refusedAll(msgs, st), nil
	}
	if st := who.authorizeSend(msgs[0].GetTopic()); st != nil {
		return refusedAll(msgs, st), nil
	}
	target, st := s.resolve(ctx, msgs[0].GetTopic())
	if st != nil {
		return refusedAll(msgs, st), nil
	}
	if st := s.checkAgainstBrokers(ctx, target.RouteKey(), out); st != nil {
		return refusedAll(msgs, st), nil
	}
	for _, o := range out {
		o.msg.Topic = target.Topic
	}
	ctx, cancel := sendContext(storeAsSent(ctx))
	defer cancel()
	begin := time.Now()
	entries := s.sendResolved(ctx, target, out)
	s.countSent(target, out[0].transactional, entries, time.Since(begin))
	resp := &rmqpb.SendMessageResponse{Status: okStatus(), Entries: entries}
	for _, e := range entries {
		if e.Status.Code != rmqpb.Code_OK {
			resp.Status = e.Status
			break
		}
	}
	return resp, nil
}

// sendResolved sends the decoded messages of a request to their resolved target: a half
// message, one message, or several as one batch.
func (s *Server) sendResolved(ctx context.Context, target front.Target, out []outgoing) []*rmqpb.SendResultEntry {
	switch {
	case len(out) == 1 && out[0].transactional:
		return []*rmqpb.SendResultEntry{s.sendHalf(ctx, target, out[0])}
	case len(out) == 1:
		return []*rmqpb.SendResultEntry{s.sendOne(ctx, target.RouteKey(), out[0])}
	}
	return s.sendBatch(ctx, target.RouteKey(), out)
}

// countSent counts what the runtime did with a request's messages, by the brokers' Cluster.
func (s *Server) countSent(target front.Target, halfMessage bool, entries []*rmqpb.SendResultEntry, took time.Duration) {
	stored := 0
	for _, e := range entries {
		if storedCode(e.GetStatus().GetCode()) {
			stored++
		}
	}
	if halfMessage && entries[0].GetStatus().GetCode() != rmqpb.Code_OK {
		// A half message stored without SEND_OK was rolled back (sendHalf): nothing stays stored.
		stored = 0
	}
	s.metrics.Door(target.Brokers).Sent(stored, len(entries)-stored, took)
}

// checkAgainstBrokers applies the rules that need the topic's brokers' word, from the cache of
// their facts: every body within their maxMessageSize, and the first message's type one the
// topic's message.type takes (as the Proxy checks a request by its first message). Facts no
// broker gave leave the rule unchecked: a broker that cannot say is no reason to refuse.
func (s *Server) checkAgainstBrokers(ctx context.Context, route string, out []outgoing) *rmqpb.Status {
	facts, ok := s.facts.get(ctx, route)
	if !ok {
		return nil
	}
	if facts.MaxMessageSize > 0 {
		if st := checkBodyFits(out, facts.MaxMessageSize); st != nil {
			return st
		}
	}
	if facts.MessageType != "" && !s.opts.SkipMessageTypeCheck {
		return checkMessageType(facts.MessageType, out[0])
	}
	return nil
}

// refusedAll is the answer refusing every message of a request with st.
func refusedAll(msgs []*rmqpb.Message, st *rmqpb.Status) *rmqpb.SendMessageResponse {
	resp := &rmqpb.SendMessageResponse{Status: st, Entries: make([]*rmqpb.SendResultEntry, len(msgs))}
	for i, m := range msgs {
		resp.Entries[i] = &rmqpb.SendResultEntry{Status: st, MessageId: m.GetSystemProperties().GetMessageId()}
	}
	return resp
}

// decodeRequest checks a request's messages in the Proxy's order (the request, the topic, then
// each message) and turns them into the runtime's, or answers the status naming the first rule
// one breaks.
func (s *Server) decodeRequest(msgs []*rmqpb.Message) ([]outgoing, *rmqpb.Status) {
	if len(msgs) == 0 {
		return nil, newStatus(rmqpb.Code_MESSAGE_CORRUPTED, "the request holds no message")
	}
	if st := checkTopicName(msgs[0].GetTopic().GetName()); st != nil {
		return nil, st
	}
	if len(msgs) > producer.MaxBatchMessages {
		return nil, newStatus(rmqpb.Code_BAD_REQUEST, "the request holds %d messages, over the limit of %d", len(msgs), producer.MaxBatchMessages)
	}
	out := make([]outgoing, len(msgs))
	budget := s.opts.MaxBodySize
	for i, m := range msgs {
		if m.GetTopic().GetName() != msgs[0].GetTopic().GetName() || m.GetTopic().GetResourceNamespace() != msgs[0].GetTopic().GetResourceNamespace() {
			return nil, newStatus(rmqpb.Code_MESSAGE_CORRUPTED, "message %d names topic %s, message 0 %s: one request sends to one topic",
				i, m.GetTopic().GetName(), msgs[0].GetTopic().GetName())
		}
		o, st := s.decodeMessage(m, budget)
		if st != nil {
			if len(msgs) > 1 {
				st.Message = fmt.Sprintf("message %d: %s", i, st.Message)
			}
			return nil, st
		}
		budget -= len(o.msg.Body)
		out[i] = o
	}
	if len(out) > 1 {
		for i, o := range out {
			if o.group != "" || !o.deliverAt.IsZero() || o.transactional {
				return nil, newStatus(rmqpb.Code_BAD_REQUEST,
					"message %d has a message group or a delivery time or is transactional: several messages in one request are a batch, stored together at once on one queue, so such messages are sent one per request", i)
			}
		}
	}
	return out, nil
}

// decodeMessage turns one message into the runtime's; budget is what is left of the body limit.
// The Proxy's rules come in its order: body, user properties, tag, keys, their total size,
// message id, then the type's own (recovery time, delivery time, message group).
func (s *Server) decodeMessage(m *rmqpb.Message, budget int) (outgoing, *rmqpb.Status) {
	sys := m.GetSystemProperties()
	switch sys.GetMessageType() {
	case rmqpb.MessageType_LITE, rmqpb.MessageType_PRIORITY:
		return outgoing{}, newStatus(rmqpb.Code_UNSUPPORTED, "detour does not send %s messages", sys.GetMessageType())
	}
	if len(m.GetBody()) == 0 {
		return outgoing{}, newStatus(rmqpb.Code_MESSAGE_BODY_EMPTY, "the message body is empty")
	}
	body, st := s.messageBody(m.GetBody(), sys.GetBodyEncoding(), budget)
	if st != nil {
		return outgoing{}, st
	}
	o := outgoing{id: sys.GetMessageId(), group: sys.GetMessageGroup(), msg: &producer.Message{
		Tags: sys.GetTag(), Keys: strings.Join(sys.GetKeys(), keySeparator), Body: body,
		Properties: make(map[string]string, len(m.GetUserProperties())+1),
	}}
	if st := checkStrings(m, sys); st != nil {
		return outgoing{}, st
	}
	for k, v := range m.GetUserProperties() {
		o.msg.Properties[k] = v
	}
	if strings.TrimSpace(o.id) == "" || len(o.id) > 128 {
		return outgoing{}, newStatus(rmqpb.Code_ILLEGAL_MESSAGE_ID, "a message needs a message_id of 1 to 128 characters, as the client makes")
	}
	o.msg.Properties[remoting.PropertyUniqKey] = o.id
	if st := messageKind(&o, sys); st != nil {
		return outgoing{}, st
	}
	return o, nil
}

// checkStrings applies the Proxy's rules on a message's user properties, tag and keys, and their
// total size.
func checkStrings(m *rmqpb.Message, sys *rmqpb.SystemProperties) *rmqpb.Status {
	size, st := checkUserProperties(m.GetUserProperties())
	if st != nil {
		return st
	}
	if st := checkTag(sys.GetTag()); st != nil {
		return st
	}
	size += len(sys.GetTag())
	for _, k := range sys.GetKeys() {
		if st := checkKey(k); st != nil {
			return st
		}
		size += len(k)
	}
	if size > maxUserPropertySize {
		return newStatus(rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE,
			"the user properties, tag and keys are %d bytes together, over the limit of %d", size, maxUserPropertySize)
	}
	return nil
}

// messageKind reads how o asks to be sent (transactional, a delivery time, a message group) and
// checks each as the Proxy does; detour refuses the combinations it cannot send as asked.
func messageKind(o *outgoing, sys *rmqpb.SystemProperties) *rmqpb.Status {
	if sys.DeliveryTimestamp != nil {
		if err := sys.DeliveryTimestamp.CheckValid(); err != nil {
			return newStatus(rmqpb.Code_ILLEGAL_DELIVERY_TIME, "delivery_timestamp: %v", err)
		}
		o.deliverAt = sys.DeliveryTimestamp.AsTime()
	}
	if sys.GetMessageType() == rmqpb.MessageType_TRANSACTION {
		if st := transactional(o, sys); st != nil {
			return st
		}
	}
	if !o.deliverAt.IsZero() {
		if st := checkDeliveryDelay(time.Until(o.deliverAt).Milliseconds()); st != nil {
			return st
		}
	}
	if st := checkGroup(o.group); st != nil {
		return st
	}
	if o.group != "" && !o.deliverAt.IsZero() {
		return newStatus(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
			"a message has a message group (FIFO) or a delivery time (delay), not both")
	}
	return nil
}

// maxTransactionRecovery bounds a half message's orphaned-transaction recovery time, as the
// Proxy's maxTransactionRecoverySecond (1 h) does.
const maxTransactionRecovery = time.Hour

// transactional marks o as a half message: neither a message group nor a delivery time goes
// with it, and its orphaned-transaction recovery time, when set, becomes the broker's
// CHECK_IMMUNITY_TIME_IN_SECONDS (no check-back before it), in whole seconds as the Proxy
// passes it.
func transactional(o *outgoing, sys *rmqpb.SystemProperties) *rmqpb.Status {
	if o.group != "" || !o.deliverAt.IsZero() {
		return newStatus(rmqpb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
			"a transactional message has neither a message group nor a delivery time")
	}
	o.transactional = true
	if sys.OrphanedTransactionRecoveryDuration == nil {
		return nil
	}
	d := sys.OrphanedTransactionRecoveryDuration
	if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
		return newStatus(rmqpb.Code_BAD_REQUEST, "orphaned_transaction_recovery_duration is not a non-negative duration")
	}
	if d.AsDuration() > maxTransactionRecovery {
		return newStatus(rmqpb.Code_BAD_REQUEST, "the orphaned transaction recovery time is %s, over the limit of %s", d.AsDuration(), maxTransactionRecovery)
	}
	o.msg.Properties[remoting.PropertyCheckImmunitySeconds] = strconv.FormatInt(int64(d.AsDuration()/time.Second), 10)
	return nil
}

// messageBody is the body as stored: decompressed when the client sent it gzipped, at most
// budget bytes either way.
func (s *Server) messageBody(body []byte, enc rmqpb.Encoding, budget int) ([]byte, *rmqpb.Status) {
	tooLarge := func(n string) *rmqpb.Status {
		return newStatus(rmqpb.Code_MESSAGE_BODY_TOO_LARGE, "the message body is %s bytes, over the limit of %d", n, s.opts.MaxBodySize)
	}
	if enc != rmqpb.Encoding_GZIP {
		if len(body) > budget {
			return nil, tooLarge(fmt.Sprint(len(body)))
		}
		return body, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, newStatus(rmqpb.Code_MESSAGE_CORRUPTED, "the body is marked GZIP but is not: %v", err)
	}
	plain, err := io.ReadAll(io.LimitReader(zr, int64(budget)+1))
	if err != nil {
		return nil, newStatus(rmqpb.Code_MESSAGE_CORRUPTED, "the body is marked GZIP but is not: %v", err)
	}
	if len(plain) > budget {
		return nil, tooLarge("more than " + fmt.Sprint(budget))
	}
	return plain, nil
}

// sendOne sends one message as it asks to be sent.
func (s *Server) sendOne(ctx context.Context, route string, o outgoing) *rmqpb.SendResultEntry {
	res, err := s.opts.Runtime.SendRouteAs(ctx, route, o.msg, producer.Delivery{Group: o.group, At: o.deliverAt})
	if err != nil {
		return &rmqpb.SendResultEntry{Status: s.sendStatus(err), MessageId: o.id}
	}
	return &rmqpb.SendResultEntry{Status: storedStatus(res.Status), MessageId: o.id, Offset: res.QueueOffset}
}

// sendBatch sends several messages as one batch: one outcome for all.
func (s *Server) sendBatch(ctx context.Context, route string, out []outgoing) []*rmqpb.SendResultEntry {
	msgs := make([]*producer.Message, len(out))
	for i, o := range out {
		msgs[i] = o.msg
	}
	res, err := s.opts.Runtime.SendBatchRoute(ctx, route, msgs)
	entries := make([]*rmqpb.SendResultEntry, len(out))
	var st *rmqpb.Status
	if err != nil {
		st = s.sendStatus(err)
	} else {
		st = storedStatus(res.Status)
	}
	for i, o := range out {
		entries[i] = &rmqpb.SendResultEntry{Status: st, MessageId: o.id}
		if err == nil {
			entries[i].Offset = res.QueueOffset + int64(i)
		}
	}
	return entries
}

// storedCode reports whether an entry's code says its message was stored: OK, or one of the
// Proxy's codes for "stored, but" (storedStatus).
func storedCode(c rmqpb.Code) bool {
	switch c {
	case rmqpb.Code_OK, rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT, rmqpb.Code_SLAVE_PERSISTENCE_TIMEOUT, rmqpb.Code_HA_NOT_AVAILABLE:
		return true
	}
	return false
}

// storedStatus is the code of a stored message: OK, or the Proxy's code for "stored, but".
func storedStatus(sendStatus string) *rmqpb.Status {
	switch sendStatus {
	case producer.StatusFlushDiskTimeout:
		return newStatus(rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT, "stored, but the broker's disk flush timed out")
	case producer.StatusFlushSlaveTimeout:
		return newStatus(rmqpb.Code_SLAVE_PERSISTENCE_TIMEOUT, "stored, but the replica's flush timed out")
	case producer.StatusSlaveNotAvailable:
		return newStatus(rmqpb.Code_HA_NOT_AVAILABLE, "stored, but no replica was available")
	}
	return okStatus()
}

// sendStatus maps a failed send to the code the clients act on: the caller's mistakes to
// BAD_REQUEST and its kin (retrying would fail alike), busy brokers to TOO_MANY_REQUESTS (the one
// code the clients wait after), time running out to PROXY_TIMEOUT, any other broker failure to
// INTERNAL_SERVER_ERROR.
func (s *Server) sendStatus(err error) *rmqpb.Status {
	if ve, ok := errors.AsType[*producer.ValidationError](err); ok {
		return newStatus(validationCode(ve), "%s", ve.Error())
	}
	if errors.Is(err, producer.ErrTimedDeliveryUnsupported) {
		return newStatus(rmqpb.Code_ILLEGAL_DELIVERY_TIME, "%v", err)
	}
	if errors.Is(err, producer.ErrNoRoute) {
		return newStatus(rmqpb.Code_TOPIC_NOT_FOUND, "%v: no ready broker serves this topic yet", err)
	}
	if errors.Is(err, producer.ErrClosed) {
		return newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v: this replica is shutting down", err)
	}
	if se, ok := errors.AsType[*producer.SendError](err); ok && se.MessageRefused {
		return newStatus(rmqpb.Code_BAD_REQUEST, "%v", err)
	}
	if be, ok := errors.AsType[*producer.BrokerError](err); ok && be.Code == remoting.SystemBusy {
		return newStatus(rmqpb.Code_TOO_MANY_REQUESTS, "%v", err)
	}
	if errors.Is(err, producer.ErrSendTimeout) || errors.Is(err, remoting.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return newStatus(rmqpb.Code_PROXY_TIMEOUT, "%v", err)
	}
	if _, ok := errors.AsType[*producer.SendError](err); !ok {
		s.log.Error(err, "A RocketMQ client's send failed unexpectedly")
	}
	return newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)
}

// validationCode is the protocol's code for a rule the runtime refused a message by.
func validationCode(ve *producer.ValidationError) rmqpb.Code {
	switch {
	case errors.Is(ve, producer.ErrBodyTooLarge):
		return rmqpb.Code_MESSAGE_BODY_TOO_LARGE
	case errors.Is(ve, producer.ErrEmptyBody), errors.Is(ve, producer.ErrNilBody):
		return rmqpb.Code_MESSAGE_BODY_EMPTY
	case errors.Is(ve, producer.ErrPropertiesTooLarge):
		return rmqpb.Code_MESSAGE_PROPERTIES_TOO_LARGE
	case errors.Is(ve, producer.ErrBlankTopic), errors.Is(ve, producer.ErrTopicTooLong), errors.Is(ve, producer.ErrTopicIllegal),
		errors.Is(ve, producer.ErrTopicForbidden), errors.Is(ve, producer.ErrSystemTopic):
		return rmqpb.Code_ILLEGAL_TOPIC
	case errors.Is(ve, producer.ErrReservedProperty), errors.Is(ve, producer.ErrBlankProperty):
		return rmqpb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY
	}
	return rmqpb.Code_BAD_REQUEST
}
