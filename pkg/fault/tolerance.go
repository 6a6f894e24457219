package fault

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what became of one send attempt.
type Outcome int

const (
	// Success: the broker answered (whatever the send status). Isolation from the measured
	// latency; reachable.
	Success Outcome = iota
	// TransportError: connect, write or read failed or timed out. Isolation from the failure
	// latency; reachable unless probing.
	TransportError
	// BrokerError: the broker answered with a non-success code. Isolation from the failure
	// latency; unreachable.
	BrokerError
	// ClientError: the attempt failed on the client side before the broker could answer
	// (RocketMQ's MQClientException). Isolation from the measured latency under RocketMQ 5.x,
	// from the failure latency under RocketMQ 4.x; reachable (left alone when probing, as it
	// proves nothing about the broker).
	ClientError
	// Interrupted: the caller gave up on the send (RocketMQ's InterruptedException). Isolation
	// from the measured latency under either line, and no retry; reachable (left alone when
	// probing).
	Interrupted
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "Success"
	case TransportError:
		return "TransportError"
	case BrokerError:
		return "BrokerError"
	case ClientError:
		return "ClientError"
	case Interrupted:
		return "Interrupted"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Reason says why a broker is isolated. The values are the ones FaultPolicy status shows.
type Reason string

// Reasons a broker is isolated.
const (
	// ReasonSlowSend: a slow answer, a send answered slower than a threshold of the table.
	ReasonSlowSend Reason = "SlowSend"
	// ReasonSendFailed: a send attempt failed in transport (no connection, a broken one, or no
	// answer in its time).
	ReasonSendFailed     Reason = "SendFailed"
	ReasonBrokerError    Reason = "BrokerError"
	ReasonPodNotReady    Reason = "PodNotReady"
	ReasonPodTerminating Reason = "PodTerminating"
	ReasonProbeFailed    Reason = "ProbeFailed"
	// ReasonBrokerBusy: the broker refused a send because it is under pressure (its send queue
	// or page cache busy); see Tolerance.Busy.
	ReasonBrokerBusy Reason = "BrokerBusy"
	// ReasonBrokerPressure: the broker's own runtime figures (send queue, page-cache lock, put
	// latency) crossed the policy's thresholds before it refused anything; see
	// Tolerance.Pressured.
	ReasonBrokerPressure Reason = "BrokerPressure"
	// ReasonSlowProbe: a slow answer to a probe, slower than a threshold of the table, and
	// counted as a send of that latency would (see Tolerance.WatchSlow and ProbeResult).
	ReasonSlowProbe Reason = "SlowProbe"
	// ReasonRefusesValidMessages: the broker refused a message as MESSAGE_ILLEGAL that another
	// broker then stored (see Tolerance.RefusedValidMessage).
	ReasonRefusesValidMessages Reason = "RefusesValidMessages"
	// ReasonSendStalled: a stalled attempt, one that got no answer in time: an attempt to the
	// broker has waited past its stall threshold with no answer, before it reached its attempt
	// deadline (see Tolerance.IsolateStalled), or an adaptive attempt deadline cut it (see
	// Tolerance.Stalled). Not a slow answer: that is ReasonSlowSend.
	ReasonSendStalled Reason = "SendStalled"
)

// PodState is what Kubernetes says about a broker's pod.
type PodState int

const (
	// PodReady clears a pod mark.
	PodReady PodState = iota
	// PodNotReady makes the broker unavailable (when RespectPodHealth).
	PodNotReady
	// PodTerminating makes the broker unavailable (when RespectPodHealth).
	PodTerminating
	// PodGone removes the broker and everything learnt about it.
	PodGone
)

// String returns the state's name.
func (s PodState) String() string {
	switch s {
	case PodReady:
		return "Ready"
	case PodNotReady:
		return "NotReady"
	case PodTerminating:
		return "Terminating"
	case PodGone:
		return "Gone"
	}
	return "PodState(" + strconv.Itoa(int(s)) + ")"
}

// MaxGrowthFactor bounds how much GrowOnRepeat multiplies a failure's isolation.
const MaxGrowthFactor = 8

// Options is a fault policy. The zero value behaves like RocketMQ 5.x with fault tolerance on.
type Options struct {
	// Semantics are the rules outcomes are recorded by: RocketMQ 5.x's (the zero value), RocketMQ
	// 4.x's, or none (fault tolerance off, RocketMQ's default).
	Semantics Semantics
	// Table maps latency to isolation; nil means the RocketMQ5 preset.
	Table *Table
	// Clock is read for every decision; nil means RealClock. It is fixed by New: Configure
	// ignores it, because times already learnt are measured against it.
	Clock Clock
	// Probing means recovery only on proof: transport errors mark a broker unreachable, an
	// unreachable broker stays unavailable until a probe or send succeeds, and a successful
	// probe ends its isolation (with GrowOnRepeat, only a first offender's).
	Probing bool
	// GrowOnRepeat doubles a failure's isolation for each earlier isolation episode of the
	// broker, up to MaxGrowthFactor and the table's MaxIsolation. An episode is an entry into
	// isolation by a failure; the count is cleared only after the broker has gone the table's
	// FailureIsolation without failing since its last episode ended.
	GrowOnRepeat bool
	// MaxIsolatedPercent is the isolation limit: the share of brokers unavailable at once. 0 or 100
	// (or anything outside 1..99) means no limit, as in RocketMQ.
	MaxIsolatedPercent int
	// RespectPodHealth lets pod marks (SetPodState) make brokers unavailable.
	RespectPodHealth bool
	// ProbationProbes is how many good probes in a row readmit a broker on probation: one
	// isolated for silence (a transport failure, a watch probe unanswered: see WatchFailed), for
	// a slow answer (a send or watch probe answered slower than a threshold that isolates), one a
	// probe found failing (silent, refusing or slow) while it was isolated, or a repeat offender
	// (with GrowOnRepeat, a second or later episode; without it, a second failure in a row).
	// Until then it stays held, whatever its timer says. With probation, a good probe proves
	// something only if answered under the table's first threshold while its timer runs (see
	// ProbeResult). 0 and 1 mean one good probe of any latency under the isolating thresholds, as
	// without probation. Only applies when Probing.
	ProbationProbes int
	// StallAfter turns stall detection on (see IsolateStalled): a broker whose oldest attempt in
	// flight has waited past its stall threshold, longer than StallAfter and StallFactor times its
	// usual latency, with no answer meanwhile, is held out as ReasonSendStalled until it answers.
	// 0 turns it off, as in RocketMQ, which knows nothing of attempts in flight. The stall
	// threshold sits beside the attempt deadline in deadline.go.
	StallAfter time.Duration
	// StallFactor multiplies a broker's usual latency (Entry.UsualLatency) into its stall
	// threshold; below 1 means 1. The producer sets StallThresholdFactor.
	StallFactor int
	// StallProbation makes a broker held out for a stalled attempt return through its probation
	// (ProbationProbes good probes in a row) rather than at its next answer: a broker that hangs
	// one attempt in ten answers the other nine, and each answer readmitted it. A stall counted
	// as a failure (Stalled while the broker is held) keeps reason SendStalled, so the isolation
	// limit still releases a broker that stopped answering before one that refuses connections
	// (see lessBad). With GrowOnRepeat the hold is an isolation episode, so a broker that hangs
	// again soon after its probation sits out its grown isolation. Only applies when Probing
	// with a probation.
	StallProbation bool
	// ProbationSpan, when positive, makes a probation after silence (a stalled attempt, an attempt
	// or watch probe without an answer) last as long as the broker's trouble has: its good probes
	// in a row must span the time from its first silence within TroubleWindow to the first of
	// them, at most ProbationSpan. A broker silent once for a moment is readmitted as before; one
	// that hung or flapped twice within the window needs good probes across more than its whole
	// last cycle, which no single up phase gives. A broker silent once for longer than
	// ProbationSpan (an outage that ended: a healed network, a thawed JVM) returns on its probes,
	// unless it relapsed. Only applies when Probing with a probation.
	ProbationSpan time.Duration
	// OnChange is called, outside any lock, when a broker becomes unavailable or available again.
	OnChange func(Change)
}

// Change reports that a broker became unavailable (Isolated) or available again.
type Change struct {
	Broker   string
	Isolated bool
	// Released is set when the isolation limit (MaxIsolatedPercent) ended the isolation early.
	Released bool
	// Seq increases with every change of one Tolerance; callbacks of concurrent calls can run
	// out of order, and the higher Seq is the later state.
	Seq uint64
	// Item is the broker's state right after the change (for a removed broker, the state it
	// had when it was removed).
	Item Item
}

// Item is a snapshot of one broker's fault state, used for status and for restore after restart.
type Item struct {
	Broker  string
	Reason  Reason
	Latency time.Duration
	// Since is when the broker last became unavailable; Until is when its timer isolation ends
	// (zero if it never had one; in the past when it is held by a pod mark or awaits proof).
	Since, Until time.Time
	Reachable    bool
	// Peer is set when the broker is unavailable only because other replicas claim it (see
	// SetPeerClaims): this table has learnt nothing against it. Reason, Latency and Until are
	// then the claim's.
	Peer bool
	// HeldUntilProven is set while the broker returns only on proof whatever its timer says:
	// probing and unreachable, or on probation with good probes still to come (for a peer item,
	// a claim without an end). Until then says nothing of when it returns.
	HeldUntilProven bool
	// ConsecutiveFailures is, without GrowOnRepeat, the number of failed sends and probes since
	// the last successful send. With GrowOnRepeat it is the number of isolation episodes (entries
	// into isolation by a failure; further failures while so isolated do not count) since the
	// broker last went a probation period without failing; successes alone do not clear it.
	// Restore carries it over, so growth survives a restart.
	ConsecutiveFailures int
}

// Tolerance is the fault table of one policy, keyed by broker name. It is safe for concurrent
// use; see the package documentation for the rules it applies.
type Tolerance struct {
	clock     Clock
	realClock bool
	base      time.Time // ticks count nanoseconds from here

	// entries maps broker names to entries. The map is never changed in place: writers copy it
	// under mu and swap the pointer, so readers look names up without a lock.
	entries atomic.Pointer[map[string]*Entry]
	// table, sem and probing are the policy in force, read by Update's lock-free fast path.
	table   atomic.Pointer[Table]
	sem     atomic.Int32
	probing atomic.Bool
	// worst is PickOneAtLeast's round-robin index (RocketMQ 4.x's whichItemWorst).
	worst atomic.Uint32

	mu      sync.Mutex
	opts    Options   // under mu
	present int       // brokers known and not removed, under mu
	seq     uint64    // under mu
	order   itemOrder // brokers with an item, in RocketMQ's map order, under mu
}

// Entry is where one broker's fault state lives under one policy: availability and the reason
// it is held out, the last latency, the failure and episode counts, probation, pod and peer
// marks, the attempts in flight and the usual latency they are judged by (the attempt deadline
// and the stall threshold, see deadline.go). A Tolerance is one policy's table, so a broker that
// two policies route to has two Entries, each with its own count in flight and its own latency
// estimate. It is also a stable handle for hot paths that check the same brokers over and over:
// it stays valid for the life of its Tolerance. What is not fault state lives with the producer
// (its route's view of the broker, its pressure figures, its connection).
type Entry struct {
	t    *Tolerance
	name string

	// Read without a lock, by selection on every send; written only when the state changes.
	gate      atomic.Int64 // 0: available; gateHeld: unavailable; else unavailable until this tick
	reachable atomic.Bool
	quiet     atomic.Bool // a fast success would change nothing but the latency
	// topics are the broker's holds for one topic each (see RefusedTopic), nil while there are
	// none; the slice is never changed in place.
	topics atomic.Pointer[[]topicHold]

	// latency is written by every send, so it lives on a cache line of its own: otherwise each
	// send would evict the line that selection reads from every core.
	_       [64]byte
	latency atomic.Int64 // last measured, nanoseconds
	// stamp is RocketMQ's startTimestamp under SemanticsRocketMQ4: the tick of the last update
	// plus its isolation, set by every update (fast successes included), for PickOneAtLeast.
	stamp atomic.Int64
	// inflight counts the attempts started and not ended (AttemptStarted, AttemptEnded);
	// progress is the tick of the broker's last sign of life for them: an attempt started while
	// none was in flight, or one ended. While attempts are in flight, now - progress is the age
	// of the oldest one the broker has not answered.
	inflight atomic.Int32
	progress atomic.Int64
	// srtt and rttvar are the smoothed latency of successful attempts and its mean deviation, in
	// nanoseconds, kept as TCP keeps its round-trip estimate (RFC 6298); see UsualLatency.
	srtt, rttvar atomic.Int64
	_            [16]byte

	// Guarded by t.mu.
	until    int64 // tick at which the timer isolation ends, 0 if none
	since    int64 // tick at which the broker last became unavailable
	holds    uint8 // holdProof | holdPod | holdProbation
	failures int   // failed attempts in a row, or with GrowOnRepeat isolation episodes
	pending  int   // good probes still needed before a broker on probation returns
	calm     int64 // with GrowOnRepeat: tick from which the probation after the last episode runs
	reason   Reason
	severity time.Duration // how bad the last update was, for the isolation limit's "least bad"
	pod      PodState
	member   bool // unavailable as far as changes have reported
	present  bool // false once removed: a tombstone, kept so handles stay valid
	// ordered is set while the broker has an item (an update since it was last forgotten), which
	// places it in Tolerance.order; hash caches its place there.
	ordered bool
	hash    int32
	// peer is the tick until which other replicas' claims hold the broker out (peerHeld: until
	// the claim is withdrawn), 0 if none; claim is the claim it came from, kept when the isolation
	// limit releases the broker so that the same claim arriving again does not isolate it again.
	peer     int64
	claim    PeerClaim
	hasClaim bool

	// troubled is the tick of the broker's first silence within TroubleWindow of the next,
	// silenced that of its last (0: none); streak the tick of the first good probe of its
	// probation's run and span how long that run must last (see Options.ProbationSpan).
	troubled, silenced, streak int64
	span                       time.Duration
	// answered is set when the broker answered a probe after its last silence, relapsed when it
	// was silent again after such an answer within TroubleWindow.
	answered, relapsed bool
	// hung is set while the broker's stall hold came from a request it left unanswered while it
	// answered others (see StalledAnswering): a good probe does not end that hold's timer.
	hung bool
}

const (
	holdProof     uint8 = 1 << iota // probing and unreachable: needs proof to return
	holdPod                         // pod not ready or terminating, and pod health respected
	holdProbation                   // probing and on probation: more good probes needed to return
)

// gateHeld in Entry.gate means unavailable with no end in time.
const gateHeld = math.MaxInt64

// baseOffset puts the tick origin well before the clock's start, so that ticks stay positive
// (0 is "no time") even if a manual clock is set back.
const baseOffset = 10 * 365 * 24 * time.Hour

// maxRestored bounds an isolation re-applied by Restore, so a corrupt snapshot cannot isolate a
// broker for longer than any table with full growth could.
const maxRestored = MaxGrowthFactor * time.Duration(MaxMillis) * time.Millisecond

// New returns an empty fault table with the given policy.
func New(opts Options) *Tolerance {
	t := &Tolerance{clock: opts.Clock}
	// RocketMQ starts its pick index at a random value; so does every table.
	t.worst.Store(rand.Uint32())
	switch opts.Clock.(type) {
	case nil, RealClock, *RealClock:
		t.clock = RealClock{}
		t.realClock = true
	}
	t.base = t.clock.Now().Add(-baseOffset)
	m := map[string]*Entry{}
	t.entries.Store(&m)
	t.setOptions(opts)
	return t
}

// setOptions stores opts with defaults filled in. Callers hold mu (or own t exclusively).
func (t *Tolerance) setOptions(opts Options) {
	if opts.Table == nil {
		opts.Table, _ = PresetTable(PresetRocketMQ5)
	}
	opts.Clock = t.clock
	t.opts = opts
	t.table.Store(opts.Table)
	t.sem.Store(int32(opts.Semantics))
	t.probing.Store(opts.Probing)
}

// Options returns the policy in force, with defaults filled in.
func (t *Tolerance) Options() Options {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.opts
}

// Configure replaces the policy at run time and keeps everything learnt: isolations keep their end,
// reachable flags and failure counts stay. Holds are recomputed under the new policy (for instance,
// turning probing on holds brokers that are unreachable now, and ignoring pod health releases pod
// marks), and an isolation limit that the change could break (a new limit, or holds that changed:
// more brokers held, or pod marks gone from isolations they covered) is enforced at once; the same
// options again change nothing, so re-applying a policy does not release a restored isolation
// before the brokers the policy governs are known (see Restore). opts.Clock is ignored.
func (t *Tolerance) Configure(opts Options) {
	ev := t.lock()
	now := t.tick()
	prevLimit := t.opts.MaxIsolatedPercent
	t.setOptions(opts)
	ev.fn = opts.OnChange
	held := false // some broker's holds changed
	for _, e := range *t.entries.Load() {
		if e.present {
			if opts.Semantics == SemanticsDisabled {
				// Fault tolerance off records nothing; what was learnt would be stale if it
				// were turned on again, and status would show isolations nothing enforces.
				t.forget(e)
			}
			before := e.holds
			e.pending = min(e.pending, t.probation())
			t.recomputeHolds(e)
			held = held || e.holds != before
		}
	}
	if held || opts.MaxIsolatedPercent != prevLimit {
		t.enforceIsolationLimit(now, &ev)
	}
	for _, e := range *t.entries.Load() {
		if e.present {
			t.settleGate(e, now)
			t.sync(e, now, false, 0, &ev)
		}
	}
	t.unlock(&ev)
}

// tick returns the clock's current time as nanoseconds since base, always at least 1.
func (t *Tolerance) tick() int64 {
	var d time.Duration
	if t.realClock {
		// time.Since reads only the monotonic clock when base carries a monotonic reading, which
		// costs about half of time.Now.
		d = time.Since(t.base)
	} else {
		d = t.clock.Now().Sub(t.base)
	}
	if d < 1 {
		return 1
	}
	return int64(d)
}

// timeOf converts a tick to a time; 0 becomes the zero time.
func (t *Tolerance) timeOf(tick int64) time.Time {
	if tick == 0 {
		return time.Time{}
	}
	return t.base.Add(time.Duration(tick)).Round(0)
}

// lookup finds a broker's entry without a lock; it may be a tombstone.
func (t *Tolerance) lookup(broker string) *Entry {
	return (*t.entries.Load())[broker]
}

// Available reports whether queue selection may pick broker: false while it is isolated, held
// for proof of reachability or marked by its pod. Unknown brokers are available. It takes no
// lock and allocates nothing.
func (t *Tolerance) Available(broker string) bool {
	e := t.lookup(broker)
	return e == nil || e.Available()
}

// Reachable reports the broker's reachable flag; unknown brokers are reachable. It takes no lock
// and allocates nothing.
func (t *Tolerance) Reachable(broker string) bool {
	e := t.lookup(broker)
	return e == nil || e.reachable.Load()
}

// Entry returns the broker's handle, creating its item if the broker is unknown (or removed).
func (t *Tolerance) Entry(broker string) *Entry {
	// present is read under mu, never on a lock-free fast path: a removed broker's tombstone is
	// brought back by whatever next records an outcome for it (a probe of a round that started
	// before the removal, a send, a pressure poll), under mu but without the runtime's lock that
	// route compilation, the one caller, holds; read without mu it races with that write.
	ev := t.lock()
	if e := t.lookup(broker); e != nil && e.present {
		t.unlock(&ev)
		return e
	}
	now := t.tick()
	e := t.obtain(broker, now)
	t.sync(e, now, false, 0, &ev)
	// One more broker known may leave a restored excess over the isolation limit (see Restore).
	t.enforceIsolationLimit(now, &ev)
	t.unlock(&ev)
	return e
}

// Name returns the broker's name.
func (e *Entry) Name() string { return e.name }

// Available is Tolerance.Available for this broker, without the name lookup.
func (e *Entry) Available() bool {
	g := e.gate.Load()
	if g == 0 {
		return true
	}
	if g == gateHeld || e.t.tick() < g {
		return false
	}
	// The isolation ran out: open the gate so later checks skip the clock. The swap fails
	// harmlessly if a writer moved the gate meanwhile.
	e.gate.CompareAndSwap(g, 0)
	return true
}

// Reachable is Tolerance.Reachable for this broker, without the name lookup.
func (e *Entry) Reachable() bool { return e.reachable.Load() }

// Brokers returns the names of the known brokers, sorted.
func (t *Tolerance) Brokers() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, t.present)
	for name, e := range *t.entries.Load() {
		if e.present {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Lookup returns a snapshot of one broker's item, and false if the broker is unknown.
func (t *Tolerance) Lookup(broker string) (Item, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(broker)
	if e == nil || !e.present {
		return Item{}, false
	}
	return t.item(e), true
}

// Remove forgets a broker. A removed broker is available and reachable again; if it was
// unavailable, a Change reports that.
func (t *Tolerance) Remove(broker string) {
	ev := t.lock()
	if e := t.lookup(broker); e != nil && e.present {
		now := t.tick()
		if e.member {
			// Report the state the broker left, not the blank one it is reset to.
			e.member = false
			t.change(&ev, Change{Broker: e.name, Item: t.item(e)})
		}
		e.present = false
		t.present--
		t.order.remove(e)
		t.reset(e)
		t.sync(e, now, false, 0, &ev)
		// Fewer brokers may mean a smaller isolation limit.
		t.enforceIsolationLimit(now, &ev)
	}
	t.unlock(&ev)
}

// obtain returns the broker's entry, creating it or bringing a tombstone back. Callers hold mu.
func (t *Tolerance) obtain(broker string, now int64) *Entry {
	old := *t.entries.Load()
	if e := old[broker]; e != nil {
		if !e.present {
			t.reset(e)
			e.present = true
			t.present++
		}
		return e
	}
	e := &Entry{t: t, name: broker, present: true}
	t.reset(e)
	m := make(map[string]*Entry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[broker] = e
	t.entries.Store(&m)
	t.present++
	return e
}

// reset clears everything learnt about e, leaving it available and reachable. Callers hold mu.
func (t *Tolerance) reset(e *Entry) {
	e.until, e.since, e.holds, e.failures, e.calm, e.pending = 0, 0, 0, 0, 0, 0
	e.reason, e.severity, e.pod = "", 0, PodReady
	e.latency.Store(0)
	e.stamp.Store(0)
	e.srtt.Store(0)
	e.rttvar.Store(0)
	e.reachable.Store(true)
	e.gate.Store(0)
	e.peer, e.claim, e.hasClaim = 0, PeerClaim{}, false
	e.topics.Store(nil)
	e.troubled, e.silenced, e.streak, e.span, e.hung = 0, 0, 0, 0, false
	e.answered, e.relapsed = false, false
}

// blocked reports whether e is unavailable at now. Callers hold mu.
func blocked(e *Entry, now int64) bool {
	return e.present && (e.holds != 0 || now < e.until || now < e.peer)
}

// ownBlocked reports whether e is unavailable at now by what this table learnt itself (or its
// pod), peers' claims aside. Callers hold mu.
func ownBlocked(e *Entry, now int64) bool {
	return e.present && (e.holds != 0 || now < e.until)
}

// recomputeHolds derives e's holds from its facts and the policy. Callers hold mu.
func (t *Tolerance) recomputeHolds(e *Entry) {
	var h uint8
	if t.opts.Probing && !e.reachable.Load() {
		h |= holdProof
	}
	if t.opts.RespectPodHealth && (e.pod == PodNotReady || e.pod == PodTerminating) {
		h |= holdPod
	}
	if t.opts.Probing && e.pending > 0 {
		h |= holdProbation
	}
	e.holds = h
}

// settleGate publishes e's state to the read path. Callers hold mu.
func (t *Tolerance) settleGate(e *Entry, now int64) {
	switch {
	case !e.present:
		e.gate.Store(0)
	case e.holds != 0 || e.peer == peerHeld:
		e.gate.Store(gateHeld)
	case max(e.until, e.peer) > now:
		e.gate.Store(max(e.until, e.peer))
	default:
		e.gate.Store(0)
	}
}

// sync records whether e is unavailable now and queues a Change if that differs from what was
// last reported. since, if not 0, is used as the start of a new isolation instead of now.
// Callers hold mu.
func (t *Tolerance) sync(e *Entry, now int64, released bool, since int64, ev *events) {
	m := blocked(e, now)
	if m != e.member {
		e.member = m
		if m {
			if since == 0 || since > now {
				since = now
			}
			e.since = since
		}
		t.change(ev, Change{Broker: e.name, Isolated: m, Released: released, Item: t.item(e)})
	}
	e.quiet.Store(e.present && !m && e.failures == 0 && e.reachable.Load() && e.ordered)
}

// change numbers c and queues it for delivery. Callers hold mu.
func (t *Tolerance) change(ev *events, c Change) {
	t.seq++
	if ev.fn != nil {
		c.Seq = t.seq
		ev.list = append(ev.list, c)
	}
}

// item snapshots e. Callers hold mu.
func (t *Tolerance) item(e *Entry) Item {
	reason := e.reason
	if e.holds&holdPod != 0 {
		if e.pod == PodTerminating {
			reason = ReasonPodTerminating
		} else {
			reason = ReasonPodNotReady
		}
	}
	if now := t.tick(); !ownBlocked(e, now) && now < e.peer {
		it := Item{Broker: e.name, Reason: e.claim.Reason, Latency: e.claim.Latency, Since: t.timeOf(e.since),
			Reachable: e.reachable.Load(), ConsecutiveFailures: e.failures, Peer: true}
		if e.peer != peerHeld {
			it.Until = e.claim.Until
		} else {
			it.HeldUntilProven = true
		}
		return it
	}
	return Item{
		Broker:              e.name,
		Reason:              reason,
		Latency:             time.Duration(e.latency.Load()),
		Since:               t.timeOf(e.since),
		Until:               t.timeOf(e.until),
		Reachable:           e.reachable.Load(),
		HeldUntilProven:     e.holds&(holdProof|holdProbation) != 0,
		ConsecutiveFailures: e.failures,
	}
}

// events collects the changes of one call so they can be delivered after the lock is released.
type events struct {
	fn   func(Change)
	list []Change
}

// lock takes mu and starts collecting changes for the current OnChange.
func (t *Tolerance) lock() events {
	t.mu.Lock()
	return events{fn: t.opts.OnChange}
}

// unlock releases mu and then delivers the collected changes.
func (t *Tolerance) unlock(ev *events) {
	t.mu.Unlock()
	for _, c := range ev.list {
		ev.fn(c)
	}
}
