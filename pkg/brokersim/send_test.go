package brokersim

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// sendWithProps builds a V2 send whose properties are exactly props; edit may change the header
// (queue, sysFlag, batch flag, ...) before the request is built.
func sendWithProps(topic string, queue int32, body []byte, props map[string]string, edit func(*remoting.SendHeader)) *remoting.Command {
	h := &remoting.SendHeader{
		ProducerGroup: "g", Topic: topic, DefaultTopic: remoting.DefaultTopic, DefaultTopicQueueNums: 4,
		QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Properties: (&remoting.Message{Properties: props}).EncodeProperties(), BrokerName: "b",
	}
	if edit != nil {
		edit(h)
	}
	return remoting.NewSendRequest(h, body, true)
}

// batchBody encodes n messages, each with its own UNIQ_KEY, as a batch body.
func batchBody(t *testing.T, n int) []byte {
	t.Helper()
	var msgs []*remoting.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, &remoting.Message{Body: []byte{'a' + byte(i)}, Properties: map[string]string{remoting.PropertyUniqKey: remoting.NewUniqID()}})
	}
	body, _, err := remoting.AppendBatch(nil, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// maxOffset asks the broker for a queue's max offset over the wire, as a consumer would.
func maxOffset(t *testing.T, c *remoting.Client, b *Broker, topic string, queue int32) int64 {
	t.Helper()
	off, err := remoting.ParseMaxOffsetResponse(invoke(t, c, b.Addr(), remoting.NewGetMaxOffsetRequest(topic, queue)))
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// TestSendsToTopicsWithoutWritePermAreStored proves that, like a Java broker, brokersim stores
// sends to a topic whatever the topic's permission says, while the name server still publishes
// the permission so that well-behaved clients stay away.
func TestSendsToTopicsWithoutWritePermAreStored(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	ns, err := StartNameServer("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	c := newClient(t)
	tests := []struct {
		name string
		perm int32
	}{
		{"read only", remoting.PermRead},
		{"no permission at all", 0},
		{"inherit only", remoting.PermInherit},
		{"read and write", remoting.PermReadWrite},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "Perm" + strconv.Itoa(i)
			b.CreateTopic(topic, 2)
			b.SetTopicPerm(topic, tt.perm)
			req, key := sendReq(topic, 1, "x", true)
			if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.Success {
				t.Fatalf("send answered %v, want SUCCESS", resp)
			}
			if msgs := b.Messages(topic, 1); len(msgs) != 1 || msgs[0].UniqKey != key {
				t.Fatalf("queue 1 holds %+v", msgs)
			}
			route := ns.Route(topic)
			if route == nil || route.QueueDatas[0].Perm != tt.perm {
				t.Fatalf("route %+v, want perm %d published", route, tt.perm)
			}
		})
	}
}

// TestQueueIDsBelowTheLargerQueueCountAreValid proves that a queue id is valid when it is below
// the larger of the read and write queue counts, that others get INVALID_PARAMETER with the Java
// remark, and that a negative id picks one of the write queues.
func TestQueueIDsBelowTheLargerQueueCountAreValid(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	create := func(topic string, read, write int32) {
		if resp := invoke(t, c, b.Addr(), remoting.NewCreateTopicRequest(topic, read, write, remoting.PermReadWrite)); resp.Code != remoting.Success {
			t.Fatalf("create %s: %v", topic, resp)
		}
	}
	create("MoreRead", 4, 2)
	create("MoreWrite", 2, 4)
	create("NoWrite", 4, 0)
	tests := []struct {
		name  string
		topic string
		queue int32
		ok    bool
	}{
		{"a write queue", "MoreRead", 1, true},
		{"a read-only queue beyond the write queues", "MoreRead", 3, true},
		{"beyond both counts", "MoreRead", 4, false},
		{"a write-only queue beyond the read queues", "MoreWrite", 3, true},
		{"beyond both counts of the other shape", "MoreWrite", 4, false},
		{"far beyond", "MoreWrite", 1000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := invoke(t, c, b.Addr(), sendWithProps(tt.topic, tt.queue, []byte("x"), nil, nil))
			if tt.ok {
				r, err := remoting.ParseSendResponse(resp)
				if err != nil || r.QueueID != tt.queue {
					t.Fatalf("answer %v (%v), want stored in queue %d", resp, err, tt.queue)
				}
				return
			}
			cfg, _ := b.topic(tt.topic)
			want := fmt.Sprintf("request queueId[%d] is illegal, TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}] Producer: ",
				tt.queue, tt.topic, cfg.ReadQueues, cfg.WriteQueues)
			if resp.Code != remoting.InvalidParameter || !strings.HasPrefix(resp.Remark, want) || !strings.HasPrefix(resp.Remark[len(want):], "127.0.0.1:") {
				t.Fatalf("answer %d %q, want INVALID_PARAMETER %q<client address>", resp.Code, resp.Remark, want)
			}
		})
	}
	t.Run("a negative queue id on a topic without write queues fails as the Java division does", func(t *testing.T) {
		resp := invoke(t, c, b.Addr(), sendWithProps("NoWrite", -1, []byte("x"), nil, nil))
		want := "java.lang.ArithmeticException: / by zero, org.apache.rocketmq.broker.processor.AbstractSendMessageProcessor.randomQueueId(AbstractSendMessageProcessor.java:568)"
		if resp.Code != remoting.SystemError || resp.Remark != want {
			t.Fatalf("answer %v, want SYSTEM_ERROR %q", resp, want)
		}
	})
	t.Run("a negative queue id picks a write queue", func(t *testing.T) {
		for i := 0; i < 50; i++ {
			r, err := remoting.ParseSendResponse(invoke(t, c, b.Addr(), sendWithProps("MoreRead", -1, []byte("x"), nil, nil)))
			if err != nil || r.QueueID < 0 || r.QueueID >= 2 {
				t.Fatalf("answer %+v (%v), want queue 0 or 1", r, err)
			}
		}
	})
}

// TestBadTopicNamesAreInvalidParameter proves that sends and UPDATE_AND_CREATE_TOPIC refuse bad
// topic names with INVALID_PARAMETER and the Java broker's remarks, that system topics cannot be
// created, and that the topics the broker fills itself cannot be sent to.
func TestBadTopicNamesAreInvalidParameter(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	long := strings.Repeat("t", 128)
	longRetry := "%RETRY%" + strings.Repeat("g", 249)
	tests := []struct {
		name   string
		topic  string
		code   int16
		remark string
	}{
		{"blank", "  ", remoting.InvalidParameter, "The specified topic is blank."},
		{"a space inside", "a b", remoting.InvalidParameter, "The specified topic: a b, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		{"a dot", "a.b", remoting.InvalidParameter, "The specified topic: a.b, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		{"non-ASCII", "tópico", remoting.InvalidParameter, "The specified topic: tópico, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"},
		{"longer than 127", long, remoting.InvalidParameter, "The specified topic: " + long + ", is longer than topic max length: 127"},
		{"a retry topic longer than 255", longRetry, remoting.InvalidParameter, "The specified topic is DLQ or Retry topic: " + longRetry + ", and it's longer than topic max length: 255"},
	}
	for _, tt := range tests {
		t.Run("send/"+tt.name, func(t *testing.T) {
			resp := invoke(t, c, b.Addr(), sendWithProps(tt.topic, 0, []byte("x"), nil, nil))
			if resp.Code != tt.code || resp.Remark != tt.remark {
				t.Fatalf("answer %d %q, want %d %q", resp.Code, resp.Remark, tt.code, tt.remark)
			}
		})
		t.Run("create/"+tt.name, func(t *testing.T) {
			resp := invoke(t, c, b.Addr(), remoting.NewCreateTopicRequest(tt.topic, 1, 1, remoting.PermReadWrite))
			if resp.Code != tt.code || resp.Remark != tt.remark {
				t.Fatalf("answer %d %q, want %d %q", resp.Code, resp.Remark, tt.code, tt.remark)
			}
		})
	}
	for _, topic := range []string{remoting.DefaultTopic, ScheduleTopic, HalfTopic, "RMQ_SYS_TRACE_TOPIC", "rmq_sys_anything"} {
		t.Run("create system topic "+topic, func(t *testing.T) {
			resp := invoke(t, c, b.Addr(), remoting.NewCreateTopicRequest(topic, 1, 1, remoting.PermReadWrite))
			if want := "The topic[" + topic + "] is conflict with system topic."; resp.Code != remoting.InvalidParameter || resp.Remark != want {
				t.Fatalf("answer %v, want INVALID_PARAMETER %q", resp, want)
			}
		})
	}
	for _, topic := range []string{ScheduleTopic, HalfTopic, "RMQ_SYS_TRANS_OP_HALF_TOPIC", "OFFSET_MOVED_EVENT"} {
		t.Run("send to "+topic, func(t *testing.T) {
			resp := invoke(t, c, b.Addr(), sendWithProps(topic, 0, []byte("x"), nil, nil))
			if want := "Sending message to topic[" + topic + "] is forbidden."; resp.Code != remoting.NoPermission || resp.Remark != want {
				t.Fatalf("answer %v, want NO_PERMISSION %q", resp, want)
			}
		})
	}
	if s := b.Stats(); s.MessagesStored != 0 || len(s.Topics) != 0 {
		t.Fatalf("refused requests left %+v", s)
	}
}

// TestOnlyTheHeaderBatchFlagMakesABatch proves that the batch flag, not the request code,
// decides whether the body is a batch: SEND_BATCH_MESSAGE without it stores one message whose
// body is the encoded batch.
func TestOnlyTheHeaderBatchFlagMakesABatch(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	body := batchBody(t, 3)
	tests := []struct {
		name       string
		code       int16
		flag       bool
		wantStored int
	}{
		{"SEND_BATCH_MESSAGE with the flag", remoting.SendBatchMessage, true, 3},
		{"SEND_BATCH_MESSAGE without the flag", remoting.SendBatchMessage, false, 1},
		{"SEND_MESSAGE_V2 with the flag", remoting.SendMessageV2, true, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "Batch" + strconv.Itoa(i)
			b.CreateTopic(topic, 1)
			req := sendWithProps(topic, 0, body, nil, func(h *remoting.SendHeader) { h.Batch = tt.flag })
			req.Code = tt.code
			if _, err := remoting.ParseSendResponse(invoke(t, c, b.Addr(), req)); err != nil {
				t.Fatal(err)
			}
			stored := b.Messages(topic, 0)
			if len(stored) != tt.wantStored {
				t.Fatalf("stored %d messages, want %d", len(stored), tt.wantStored)
			}
			for _, m := range stored {
				if m.Batch != tt.flag {
					t.Fatalf("stored with Batch=%v", m.Batch)
				}
			}
			if !tt.flag && string(stored[0].Body) != string(body) {
				t.Fatal("the single message's body is not the encoded batch")
			}
		})
	}
}

// TestPropertiesLimitCountsWhatTheBrokerAdds proves that the 32767-byte properties limit applies
// after the broker adds MSG_REGION, TRACE_ON, CLUSTER and (when absent) UNIQ_KEY, with
// MESSAGE_ILLEGAL and the Java remark, and that a single message is stored with what the broker
// added.
func TestPropertiesLimitCountsWhatTheBrokerAdds(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 1)
	c := newClient(t)
	key := remoting.NewUniqID() // UNIQ_KEY takes 42 bytes, as one the broker makes
	const (
		added = len("MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02CLUSTER\x01DefaultCluster\x02")
		fits  = 32767 - 42 - added - 3 // filler p=<fits bytes> makes exactly 32767 with all of them
	)
	filler := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name  string
		props map[string]string
		ok    bool
	}{
		{"exactly the limit with CLUSTER added", map[string]string{remoting.PropertyUniqKey: key, "p": filler(fits)}, true},
		{"one byte over once CLUSTER is added", map[string]string{remoting.PropertyUniqKey: key, "p": filler(fits + 1)}, false},
		{"exactly the limit once UNIQ_KEY and CLUSTER are added", map[string]string{"p": filler(fits)}, true},
		{"one byte over once UNIQ_KEY and CLUSTER are added", map[string]string{"p": filler(fits + 1)}, false},
		{"a long CLUSTER of the producer's is replaced before counting", map[string]string{remoting.PropertyUniqKey: key, "p": filler(fits), "CLUSTER": filler(100)}, true},
	}
	wantRemark := "the message is illegal, maybe msg body or properties length not matched. msg body length limit 4194304B, msg properties length limit 32KB."
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.Stats().MessagesStored
			resp := invoke(t, c, b.Addr(), sendWithProps("T", 0, []byte("x"), tt.props, nil))
			if !tt.ok {
				if resp.Code != remoting.MessageIllegal || resp.Remark != wantRemark {
					t.Fatalf("answer %v, want MESSAGE_ILLEGAL %q", resp, wantRemark)
				}
				if b.Stats().MessagesStored != before {
					t.Fatal("refused message stored")
				}
				return
			}
			r, err := remoting.ParseSendResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			msgs := b.Messages("T", 0)
			m := msgs[len(msgs)-1]
			if m.Properties["CLUSTER"] != "DefaultCluster" || m.Properties["MSG_REGION"] != "DefaultRegion" || m.Properties["TRACE_ON"] != "true" ||
				len(m.UniqKey) != 32 || m.UniqKey != r.TransactionID {
				t.Fatalf("stored properties %v, answer %+v", m.Properties, r)
			}
			if given := tt.props[remoting.PropertyUniqKey]; given != "" && m.UniqKey != given {
				t.Fatalf("UNIQ_KEY %s replaced by %s", given, m.UniqKey)
			}
		})
	}
}

// TestHalfAndDelayedMessagesAreHiddenFromTheTopic proves that a transactional half message or a
// message for later delivery is answered SUCCESS (naming the queue it was sent to) but stored
// in the system topic a Java broker keeps it in, so the target queue's max offset does not move,
// and that bad delay or timer values are refused as the Java broker refuses them.
func TestHalfAndDelayedMessagesAreHiddenFromTheTopic(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	inAMinute := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	aMinuteAgo := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	tests := []struct {
		name      string
		props     map[string]string
		reconsume int32
		code      int16
		remark    string // for refusals
		topic     string // where it is stored; "" for the target topic
		queue     int
		half      bool
		delayed   bool
	}{
		{"TRAN_MSG=true is a half message", map[string]string{"TRAN_MSG": "true"}, 0, remoting.Success, "", HalfTopic, 0, true, false},
		{"TRAN_MSG=TRUE too, as parseBoolean ignores case", map[string]string{"TRAN_MSG": "TRUE"}, 0, remoting.Success, "", HalfTopic, 0, true, false},
		{"TRAN_MSG=false is visible", map[string]string{"TRAN_MSG": "false"}, 0, remoting.Success, "", "", 1, false, false},
		{"DELAY=3 waits in queue 2 of the schedule topic", map[string]string{"DELAY": "3"}, 0, remoting.Success, "", ScheduleTopic, 2, false, true},
		{"DELAY above 18 waits at level 18", map[string]string{"DELAY": "40"}, 0, remoting.Success, "", ScheduleTopic, 17, false, true},
		{"DELAY=0 is visible", map[string]string{"DELAY": "0"}, 0, remoting.Success, "", "", 1, false, false},
		{"DELAY=-1 is visible", map[string]string{"DELAY": "-1"}, 0, remoting.Success, "", "", 1, false, false},
		{"DELAY that is not a number", map[string]string{"DELAY": "soon"}, 0, remoting.SystemError,
			`java.lang.NumberFormatException: For input string: "soon", java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)`, "", 0, false, false},
		{"a half message with a delay level is delayed too", map[string]string{"TRAN_MSG": "true", "DELAY": "2"}, 0, remoting.Success, "", ScheduleTopic, 1, true, true},
		{"a redelivered half message with a delay level is not a half message", map[string]string{"TRAN_MSG": "true", "DELAY": "2"}, 1, remoting.Success, "", ScheduleTopic, 1, false, true},
		{"TIMER_DELAY_SEC waits in the timer topic", map[string]string{"TIMER_DELAY_SEC": "60"}, 0, remoting.Success, "", TimerTopic, 0, false, true},
		{"TIMER_DELAY_MS waits in the timer topic", map[string]string{"TIMER_DELAY_MS": "60000"}, 0, remoting.Success, "", TimerTopic, 0, false, true},
		{"TIMER_DELIVER_MS in the future waits", map[string]string{"TIMER_DELIVER_MS": inAMinute}, 0, remoting.Success, "", TimerTopic, 0, false, true},
		{"TIMER_DELIVER_MS in the past is visible at once", map[string]string{"TIMER_DELIVER_MS": aMinuteAgo}, 0, remoting.Success, "", "", 1, false, false},
		{"a delay level wins over a timer", map[string]string{"DELAY": "1", "TIMER_DELAY_SEC": "60"}, 0, remoting.Success, "", ScheduleTopic, 0, false, true},
		{"a timer that is not a number", map[string]string{"TIMER_DELAY_SEC": "x"}, 0, remoting.MessageIllegal,
			"timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set del msg, the delay time should be bigger than the current time", "", 0, false, false},
		{"a timer more than three days off", map[string]string{"TIMER_DELAY_SEC": strconv.Itoa(3*24*3600 + 60)}, 0, remoting.MessageIllegal,
			"timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set del msg, the delay time should be bigger than the current time", "", 0, false, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "Hidden" + strconv.Itoa(i)
			b.CreateTopic(topic, 2)
			before := b.Stats()
			props := map[string]string{remoting.PropertyUniqKey: remoting.NewUniqID()}
			for k, v := range tt.props {
				props[k] = v
			}
			req := sendWithProps(topic, 1, []byte("x"), props, func(h *remoting.SendHeader) { h.ReconsumeTimes = tt.reconsume })
			resp := invoke(t, c, b.Addr(), req)
			if resp.Code != tt.code {
				t.Fatalf("answer %v, want code %d", resp, tt.code)
			}
			if tt.code != remoting.Success {
				if resp.Remark != tt.remark {
					t.Fatalf("remark %q, want %q", resp.Remark, tt.remark)
				}
				return
			}
			r, err := remoting.ParseSendResponse(resp)
			if err != nil || r.QueueID != 1 {
				t.Fatalf("answer %+v (%v), want queue 1 named", r, err)
			}
			after := b.Stats()
			if got := after.HalfMessages - before.HalfMessages; got != map[bool]int64{true: 1}[tt.half] {
				t.Fatalf("half messages went up by %d", got)
			}
			if got := after.DelayedMessages - before.DelayedMessages; got != map[bool]int64{true: 1}[tt.delayed] {
				t.Fatalf("delayed messages went up by %d", got)
			}
			if after.MessagesStored != before.MessagesStored+1 {
				t.Fatal("not counted as stored")
			}
			visible := maxOffset(t, c, b, topic, 1)
			if tt.topic == "" {
				if visible != 1 || len(b.Messages(topic, 1)) != 1 {
					t.Fatalf("max offset %d, want the message visible", visible)
				}
				return
			}
			if visible != 0 || len(b.Messages(topic, 1)) != 0 {
				t.Fatalf("max offset %d: a hidden message is visible", visible)
			}
			held := b.Messages(tt.topic, tt.queue)
			if len(held) == 0 {
				t.Fatalf("nothing in %s queue %d", tt.topic, tt.queue)
			}
			m := held[len(held)-1]
			if m.UniqKey != props[remoting.PropertyUniqKey] || m.QueueOffset != r.QueueOffset || m.MsgID != r.MsgID {
				t.Fatalf("held %+v, answered %+v", m, r)
			}
			wantReal := topic
			if tt.half && tt.delayed {
				wantReal = HalfTopic // moved to the half topic first, then scheduled from there
			}
			if m.Properties["REAL_TOPIC"] != wantReal {
				t.Fatalf("REAL_TOPIC %q, want %q", m.Properties["REAL_TOPIC"], wantReal)
			}
			if tt.half && m.Properties[remoting.PropertyTransactionID] != m.UniqKey {
				t.Fatalf("half message without __transactionId__: %v", m.Properties)
			}
			// Timer messages come with a handle to recall them: "v1 topic broker due+1 key".
			handle := resp.ExtFields["recallHandle"]
			if tt.topic != TimerTopic {
				if handle != "" {
					t.Fatalf("recallHandle %q for a message not in the timer", handle)
				}
				return
			}
			raw, err := base64.URLEncoding.DecodeString(handle)
			due, _ := strconv.ParseInt(m.Properties["TIMER_OUT_MS"], 10, 64)
			if want := fmt.Sprintf("v1 %s broker-a %d %s", topic, due+1, m.UniqKey); err != nil || string(raw) != want {
				t.Fatalf("recallHandle %q decodes to %q (%v), want %q", handle, raw, err, want)
			}
		})
	}
}

// TestBatchesThatCannotBeBatchesAreRefused proves that a batch is refused the way a Java broker
// refuses it when it is delayed, transactional, for a retry topic or too large.
func TestBatchesThatCannotBeBatchesAreRefused(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 1)
	c := newClient(t)
	body := batchBody(t, 2)
	big, _, err := remoting.AppendBatch(nil, []*remoting.Message{{Body: make([]byte, 4<<20)}}, nil) // over 4 MiB with its header
	if err != nil {
		t.Fatal(err)
	}
	illegal := "the message is illegal, maybe msg body or properties length not matched. msg body length limit 4194304B, msg properties length limit 32KB."
	tests := []struct {
		name   string
		topic  string
		body   []byte
		props  map[string]string
		flag   int32
		code   int16
		remark string
	}{
		{"with a delay level", "T", body, map[string]string{"DELAY": "1"}, 0, remoting.MessageIllegal, illegal},
		{"transactional", "T", body, nil, 0x4, remoting.MessageIllegal, illegal},
		{"for a retry topic", "%RETRY%g", body, nil, 0, remoting.MessageIllegal, "batch request does not support retry group %RETRY%g"},
		{"over 4 MiB", "T", big, nil, 0, remoting.SystemError,
			"java.lang.RuntimeException: message body size exceeded, org.apache.rocketmq.store.MessageExtEncoder.encode(MessageExtEncoder.java:290)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := sendWithProps(tt.topic, 0, tt.body, tt.props, func(h *remoting.SendHeader) { h.Batch, h.SysFlag = true, tt.flag })
			resp := invoke(t, c, b.Addr(), req)
			if resp.Code != tt.code || resp.Remark != tt.remark {
				t.Fatalf("answer %d %q, want %d %q", resp.Code, resp.Remark, tt.code, tt.remark)
			}
		})
	}
	if s := b.Stats(); s.MessagesStored != 0 {
		t.Fatalf("refused batches stored %d messages", s.MessagesStored)
	}
}
