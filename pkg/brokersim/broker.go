package brokersim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/pkg/remoting"
)

// Fault is what a broker does wrong. The zero value is a healthy broker; faults combine (a
// delayed error code, a flapping broker that is also slow).
type Fault struct {
	// Delay is added before every answer. With DelayMax > Delay the delay is drawn uniformly
	// from [Delay, DelayMax] for each request.
	Delay, DelayMax time.Duration
	// BlackHole: connections are accepted and requests read, but nothing is answered or stored.
	BlackHole bool
	// Strand, with BlackHole or a flap's down phase: a connection that had a request dropped
	// stays silent after the broker heals (its requests are still read and dropped), as a TCP
	// connection does while its retransmissions back off after a network outage ends; connections
	// opened after the heal are served.
	Strand bool
	// Refuse: the listener is closed (connects are refused) and open connections are dropped.
	Refuse bool
	// CloseMidRequest: each request is answered with half a response frame, then the
	// connection is closed. Nothing is stored.
	CloseMidRequest bool
	// Code, when not zero, answers every request with this response code and stores nothing.
	Code int16
	// IllegalMessages refuses every send as MESSAGE_ILLEGAL with the Java store's remark, however
	// well-formed the message, and stores nothing; every other request is served. It is a broker
	// whose store refuses what the others store, which only the sends can see: it answers probes
	// and heartbeats as a healthy one does.
	IllegalMessages bool
	// Pressure, when set, is what GET_BROKER_RUNTIME_INFO reports of the send path (an idle
	// broker's figures otherwise); it changes nothing else.
	Pressure *remoting.BrokerPressure
	// Busy refuses every send as a broker in flow control does (SYSTEM_BUSY with the
	// "[TIMEOUT_CLEAN_QUEUE]" remark of a send that waited in its send queue past
	// waitTimeMillsInSendQueue), and stores nothing; every other request is served, as a real
	// broker's other queues go on serving while its send queue is full.
	Busy bool
	// FlapUp and FlapDown, both > 0, make the broker alternate between up (FlapUp long; only
	// Delay, Code and IllegalMessages apply) and down (FlapDown long). Down means Refuse when
	// Refuse is set and black hole otherwise. The broker starts up.
	FlapUp, FlapDown time.Duration
}

// drawDelay returns the latency to add to one request: Delay, or a uniform draw from
// [Delay, DelayMax] when DelayMax is larger.
func (f Fault) drawDelay() time.Duration {
	if f.DelayMax > f.Delay {
		return f.Delay + rand.N(f.DelayMax-f.Delay+1)
	}
	return f.Delay
}

// Flapping reports whether f describes a flapping broker.
func (f Fault) Flapping() bool { return f.FlapUp > 0 && f.FlapDown > 0 }

// String renders the fault in the command's syntax.
func (f Fault) String() string {
	var parts []string
	switch {
	case f.DelayMax > f.Delay:
		parts = append(parts, fmt.Sprintf("delay:%v-%v", f.Delay, f.DelayMax))
	case f.Delay > 0:
		parts = append(parts, fmt.Sprintf("delay:%v", f.Delay))
	}
	if f.Flapping() {
		down := ""
		if f.Refuse {
			down = ":refuse"
		}
		parts = append(parts, fmt.Sprintf("flap:%v/%v%s", f.FlapUp, f.FlapDown, down))
	} else {
		if f.BlackHole {
			parts = append(parts, "blackhole")
		}
		if f.Refuse {
			parts = append(parts, "refuse")
		}
	}
	if f.Strand {
		parts = append(parts, "strand")
	}
	if f.CloseMidRequest {
		parts = append(parts, "close")
	}
	if f.Code != 0 {
		parts = append(parts, "code:"+strconv.Itoa(int(f.Code)))
	}
	if f.IllegalMessages {
		parts = append(parts, "illegal")
	}
	if f.Busy {
		parts = append(parts, "busy")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Options configure a broker. The zero value is a broker like a default Java one in a test
// cluster: cluster DefaultCluster, topics auto-created with 4 queues, messages kept.
type Options struct {
	// Cluster is the cluster name reported in routes (default "DefaultCluster").
	Cluster string
	// NoAutoCreate answers TOPIC_NOT_EXIST for sends to unknown topics instead of creating
	// them, and hides the TBW102 template topic from the name server.
	NoAutoCreate bool
	// DefaultQueues is the queue count of auto-created topics (default 4).
	DefaultQueues int
	// TopicConfig answers GET_TOPIC_CONFIG as a RocketMQ 5.x broker does: a topic's
	// configuration, or TOPIC_NOT_EXIST for a topic it lacks. Off, the request is not supported,
	// as on a RocketMQ 4.x broker.
	TopicConfig bool
	// Version is the brokerVersionDesc GET_BROKER_RUNTIME_INFO reports (default "V5_5_0"), and
	// for V4_9_7, V4_9_8, V5_0_0 and V5_5_0 the version number in that answer's header (others
	// keep the simulator's usual header version). It changes nothing else: the simulator serves
	// 5.x's timer messages whatever it reports.
	Version string
	// CountOnly keeps counters and offsets but not the messages themselves, for benchmarks
	// that send millions of messages.
	CountOnly bool
	// ResponseType fixes the header serialisation of answers; by default each answer uses its
	// request's. (A Java server uses its configured type; clients must read both.)
	ResponseType *remoting.SerializeType
	// Region is the MSG_REGION reported on sends (default "DefaultRegion").
	Region string
	// IdleTimeout closes a connection that has neither read nor written for this long, as a
	// Java broker does after serverChannelMaxIdleTimeSeconds, so clients that never heartbeat
	// meet the disconnects they would meet in production. Zero means DefaultIdleTimeout
	// (120 s); a negative value keeps connections open forever.
	IdleTimeout time.Duration
	// Logger hears of every request whose handling panicked (its connection is closed, the
	// broker serves on); the zero value discards.
	Logger logr.Logger
}

// StoredMessage is one message as the broker stored it. Treat Body and Properties as read-only.
// Like a Java broker, the broker adds MSG_REGION, TRACE_ON, CLUSTER (and UNIQ_KEY when the
// producer sent none) to the properties of a single message, and stores a transactional half
// message or a delayed message in HalfTopic, ScheduleTopic or TimerTopic with REAL_TOPIC and
// REAL_QID naming where it was sent. Messages of a batch are stored as they came.
type StoredMessage struct {
	Topic         string
	QueueID       int
	QueueOffset   int64
	MsgID         string // offset message id, as answered to the producer
	UniqKey       string // the producer's UNIQ_KEY property
	Tags, Keys    string
	Body          []byte
	Properties    map[string]string
	ProducerGroup string
	BornTimestamp int64
	BornHost      netip.AddrPort // the sender's address; invalid for a message the broker made
	StoreTime     time.Time
	SysFlag, Flag int32
	Batch         bool // arrived in a batch send (the header's batch flag was set)
}

// QueueStats counts one queue's traffic.
type QueueStats struct {
	Received int64 // messages that arrived for this queue, whatever happened to them
	Stored   int64 // messages stored (the queue's max offset)
}

// TopicStats counts one topic's traffic; Queues is indexed by queue id.
type TopicStats struct {
	Received int64
	Stored   int64
	Queues   []QueueStats
}

// Stats is a snapshot of what a broker received, answered and stored.
type Stats struct {
	Connections      int64           // connections accepted
	Requests         int64           // requests read
	RequestsByCode   map[int16]int64 // requests read, by request code
	Responses        int64           // responses written
	Dropped          int64           // requests swallowed by a black hole (including flap downs)
	SendsReceived    int64           // send requests read (a batch counts once)
	MessagesReceived int64           // messages in send requests read
	// MessagesStored counts every message stored, the hidden ones below included.
	MessagesStored int64
	// HalfMessages counts transactional half messages (TRAN_MSG=true) stored in HalfTopic,
	// where consumers of the topic they were sent to cannot see them.
	HalfMessages int64
	// DelayedMessages counts messages stored for later delivery: a delay level (DELAY > 0) in
	// ScheduleTopic or a future TIMER_* time in TimerTopic. A half message with a delay level
	// counts here as well.
	DelayedMessages int64
	Heartbeats      int64
	// IdleClosed counts connections the broker closed because they were idle (IdleTimeout).
	IdleClosed int64
	// Panics counts requests whose handling panicked; each closed its connection only.
	Panics int64
	Topics map[string]TopicStats
}

// maxQueues bounds the queue counts UPDATE_AND_CREATE_TOPIC takes, the same bound the producer
// package puts on the counts it asks for.
const maxQueues = 1 << 16

// topicState is one topic's configuration and queues.
type topicState struct {
	readQueues, writeQueues int
	perm, sysFlag           int32
	order                   bool
	queues                  []*queueState
}

type queueState struct {
	received int64
	stored   int64 // next offset
	msgs     []StoredMessage
}

// faultState is the fault in force plus the flap phase, swapped atomically so the request path
// reads it without locking.
type faultState struct {
	Fault
	down bool
}

// Broker is a simulated RocketMQ broker (a master, broker id 0) on a loopback address. It
// answers SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, END_TRANSACTION, HEART_BEAT,
// GET_MAX_OFFSET and UPDATE_AND_CREATE_TOPIC like a Java broker, keeps messages in memory, and misbehaves as its
// Fault says.
type Broker struct {
	name      string
	opts      Options
	srv       *server
	storeHost netip.AddrPort

	fault    atomic.Pointer[faultState]
	acl      atomic.Pointer[ACL] // SetACL
	config   brokerConfig        // what GET_BROKER_CONFIG reports (SetLimits)
	started  time.Time
	faultMu  sync.Mutex    // serialises SetFault and Close
	applyMu  sync.Mutex    // serialises putting a fault state in force (SetFault, flap loop)
	flapStop chan struct{} // closes to stop the current flap loop
	flapDone chan struct{}
	flips    atomic.Int64
	listenMu sync.Mutex
	err      error // last error re-opening the listener

	mu              sync.Mutex
	topics          map[string]*topicState
	requests        int64
	byCode          map[int16]int64
	dropped         int64
	sends, received int64
	stored          int64
	half, delayed   int64
	heartbeats      int64
	commitLogOffset int64
	// producers are the connections that heartbeat each producer group, and settled the
	// commit-log offsets of half messages ended or put back by a check (transaction_check.go).
	producers         map[string][]*serverConn
	settled           map[int64]bool
	autoCreateRuntime atomic.Bool
	// delayedCount and delayedBytes are the requests (and their body bytes) waiting out a
	// delay fault.
	delayedCount, delayedBytes atomic.Int64
}

// Bounds of the requests a broker holds while a delay fault delays their answers. Beyond them it
// answers SYSTEM_BUSY at once, as RocketMQ's broker does when its send queue is full.
const (
	// MaxDelayedRequests is RocketMQ's sendThreadPoolQueueCapacity default.
	MaxDelayedRequests = 10000
	// MaxDelayedBytes bounds the request bodies held.
	MaxDelayedBytes = 64 << 20
)

// remarkOverload is the remark of RocketMQ's answer to a request its full queue rejects
// (NettyRemotingAbstract.processRequestCommand).
const remarkOverload = "[OVERLOAD]system busy, start flow control for a while"

// StartBroker starts a broker named name on addr ("127.0.0.1:0" picks a free port) with the
// default Options.
func StartBroker(name, addr string) (*Broker, error) {
	return StartBrokerWith(name, addr, Options{})
}

// StartBrokerWith starts a broker with options.
func StartBrokerWith(name, addr string, opts Options) (*Broker, error) {
	if name == "" {
		return nil, fmt.Errorf("brokersim: broker name is empty")
	}
	if opts.Cluster == "" {
		opts.Cluster = "DefaultCluster"
	}
	if opts.DefaultQueues <= 0 {
		opts.DefaultQueues = remoting.DefaultTopicQueueNums
	}
	if opts.Region == "" {
		opts.Region = remoting.DefaultRegionID
	}
	b := &Broker{name: name, opts: opts, topics: make(map[string]*topicState), byCode: make(map[int16]int64), started: time.Now()}
	b.autoCreateRuntime.Store(!opts.NoAutoCreate)
	b.fault.Store(&faultState{})
	b.srv = newServer(b.handle, idleTimeout(opts.IdleTimeout))
	b.srv.log = opts.Logger
	if err := b.srv.listen(addr); err != nil {
		return nil, fmt.Errorf("brokersim: broker %s: %w", name, err)
	}
	ap, err := netip.ParseAddrPort(b.srv.addr)
	if err != nil {
		b.srv.close()
		return nil, fmt.Errorf("brokersim: broker %s: %w", name, err)
	}
	b.storeHost = ap
	return b, nil
}

// Name returns the broker name.
func (b *Broker) Name() string { return b.name }

// Addr returns the broker's ip:port; it stays the same while the broker refuses connections.
func (b *Broker) Addr() string { return b.srv.addr }

// Cluster returns the broker's cluster name.
func (b *Broker) Cluster() string { return b.opts.Cluster }

// SetAutoCreate switches auto-creation of unknown topics while running.
func (b *Broker) SetAutoCreate(on bool) { b.autoCreateRuntime.Store(on) }

// Fault returns the fault in force.
func (b *Broker) Fault() Fault { return b.fault.Load().Fault }

// Down reports whether the broker is in the down phase of a flap, or black-holing or refusing
// outright.
func (b *Broker) Down() bool {
	fs := b.fault.Load()
	return fs.down || (!fs.Flapping() && (fs.BlackHole || fs.Refuse))
}

// Listening reports whether the broker accepts connections.
func (b *Broker) Listening() bool { return b.srv.listening() }

// Err returns the last error from re-opening the listener after Refuse ended, if any.
func (b *Broker) Err() error {
	b.listenMu.Lock()
	defer b.listenMu.Unlock()
	return b.err
}

// SetFault replaces the broker's fault; it takes effect for the next request (and at once for
// Refuse). Fault{} heals the broker.
func (b *Broker) SetFault(f Fault) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.stopFlap()
	b.applyMu.Lock()
	b.applyLocked(&faultState{Fault: f})
	b.applyMu.Unlock()
	if f.Flapping() {
		stop, done := make(chan struct{}), make(chan struct{})
		b.flapStop, b.flapDone = stop, done
		go b.flap(f, stop, done)
	}
}

// applyLocked puts fs in force and opens or closes the listener to match. applyMu is held.
func (b *Broker) applyLocked(fs *faultState) {
	b.fault.Store(fs)
	if fs.Refuse && (!fs.Flapping() || fs.down) {
		b.srv.stopListening(true)
		return
	}
	if !b.srv.listening() {
		err := b.srv.listen("")
		b.listenMu.Lock()
		b.err = err
		b.listenMu.Unlock()
	}
}

// stopFlap ends the flap loop, if any, and waits for it. faultMu is held.
func (b *Broker) stopFlap() {
	if b.flapStop != nil {
		close(b.flapStop)
		<-b.flapDone
		b.flapStop, b.flapDone = nil, nil
	}
}

// flap alternates the up and down phases until stop closes.
func (b *Broker) flap(f Fault, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	down := false
	t := time.NewTimer(f.FlapUp)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		down = !down
		b.applyMu.Lock()
		select {
		case <-stop:
			b.applyMu.Unlock()
			return
		default:
		}
		b.applyLocked(&faultState{Fault: f, down: down})
		b.applyMu.Unlock()
		b.flips.Add(1)
		if down {
			t.Reset(f.FlapDown)
		} else {
			t.Reset(f.FlapUp)
		}
	}
}

// FlapTransitions counts the phase changes flapping has made since the broker started.
func (b *Broker) FlapTransitions() int64 { return b.flips.Load() }

// CreateTopic creates (or reshapes) a topic with the given number of read and write queues and
// read-write permission.
func (b *Broker) CreateTopic(topic string, queues int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.upsertTopicLocked(topic, queues, queues, remoting.PermReadWrite, 0)
}

// SetTopicPerm changes a topic's permission bits, which the name server publishes in routes
// (e.g. remoting.PermRead to tell clients not to write). As on a Java broker, the topic
// permission does not stop sends that arrive anyway: they are stored.
func (b *Broker) SetTopicPerm(topic string, perm int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[topic]; t != nil {
		t.perm = perm
	}
}

func (b *Broker) upsertTopicLocked(topic string, read, write int, perm, sysFlag int32) *topicState {
	t := b.topics[topic]
	if t == nil {
		t = &topicState{}
		b.topics[topic] = t
	}
	t.readQueues, t.writeQueues, t.perm, t.sysFlag = read, write, perm, sysFlag
	for n := max(read, write); len(t.queues) < n; {
		t.queues = append(t.queues, &queueState{})
	}
	return t
}

// TopicConfig describes a topic on one broker, as reported to the name server.
type TopicConfig struct {
	Name                    string
	ReadQueues, WriteQueues int
	Perm, SysFlag           int32
}

// Topics returns the broker's topics, sorted by name. With auto-create on, the TBW102 template
// is included, as a Java broker with autoCreateTopicEnable registers it.
func (b *Broker) Topics() []TopicConfig {
	b.mu.Lock()
	out := make([]TopicConfig, 0, len(b.topics)+1)
	for name, t := range b.topics {
		out = append(out, TopicConfig{Name: name, ReadQueues: t.readQueues, WriteQueues: t.writeQueues, Perm: t.perm, SysFlag: t.sysFlag})
	}
	b.mu.Unlock()
	if _, ok := b.topic(remoting.DefaultTopic); !ok && b.autoCreateRuntime.Load() {
		out = append(out, templateTopic())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// registered is the configuration of one topic as Topics reports it (the TBW102 template
// included), found by its name: a name server answering a route looks up one topic, as the real
// one does, rather than copying every topic of the broker.
func (b *Broker) registered(name string) (TopicConfig, bool) {
	if t, ok := b.topic(name); ok || name != remoting.DefaultTopic || !b.autoCreateRuntime.Load() {
		return t, ok
	}
	return templateTopic(), true
}

// templateTopic is the TBW102 template a broker with auto-create on registers.
func templateTopic() TopicConfig {
	return TopicConfig{Name: remoting.DefaultTopic, ReadQueues: 8, WriteQueues: 8, Perm: remoting.PermReadWrite | remoting.PermInherit}
}

// topic returns a topic's configuration.
func (b *Broker) topic(name string) (TopicConfig, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[name]
	if t == nil {
		return TopicConfig{}, false
	}
	return TopicConfig{Name: name, ReadQueues: t.readQueues, WriteQueues: t.writeQueues, Perm: t.perm, SysFlag: t.sysFlag}, true
}

// Stats returns a snapshot of the broker's counters.
func (b *Broker) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Stats{
		Connections: b.srv.accepted.Load(), Requests: b.requests, Responses: b.srv.responses.Load(),
		Dropped: b.dropped, SendsReceived: b.sends, MessagesReceived: b.received, MessagesStored: b.stored,
		HalfMessages: b.half, DelayedMessages: b.delayed, IdleClosed: b.srv.idleClosed.Load(), Panics: b.srv.panics.Load(),
		Heartbeats: b.heartbeats, RequestsByCode: make(map[int16]int64, len(b.byCode)),
		Topics: make(map[string]TopicStats, len(b.topics)),
	}
	for c, n := range b.byCode {
		s.RequestsByCode[c] = n
	}
	for name, t := range b.topics {
		ts := TopicStats{Queues: make([]QueueStats, len(t.queues))}
		for i, q := range t.queues {
			ts.Queues[i] = QueueStats{Received: q.received, Stored: q.stored}
			ts.Received += q.received
			ts.Stored += q.stored
		}
		s.Topics[name] = ts
	}
	return s
}

// Messages returns the messages stored in one queue, in offset order.
func (b *Broker) Messages(topic string, queue int) []StoredMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[topic]
	if t == nil || queue < 0 || queue >= len(t.queues) {
		return nil
	}
	return append([]StoredMessage(nil), t.queues[queue].msgs...)
}

// StoredByUniqKey counts the stored messages of every topic by UNIQ_KEY, so a test can prove
// that each message a producer sent was stored exactly once. Half and delayed messages count
// too, under the system topic that holds them.
func (b *Broker) StoredByUniqKey() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int)
	for _, t := range b.topics {
		for _, q := range t.queues {
			for i := range q.msgs {
				out[q.msgs[i].UniqKey]++
			}
		}
	}
	return out
}

// Close stops the broker and waits for all its goroutines.
func (b *Broker) Close() error {
	b.faultMu.Lock()
	b.stopFlap()
	b.faultMu.Unlock()
	b.srv.close()
	return nil
}

// dropping reports whether a request on sc goes unanswered: the broker is down, or sc was
// stranded by a request dropped there under Fault.Strand, which it marks.
func dropping(sc *serverConn, fs *faultState) bool {
	down := fs.down || (!fs.Flapping() && fs.BlackHole)
	if down && fs.Strand {
		sc.stranded.Store(true)
	}
	return down || sc.stranded.Load()
}

// inbound is a request as handle read it on arrival: for a send, its parsed header and batch.
// Parsing once, before anything is counted, lets the counters, the credential check and the
// answer, which may run only after a delay, all see the same parse.
type inbound struct {
	req     *remoting.Command
	isSend  bool
	send    *remoting.SendHeader // nil unless isSend and the header parsed
	sendErr error                // why the header or the batch did not parse
	batch   []*remoting.Message  // nil unless the header's batch flag is set and the body decoded
}

// readInbound parses a send's header and, when flagged, its batch; other requests need no
// parse before they are answered.
func readInbound(req *remoting.Command) *inbound {
	in := &inbound{req: req,
		isSend: req.Code == remoting.SendMessage || req.Code == remoting.SendMessageV2 || req.Code == remoting.SendBatchMessage}
	if in.isSend {
		in.send, in.sendErr = remoting.ParseSendHeader(req)
		// Like SendMessageProcessor, only the header's batch flag makes a batch, whatever
		// the request code: a SEND_BATCH_MESSAGE without it is one message.
		if in.sendErr == nil && in.send.Batch {
			in.batch, in.sendErr = remoting.DecodeBatch(in.req.Body)
		}
	}
	return in
}

// topic is the topic a send names, or "" for any other request, which the credential check
// then holds to no topic's publish permission.
func (in *inbound) topic() string {
	if in.send != nil {
		return in.send.Topic
	}
	return ""
}

// count adds a request to the broker's counters as it arrives, whether or not it will be
// answered, so Stats shows what clients sent to a sick broker as well as to a healthy one.
func (b *Broker) count(in *inbound, down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests++
	b.byCode[in.req.Code]++
	if in.isSend {
		b.sends++
		n := int64(1)
		if in.batch != nil {
			n = int64(len(in.batch))
		}
		b.received += n
		if in.sendErr == nil {
			if t := b.topics[in.send.Topic]; t != nil && in.send.QueueID >= 0 && int(in.send.QueueID) < len(t.queues) {
				t.queues[in.send.QueueID].received += n
			}
		}
	}
	if down {
		b.dropped++
	}
}

// closeMidRequest writes half of an error response and closes the connection, so the client
// reads a truncated frame, as from a broker that died while it answered.
func closeMidRequest(sc *serverConn, req *remoting.Command) {
	resp := remoting.NewResponse(req, remoting.SystemError, "")
	if frame, err := remoting.Encode(resp); err == nil {
		_ = sc.fw.WriteRaw(frame[:len(frame)/2])
	}
	sc.close()
}

// handle runs on a connection's reader for every request: it counts the request, then drops
// it, cuts the connection under it, or answers it, at once or after the fault's delay.
func (b *Broker) handle(sc *serverConn, req *remoting.Command) {
	fs := b.fault.Load()
	in := readInbound(req)
	down := dropping(sc, fs)
	b.count(in, down)
	switch {
	case down:
		return
	case fs.CloseMidRequest:
		closeMidRequest(sc, req)
		return
	}
	// The credentials are checked on arrival, under the ACL then in force, even when the
	// answer waits for a delay.
	refused := b.refuseCredentials(req, in.topic())
	if d := fs.drawDelay(); d > 0 {
		b.answerLater(sc, req, d, func() { b.answer(sc, in, fs, refused, true) })
		return
	}
	b.answer(sc, in, fs, refused, false)
}

// answerLater runs answer after d. A broker's request queue is bounded: what it cannot queue
// it refuses at once, and a client that pipelines without reading cannot make it hold
// unbounded memory.
func (b *Broker) answerLater(sc *serverConn, req *remoting.Command, d time.Duration, answer func()) {
	size := int64(len(req.Body))
	n, bytes := b.delayedCount.Add(1), b.delayedBytes.Add(size)
	release := func() { b.delayedCount.Add(-1); b.delayedBytes.Add(-size) }
	if n > MaxDelayedRequests || bytes > MaxDelayedBytes {
		release()
		sc.respond(req, remoting.NewResponse(req, remoting.SystemBusy, remarkOverload), false)
		return
	}
	sc.after(d, req, answer, release)
}

// answer writes the response to in, if it has one, in the serialisation the options ask for.
func (b *Broker) answer(sc *serverConn, in *inbound, fs *faultState, refused *remoting.Command, flush bool) {
	resp := b.respondTo(sc, in, fs, refused)
	if resp == nil {
		return
	}
	if b.opts.ResponseType != nil {
		resp.SerializeType = *b.opts.ResponseType
	}
	sc.respond(in.req, resp, flush)
}

// respondTo picks the response to in. A refused credential comes first, then an injected
// code, then the faults that only sends suffer; only a request none of them stops reaches
// the send path or serve.
func (b *Broker) respondTo(sc *serverConn, in *inbound, fs *faultState, refused *remoting.Command) *remoting.Command {
	req := in.req
	switch {
	case refused != nil:
		return refused
	case fs.Code != 0:
		return remoting.NewResponse(req, fs.Code, "brokersim: injected fault on "+b.name)
	case fs.Busy && in.isSend:
		return remoting.NewResponse(req, remoting.SystemBusy, remarkSendQueueTimeout)
	case req.Code == remoting.HeartBeat:
		b.registerProducers(sc, req.Body)
		return b.serve(req)
	case fs.IllegalMessages && in.isSend:
		// As SendMessageProcessor answers a put its store refused (PutMessageStatus
		// MESSAGE_ILLEGAL): the code and the remark naming the store's limits.
		return remoting.NewResponse(req, remoting.MessageIllegal, remarkMessageIllegal)
	case in.isSend:
		return b.send(sc, req, in.send, in.sendErr, in.batch)
	default:
		return b.serve(req)
	}
}

// serve answers the non-send requests.
func (b *Broker) serve(req *remoting.Command) *remoting.Command {
	switch req.Code {
	case remoting.HeartBeat:
		b.mu.Lock()
		b.heartbeats++
		b.mu.Unlock()
		return remoting.NewResponse(req, remoting.Success, "")
	case remoting.GetMaxOffset:
		topic := req.ExtFields["topic"]
		q, err := strconv.Atoi(req.ExtFields["queueId"])
		if topic == "" || err != nil {
			return remoting.NewResponse(req, remoting.SystemError, "brokersim: GET_MAX_OFFSET needs topic and queueId")
		}
		var off int64
		b.mu.Lock()
		if t := b.topics[topic]; t != nil && q >= 0 && q < len(t.queues) {
			off = t.queues[q].stored
		}
		b.mu.Unlock()
		resp := remoting.NewResponse(req, remoting.Success, "")
		resp.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
		return resp
	case remoting.EndTransaction:
		return b.endTransaction(req)
	case remoting.GetBrokerRuntimeInfo:
		return b.runtimeInfo(req)
	case remoting.GetBrokerConfig:
		return b.brokerConfigAnswer(req)
	case remoting.GetTopicConfig:
		if b.opts.TopicConfig {
			return b.topicConfigAnswer(req)
		}
	case remoting.UpdateAndCreateTopic:
		h, err := remoting.ParseCreateTopicRequest(req)
		if err != nil {
			return remoting.NewResponse(req, remoting.SystemError, err.Error())
		}
		// AdminBrokerProcessor.updateAndCreateTopic refuses bad names and system topics with
		// INVALID_PARAMETER (5.3.2 and later; SYSTEM_ERROR before).
		if remark := topicRemark(h.Topic); remark != "" {
			return remoting.NewResponse(req, remoting.InvalidParameter, remark)
		}
		if isSystemTopic(h.Topic) {
			return remoting.NewResponse(req, remoting.InvalidParameter, "The topic["+h.Topic+"] is conflict with system topic.")
		}
		// A Java broker takes any queue count, zero included (a topic without write queues
		// then refuses sends); the simulator only bounds the count to keep its memory bounded.
		if h.ReadQueueNums > maxQueues || h.WriteQueueNums > maxQueues {
			return remoting.NewResponse(req, remoting.SystemError, fmt.Sprintf("brokersim: queue numbers %d/%d above %d", h.ReadQueueNums, h.WriteQueueNums, maxQueues))
		}
		b.mu.Lock()
		b.upsertTopicLocked(h.Topic, int(h.ReadQueueNums), int(h.WriteQueueNums), h.Perm, h.TopicSysFlag).order = h.Order
		b.mu.Unlock()
		// The Java handler builds its answer with this default remark and never clears it.
		return remoting.NewResponse(req, remoting.Success, "not set any response code")
	}
	return remoting.NewNotSupportedResponse(req)
}
