package compat_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// peer is one side of the differential table: three brokers, the first with topic auto-creation
// off, the second with it on, the third with a short idle timeout.
type peer struct {
	name       string
	strict     string // host:port of the broker without auto-creation
	autoCreate string // host:port of the broker with auto-creation
	idle       string // host:port of a broker that closes connections idle for idleTimeout
	client     *remoting.Client
}

// observation is what a caller can see of one case: the answer's code, its remark (when the case
// compares it) and how many messages became visible to consumers.
type observation struct {
	Code    int16
	Remark  string
	Visible int64
	Note    string
}

// conformanceCase sends one request (or a few) and reports what came of it.
type conformanceCase struct {
	name string
	// remark says the remark reaches callers (detour's errors quote it) and must match.
	remark bool
	run    func(ctx context.Context, t *testing.T, p peer) observation
}

const (
	diffTopic   = "DiffQueues"   // 8 read queues, 4 write queues, read-write
	diffRO      = "DiffReadOnly" // 4 queues, perm 4 (read only)
	diffMissing = "DiffMissing"  // exists nowhere
)

// hostAddrs matches the addresses a remark carries (broker, producer), which differ per run.
var hostAddrs = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+(:\d+)?`)

func normalizeRemark(s string) string { return hostAddrs.ReplaceAllString(s, "ADDR") }

// invoke sends req to addr and returns the answer's code and remark.
func (p peer) invoke(ctx context.Context, t *testing.T, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	for {
		resp, err := p.client.Invoke(ctx, addr, req)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		// A Java broker short of CPU sheds requests that waited too long in its queue
		// ([TIMEOUT_CLEAN_QUEUE] broker busy): an answer about the machine, not about the case.
		if resp.Code != remoting.SystemBusy || !strings.Contains(resp.Remark, "TIMEOUT_CLEAN_QUEUE") || ctx.Err() != nil {
			return resp
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// visible sums the max offsets of queues 0..7 of topic: what consumers can read.
func (p peer) visible(ctx context.Context, t *testing.T, addr, topic string) int64 {
	t.Helper()
	var n int64
	for q := range 8 {
		resp := p.invoke(ctx, t, addr, remoting.NewGetMaxOffsetRequest(topic, int32(q)))
		if resp.Code != remoting.Success {
			t.Fatalf("%s: GET_MAX_OFFSET %s/%d: %d %s", p.name, topic, q, resp.Code, resp.Remark)
		}
		off, err := remoting.ParseMaxOffsetResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		n += off
	}
	return n
}

// sendObs sends one message (V2 unless code says otherwise) and observes code, remark and the
// change in visible messages of topic.
func (p peer) sendObs(ctx context.Context, t *testing.T, addr string, code int16, h remoting.SendHeader, body []byte) observation {
	t.Helper()
	before := p.visible(ctx, t, addr, h.Topic)
	req := remoting.NewSendRequest(&h, body, code != remoting.SendMessage)
	req.Code = code
	resp := p.invoke(ctx, t, addr, req)
	// The store appends asynchronously to the consume queue; give it the moment it needs.
	var after int64
	for range 20 {
		if after = p.visible(ctx, t, addr, h.Topic); after != before || resp.Code != remoting.Success {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	return observation{Code: resp.Code, Remark: resp.Remark, Visible: after - before}
}

// header returns a send header as detour's producer writes it.
func header(topic string, queue int32, props map[string]string) remoting.SendHeader {
	m := remoting.Message{Topic: topic, Properties: props}
	m.SetProperty("UNIQ_KEY", remoting.NewUniqID())
	return remoting.SendHeader{ProducerGroup: "detour_conformance", Topic: topic, DefaultTopic: remoting.DefaultTopic,
		DefaultTopicQueueNums: 4, QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Properties: m.EncodeProperties()}
}

var conformanceCases = []conformanceCase{
	{name: "send to a write queue is stored", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 3, nil), []byte("m"))
	}},
	{name: "send with the V1 header is stored", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessage, header(diffTopic, 0, nil), []byte("m"))
	}},
	{name: "queue id below max(read, write) is stored", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 6, nil), []byte("m"))
	}},
	{name: "queue id at max(read, write) is INVALID_PARAMETER", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		o := p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 8, nil), []byte("m"))
		o.Remark = o.Remark[:min(len(o.Remark), strings.Index(o.Remark+" Producer:", " Producer:"))]
		return o
	}},
	{name: "read-only topic still stores sends", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffRO, 1, nil), []byte("m"))
	}},
	{name: "unknown topic without auto-create is TOPIC_NOT_EXIST", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffMissing, 0, nil), []byte("m"))
	}},
	{name: "unknown topic with auto-create makes four queues", run: func(ctx context.Context, t *testing.T, p peer) observation {
		topic := "DiffAuto"
		o := p.sendObs(ctx, t, p.autoCreate, remoting.SendMessageV2, header(topic, 0, nil), []byte("m"))
		refused := p.invoke(ctx, t, p.autoCreate, remoting.NewSendRequest(ptr(header(topic, 4, nil)), []byte("m"), true))
		o.Note = fmt.Sprintf("queue 4 answers %d", refused.Code)
		return o
	}},
	{name: "illegal topic name is refused", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		h := header(diffTopic, 0, nil)
		h.Topic = "bad topic!"
		resp := p.invoke(ctx, t, p.strict, remoting.NewSendRequest(&h, []byte("m"), true))
		return observation{Code: resp.Code, Remark: resp.Remark}
	}},
	{name: "body over 4 MiB is MESSAGE_ILLEGAL", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 0, nil), make([]byte, 4<<20+1))
	}},
	{name: "body of exactly 4 MiB is stored", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 0, nil), make([]byte, 4<<20))
	}},
	{name: "properties pushed over the limit by CLUSTER are MESSAGE_ILLEGAL", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		h := header(diffTopic, 0, map[string]string{"big": strings.Repeat("p", 32767-len("big")-2-60)})
		if len(h.Properties) > 32767 {
			t.Fatalf("properties of %d bytes are over the limit before the broker adds anything", len(h.Properties))
		}
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, h, []byte("m"))
	}},
	{name: "SEND_BATCH_MESSAGE without the batch flag stores one message", run: func(ctx context.Context, t *testing.T, p peer) observation {
		body, _, err := remoting.AppendBatch(nil, []*remoting.Message{{Topic: diffTopic, Body: []byte("one")}, {Topic: diffTopic, Body: []byte("two")}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.sendObs(ctx, t, p.strict, remoting.SendBatchMessage, header(diffTopic, 2, nil), body)
	}},
	{name: "SEND_BATCH_MESSAGE with the batch flag stores each message", run: func(ctx context.Context, t *testing.T, p peer) observation {
		msgs := []*remoting.Message{{Topic: diffTopic, Body: []byte("one")}, {Topic: diffTopic, Body: []byte("two")}}
		for _, m := range msgs {
			m.SetProperty("UNIQ_KEY", remoting.NewUniqID())
		}
		body, _, err := remoting.AppendBatch(nil, msgs, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := header(diffTopic, 2, nil)
		h.Batch = true
		return p.sendObs(ctx, t, p.strict, remoting.SendBatchMessage, h, body)
	}},
	{name: "transactional half message is acknowledged but not visible", run: func(ctx context.Context, t *testing.T, p peer) observation {
		o := p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 1, map[string]string{"TRAN_MSG": "true", "PGROUP": "detour_conformance"}), []byte("m"))
		return o
	}},
	{name: "committed half message becomes visible where it was sent", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, nil, 1)
	}},
	{name: "rolled back half message never becomes visible", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.CommitOrRollback = remoting.TransactionRollback }, 1)
	}},
	{name: "a second commit stores the message again", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, nil, 2)
	}},
	{name: "commit from a check-back becomes visible", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.FromTransactionCheck = true }, 1)
	}},
	{name: "end naming another producer group is refused", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.ProducerGroup = "detour_other" }, 1)
	}},
	{name: "end naming another half-queue offset is refused", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.TranStateTableOffset += 1000 }, 1)
	}},
	{name: "end at a commit-log offset past the log is refused", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.CommitLogOffset = 1 << 50 }, 1)
	}},
	{name: "end of unknown state is not answered", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.CommitOrRollback = remoting.TransactionNotType }, 1)
	}},
	{name: "delayed message is acknowledged but not yet visible", run: func(ctx context.Context, t *testing.T, p peer) observation {
		return p.sendObs(ctx, t, p.strict, remoting.SendMessageV2, header(diffTopic, 1, map[string]string{"DELAY": "4"}), []byte("m"))
	}},
	{name: "max offset of an unknown topic is zero", run: func(ctx context.Context, t *testing.T, p peer) observation {
		resp := p.invoke(ctx, t, p.strict, remoting.NewGetMaxOffsetRequest(diffMissing, 0))
		return observation{Code: resp.Code, Note: "offset " + resp.ExtFields["offset"]}
	}},
	{name: "create topic with an illegal name is refused", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		resp := p.invoke(ctx, t, p.strict, remoting.NewCreateTopicRequest("bad topic!", 4, 4, 6))
		return observation{Code: resp.Code, Remark: resp.Remark}
	}},
	{name: "a connection idle for the idle timeout is closed", run: func(ctx context.Context, t *testing.T, p peer) observation {
		p.invoke(ctx, t, p.idle, remoting.NewGetMaxOffsetRequest(diffMissing, 0))
		start := time.Now()
		for p.client.Connected(p.idle) {
			if time.Since(start) > 4*idleTimeout {
				return observation{Note: "still open after " + (4 * idleTimeout).String()}
			}
			time.Sleep(50 * time.Millisecond)
		}
		if time.Since(start) < idleTimeout/2 {
			return observation{Note: "closed before the idle timeout"}
		}
		return observation{Note: "closed after the idle timeout"}
	}},
	{name: "runtime info carries the send path's figures under the same keys and forms", run: func(ctx context.Context, t *testing.T, p peer) observation {
		resp := p.invoke(ctx, t, p.strict, remoting.NewGetBrokerRuntimeInfoRequest())
		table, err := remoting.ParseBrokerRuntimeInfo(resp)
		if err != nil {
			return observation{Code: resp.Code, Note: err.Error()}
		}
		return observation{Code: resp.Code, Note: pressureForms(table) + "; " + dispatchForm(table)}
	}},
	{name: "unknown request code is REQUEST_CODE_NOT_SUPPORTED", remark: true, run: func(ctx context.Context, t *testing.T, p peer) observation {
		resp := p.invoke(ctx, t, p.strict, remoting.NewRequest(9999, nil, nil))
		return observation{Code: resp.Code, Remark: resp.Remark}
	}},
}

// txGroup is the producer group of the differential's half messages.
const txGroup = "detour_conformance"

// endObs sends a half message to queue 1 of diffTopic, then ends it ends times with the header
// edit makes of the one naming it, and observes the last end's code and remark and the change
// in visible messages. An end without an answer is noted as such.
func (p peer) endObs(ctx context.Context, t *testing.T, edit func(*remoting.EndTransactionHeader), ends int) observation {
	t.Helper()
	h := header(diffTopic, 1, map[string]string{remoting.PropertyTransactionPrep: "true", remoting.PropertyProducerGroup: txGroup})
	h.ProducerGroup = txGroup
	h.SysFlag = remoting.TransactionPrepared
	resp := p.invoke(ctx, t, p.strict, remoting.NewSendRequest(&h, []byte("tx"), true))
	sent, err := remoting.ParseSendResponse(resp)
	if err != nil {
		t.Fatalf("%s: half message: %v", p.name, err)
	}
	_, clo, err := remoting.ParseOffsetMsgID(sent.MsgID)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	uniq := remoting.DecodeProperties(h.Properties)[remoting.PropertyUniqKey]
	end := &remoting.EndTransactionHeader{Topic: diffTopic, ProducerGroup: txGroup, TranStateTableOffset: sent.QueueOffset,
		CommitLogOffset: clo, CommitOrRollback: remoting.TransactionCommit, MsgID: uniq, TransactionID: sent.TransactionID}
	if edit != nil {
		edit(end)
	}
	before := p.visible(ctx, t, p.strict, diffTopic)
	var o observation
	for range ends {
		o = p.endOnce(ctx, t, end)
	}
	// The committed message reaches the consume queue asynchronously; give it the moment it needs.
	var after int64
	for range 40 {
		if after = p.visible(ctx, t, p.strict, diffTopic); after-before >= int64(ends) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	o.Visible = after - before
	return o
}

// endOnce sends one END_TRANSACTION and observes its answer, or notes that none came.
func (p peer) endOnce(ctx context.Context, t *testing.T, end *remoting.EndTransactionHeader) observation {
	t.Helper()
	wait, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := p.client.Invoke(wait, p.strict, remoting.NewEndTransactionRequest(end))
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, remoting.ErrTimeout):
		return observation{Note: "no answer"}
	case err != nil:
		t.Fatalf("%s: END_TRANSACTION: %v", p.name, err)
	}
	return observation{Code: resp.Code, Remark: resp.Remark}
}

func ptr[T any](v T) *T { return &v }

// pressureForms says which send-path figures a runtime table carries in a form detour reads
// (remoting.PressureOf), with the send queue's capacity, which an idle broker of either kind
// reports as RocketMQ's default; the other figures move with load, so only their presence counts.
func pressureForms(table map[string]string) string {
	p := remoting.PressureOf(table)
	known := func(v float64) string {
		if v < 0 {
			return "unknown"
		}
		return "known"
	}
	return fmt.Sprintf("capacity %d, size %s, head wait %s, page-cache lock %s, put p99 %s", p.SendQueueCapacity,
		known(float64(p.SendQueueSize)), known(float64(p.SendQueueHeadWaitMillis)), known(float64(p.PageCacheLockMillis)),
		known(p.PutLatency99Millis))
}

// dispatchForm says whether a runtime table reports how far the consume queues trail the commit
// log (dispatchBehindBytes), a whole number of bytes, which the harness waits on before counting.
func dispatchForm(table map[string]string) string {
	v, ok := table["dispatchBehindBytes"]
	if !ok {
		return "no dispatchBehindBytes"
	}
	if _, err := strconv.ParseInt(v, 10, 64); err != nil {
		return fmt.Sprintf("dispatchBehindBytes %q is not a whole number", v)
	}
	return "dispatchBehindBytes a whole number"
}

// idleTimeout is the third broker's serverChannelMaxIdleTimeSeconds (RocketMQ's default is 120 s).
const idleTimeout = 2 * time.Second

// TestBrokersimAnswersAsTheRealBroker runs one table of requests against a real RocketMQ 5.x
// broker pair and a brokersim pair set up alike, and requires the same code, the same visible
// effect and, where callers see it, the same remark from both.
func TestBrokersimAnswersAsTheRealBroker(t *testing.T) {
	ctx := context.Background()
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{NoAutoCreate: true}, rmqtest.BrokerConfig{},
		rmqtest.BrokerConfig{IdleTimeout: idleTimeout})
	real := peer{name: "RocketMQ " + c.Dist.ServerVersion, strict: c.Brokers()[0].Addr, autoCreate: c.Brokers()[1].Addr,
		idle: c.Brokers()[2].Addr, client: c.Client()}

	simStrict, err := brokersim.StartBrokerWith(c.Brokers()[0].Name, "127.0.0.1:0", brokersim.Options{Cluster: rmqtest.ClusterName, NoAutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = simStrict.Close() })
	simAuto, err := brokersim.StartBrokerWith(c.Brokers()[1].Name, "127.0.0.1:0", brokersim.Options{Cluster: rmqtest.ClusterName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = simAuto.Close() })
	simIdle, err := brokersim.StartBrokerWith(c.Brokers()[2].Name, "127.0.0.1:0", brokersim.Options{Cluster: rmqtest.ClusterName, IdleTimeout: idleTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = simIdle.Close() })
	simClient := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { _ = simClient.Close() })
	sim := peer{name: "brokersim", strict: simStrict.Addr(), autoCreate: simAuto.Addr(), idle: simIdle.Addr(), client: simClient}

	for _, p := range []peer{real, sim} {
		for _, tc := range []struct {
			topic       string
			read, write int32
			perm        int32
		}{{diffTopic, 8, 4, 6}, {diffRO, 4, 4, 4}} {
			if resp := p.invoke(ctx, t, p.strict, remoting.NewCreateTopicRequest(tc.topic, tc.read, tc.write, tc.perm)); resp.Code != remoting.Success {
				t.Fatalf("%s: create %s: %d %s", p.name, tc.topic, resp.Code, resp.Remark)
			}
		}
	}

	for _, tc := range conformanceCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			want := tc.run(ctx, t, real)
			got := tc.run(ctx, t, sim)
			if tc.remark {
				want.Remark, got.Remark = normalizeRemark(want.Remark), normalizeRemark(got.Remark)
			} else {
				want.Remark, got.Remark = "", ""
			}
			if got != want {
				t.Errorf("brokersim answered %+v\nRocketMQ %s answered %+v", got, c.Dist.ServerVersion, want)
			}
			t.Logf("%s: code %d, visible %+d %s %q", tc.name, want.Code, want.Visible, want.Note, want.Remark)
		})
	}
	// The transaction canary: on the real broker a commit and a rollback must be told apart by
	// what the table observes, or the transaction rows above would pass against a simulator
	// that ignored END_TRANSACTION altogether.
	t.Run("canary: a rollback is observed unlike a commit", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		commit := real.endObs(ctx, t, nil, 1)
		rollback := real.endObs(ctx, t, func(h *remoting.EndTransactionHeader) { h.CommitOrRollback = remoting.TransactionRollback }, 1)
		if commit == rollback {
			t.Fatalf("a commit and a rollback both observe %+v", commit)
		}
	})
	// The canary: a broker whose table names the send queue's head wait differently (as a
	// release that renamed it would) must not pass as the real broker's.
	t.Run("canary: a runtime table with a renamed key diverges", func(t *testing.T) {
		resp := real.invoke(ctx, t, real.strict, remoting.NewGetBrokerRuntimeInfoRequest())
		table, err := remoting.ParseBrokerRuntimeInfo(resp)
		if err != nil {
			t.Fatal(err)
		}
		want := pressureForms(table)
		table["sendThreadPoolQueueHeadWaitTimeMillis"] = table[remoting.RuntimeSendQueueHeadWait]
		delete(table, remoting.RuntimeSendQueueHeadWait)
		if got := pressureForms(table); got == want {
			t.Fatalf("a renamed key reads as %q, the real broker's own form", got)
		}
	})
}
