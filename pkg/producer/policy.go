package producer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// RocketMQ's producer defaults (DefaultMQProducer and its fault strategy), the same in 4.x and 5.x.
const (
	DefaultAttempts    = 3
	DefaultSendTimeout = 3000 * time.Millisecond
	// DefaultProbeInterval is the mean time between two probe rounds. RocketMQ 5.x's
	// detector has the same detectInterval but runs every 3 s, so it probes each item every 3 s.
	DefaultProbeInterval = 2000 * time.Millisecond
	// DefaultProbeTimeout is RocketMQ 5.x's detectTimeout.
	DefaultProbeTimeout = 200 * time.Millisecond
	// MaxProbationProbes bounds ProbePolicy.ProbationProbes.
	MaxProbationProbes = 100
)

// Defaults of detour's own extensions in the Detour preset.
const (
	// DetourPerAttemptTimeout is the attempt deadline of every attempt but the last, a third of
	// the send timeout; with AdaptivePerAttempt it is the longest an adaptive deadline allows
	// (fault.Entry.AttemptDeadline decides each attempt's).
	DetourPerAttemptTimeout = 1000 * time.Millisecond
	// DetourStallAfter is the least time a broker's oldest attempt in flight may go unanswered
	// before the broker is held out as stalled (fault.Options.StallAfter); a broker whose usual
	// latency is longer gets fault.StallThresholdFactor times it (see fault.AttemptDeadlineFloor
	// for both rules side by side).
	DetourStallAfter = 100 * time.Millisecond
	// DetourMaxIsolatedPercent never lets every broker of a policy be isolated: when all would be,
	// the least bad one is released and stays selectable. A lower limit would also send traffic to
	// a dead broker while most brokers are down (two of three, say), which a limit meant to outlast
	// the client's own trouble must not do.
	DetourMaxIsolatedPercent = 99
	// DetourPressure are the Detour preset's pressure thresholds: half of what makes a broker
	// with RocketMQ's defaults refuse (waitTimeMillsInSendQueue 200 ms, osPageCacheBusyTimeOutMills
	// 1000 ms; a broker whose own limits are lower is judged by half of those), half its send
	// queue, and a put p99 that a healthy store never approaches.
	DetourPressureFillPercent   = 50
	DetourPressureHeadWait      = 100 * time.Millisecond
	DetourPressurePageCacheLock = 500 * time.Millisecond
	DetourPressurePutLatency99  = 500 * time.Millisecond
	// DetourProbationProbes is how many good probes in a row readmit a broker isolated for silence
	// or a slow answer, or whose isolation repeated. After the first good probe the others come
	// with full rounds, so they span one to three intervals (2-6 s by default), longer than the up
	// phase of a broker that flaps every second or two, yet readmit one that recovered for good
	// about 1.75 intervals after it answers again (3.5 s by default, at most about 7 s).
	DetourProbationProbes = 3
	// DetourProbationSpan is the longest a probation after silence must last (see
	// fault.Options.ProbationSpan): as long as the broker's trouble has, up to the failure
	// isolation of RocketMQ 5.x's table, so a broker that comes back for good after a long
	// outage waits at most this long beyond its probes.
	DetourProbationSpan = 10 * time.Second
	// DefaultHedgeBudgetPercent is the share of sends a policy's hedges may add when hedging is on
	// and its budget unset: "The Tail at Scale" cut a p99.9 twenty-fold for 2 % more requests.
	DefaultHedgeBudgetPercent = 2
	// MaxHedgeBudgetPercent bounds HedgePolicy.BudgetPercent: more would no longer be a tail's
	// remedy but a second copy of a large share of the traffic.
	MaxHedgeBudgetPercent = 50
)

// DefaultRetryCodes is RocketMQ 5.3.1+'s retryResponseCodes set: TOPIC_NOT_EXIST,
// SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, SYSTEM_BUSY, NO_PERMISSION, NO_BUYER_ID, NOT_IN_CURRENT_UNIT
// and GO_AWAY.
var DefaultRetryCodes = []int16{17, 14, 1, 2, 16, 204, 205, 1500}

// RocketMQ4RetryCodes is RocketMQ 4.9.x's set: DefaultRetryCodes without SYSTEM_BUSY (added in
// 5.3.0) and GO_AWAY (5.3.1), so a busy broker fails the send at once.
var RocketMQ4RetryCodes = []int16{17, 14, 1, 16, 204, 205}

// Preset names a whole behaviour: how outcomes update the fault table, how queues are selected,
// which sends are retried and how, and which of detour's extensions are on. A Policy's other
// fields override what its preset says.
type Preset string

const (
	// PresetDetour (also the empty Preset) is RocketMQ 5.x's table and rules with detour's
	// extensions on: probing (recovery only on proof), growth on repeated failure, pod health, an
	// isolation limit of DetourMaxIsolatedPercent, an attempt deadline of DetourPerAttemptTimeout
	// that follows each broker's latency (AdaptivePerAttempt) and stall detection
	// (DetourStallAfter). Its selection differs from RocketMQ 5.x's in two documented ways: a retry
	// never returns to the previous broker while any other healthy-pod broker exists, and retries
	// start from a random queue without disturbing the index other senders share. Async sends retry
	// like sync ones (broker retry codes included), and oneway sends retry a failed write. A
	// message a broker refuses as MESSAGE_ILLEGAL isolates nothing by itself and is tried on a
	// broker that has not refused it; if one stores it, the brokers that refused it are isolated
	// (reason RefusesValidMessages), and if every broker tried refuses it the send fails as
	// refused.
	PresetDetour Preset = "Detour"
	// PresetRocketMQ5 is RocketMQ 5.3.x's producer with sendLatencyFaultEnable=true, exactly:
	// its table and update rules (isolation only extends, a reachable flag), its selection
	// (available and not the previous broker, then reachable and not the previous broker, then
	// any queue, the index reset at random on every sync retry), its retry codes, one attempt for
	// oneway sends (which, as RocketMQ 5.x does not wait for the connection or the write, return
	// as sent even when the broker is unreachable), and async sends that retry only transport
	// failures. No extension is on.
	PresetRocketMQ5 Preset = "RocketMQ5"
	// PresetRocketMQ4 is RocketMQ 4.9.x's producer with sendLatencyFaultEnable=true, exactly: its
	// table and update rules (every update sets the isolation end; client errors isolate; no
	// reachable flag), its selection (one index step per send and a walk to the first available
	// broker, the previous broker not avoided, then pickOneAtLeast, then any queue), its retry
	// codes (no SYSTEM_BUSY, no GO_AWAY), one attempt for oneway sends (a connection that cannot
	// be made fails it; a failed write goes unseen), and async sends that retry only transport
	// failures. No extension is on.
	PresetRocketMQ4 Preset = "RocketMQ4"
	// PresetDisabled is RocketMQ's default, sendLatencyFaultEnable=false (5.3.x's producer
	// otherwise, oneway sends included): nothing is isolated, selection only avoids the previous
	// attempt's broker. No extension is on.
	PresetDisabled Preset = "Disabled"
)

// Presets lists every preset, the default first.
var Presets = []Preset{PresetDetour, PresetRocketMQ5, PresetRocketMQ4, PresetDisabled}

// orDefault maps the empty preset to PresetDetour.
func (p Preset) orDefault() Preset {
	if p == "" {
		return PresetDetour
	}
	return p
}

// known reports whether p names a preset ("" is the default).
func (p Preset) known() bool {
	switch p.orDefault() {
	case PresetDetour, PresetRocketMQ5, PresetRocketMQ4, PresetDisabled:
		return true
	}
	return false
}

// semantics is how the preset's fault table records outcomes.
func (p Preset) semantics() fault.Semantics {
	switch p.orDefault() {
	case PresetRocketMQ4:
		return fault.SemanticsRocketMQ4
	case PresetDisabled:
		return fault.SemanticsDisabled
	}
	return fault.SemanticsRocketMQ5
}

// rocketMQ reports whether the preset is one of RocketMQ's own behaviours, whose selection and
// retry rules are RocketMQ's rather than detour's.
func (p Preset) rocketMQ() bool { return p.orDefault() != PresetDetour }

// table is the preset's threshold table.
func (p Preset) table() *fault.Table {
	name := fault.PresetRocketMQ5
	if p.orDefault() == PresetRocketMQ4 {
		name = fault.PresetRocketMQ4
	}
	t, err := fault.PresetTable(name)
	if err != nil {
		// The preset tables are constants; failing here is a programming error.
		panic(err)
	}
	return t
}

// retryCodes is the preset's set of retried broker codes.
func (p Preset) retryCodes() []int16 {
	if p.orDefault() == PresetRocketMQ4 {
		return RocketMQ4RetryCodes
	}
	return DefaultRetryCodes
}

// RetryPolicy says how many times a send is tried and within which time budget. It applies to
// every send mode, as the policy's preset says: under RocketMQ's presets a sync send makes up to
// Attempts attempts and retries transport failures and RetryOnCodes, an async send makes up to
// Attempts attempts (RocketMQ's 1 + retryTimesWhenSendAsyncFailed, whose default is the same)
// and retries transport failures only, and a oneway send makes one attempt; under PresetDetour
// every mode retries as a sync send does.
type RetryPolicy struct {
	// Attempts is 1 + RocketMQ's retryTimesWhenSendFailed; 0 means DefaultAttempts.
	Attempts int
	// SendTimeout is the budget for all attempts together (RocketMQ's sendMsgTimeout); 0 means
	// DefaultSendTimeout. A context deadline that comes earlier wins.
	SendTimeout time.Duration
	// PerAttemptTimeout is the attempt deadline of every attempt but the last (RocketMQ 5.3.3's
	// sendMsgMaxTimeoutPerRequest), so one hung broker cannot eat the whole budget. 0 means none:
	// every attempt may use what is left of the send timeout.
	PerAttemptTimeout time.Duration
	// AdaptivePerAttempt makes each broker's attempt deadline follow its own latency:
	// fault.AttemptDeadlineFactor times its usual latency on success (fault.Entry.UsualLatency),
	// at least fault.AttemptDeadlineFloor and at most PerAttemptTimeout, so a budget is not spent
	// waiting on one sick broker while what is left could reach another; an attempt so cut is a
	// stalled attempt, not a failed one. A broker with no success measured yet gets
	// PerAttemptTimeout. fault.Entry.AttemptDeadline decides. Needs PerAttemptTimeout;
	// PresetDetour sets it.
	AdaptivePerAttempt bool
	// RetryOnCodes are the broker response codes that are retried on another broker. nil means
	// the preset's (RocketMQ4RetryCodes for PresetRocketMQ4, else DefaultRetryCodes); an empty
	// non-nil slice retries no broker code.
	RetryOnCodes []int16
	// RetryAnotherBrokerWhenNotStoreOK retries when the broker stored the message but reported
	// FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (sync sends only under
	// RocketMQ's presets, as in RocketMQ).
	RetryAnotherBrokerWhenNotStoreOK bool
}

// ProbePolicy configures active recovery checks of isolated brokers (GET_MAX_OFFSET).
type ProbePolicy struct {
	// Enabled turns the probe loop on; the fault table then ends isolations only on a good probe.
	Enabled bool
	// Interval is the mean time between probe rounds, each drawn within ±50 %; 0 means
	// DefaultProbeInterval.
	Interval time.Duration
	// Timeout of one probe; 0 means DefaultProbeTimeout.
	Timeout time.Duration
	// Routed also probes, every round, each broker the policy's routes use that the table does not
	// hold out, so a silent broker is found without traffic through detour (what the name-server
	// facade publishes to other clients). Such a probe waits as long as a send attempt would (the
	// per-attempt timeout, else the send timeout); one left unanswered counts as a failed attempt
	// (fault.Tolerance.WatchFailed: reason ProbeFailed), and one answered slower than a threshold
	// of the table as a send of that latency (fault.Tolerance.WatchSlow: reason SlowProbe). Needs
	// Enabled.
	Routed bool
	// ProbationProbes is how many good probes in a row readmit a broker isolated for silence or a
	// slow answer, or whose isolation repeated (see fault.Options.ProbationProbes); 0 or 1 means
	// one. A broker on probation whose answer was good waits for the next full round: probed
	// sooner, its good probes would fit in the up phase of a broker that flaps. PresetDetour sets
	// DetourProbationProbes.
	ProbationProbes int
}

// HedgePolicy configures hedged sends: an attempt that has waited past its broker's usual latency
// (fault.Entry.HedgeDelay) while the attempt deadline is still ahead also sends the same message,
// with the same message id (UNIQ_KEY), to another writable broker; the first success answers the
// send, and both attempts' outcomes go to the fault table. A hedge may store a second copy, which
// a consumer deduplicating by message id drops. Only the Detour preset hedges, and never a message
// group's message (an ordered send), a transaction's half message or a oneway send.
type HedgePolicy struct {
	// Enabled turns hedging on; off by default in every preset, since a second stored copy is a
	// change a user opts into.
	Enabled bool
	// BudgetPercent is the most hedges add, as a share of the sends of every policy with hedging on
	// in the runtime: each such send earns a share of a hedge, a hedge spends a whole one, and at
	// most ten hedges can be saved, so a broker slow for long, or every broker slow at once, is
	// hedged no more than this. 0 means DefaultHedgeBudgetPercent; at most MaxHedgeBudgetPercent.
	BudgetPercent int
}

// PressurePolicy shifts new sends away from a broker whose own figures say it is about to refuse
// them: about every probe interval the runtime asks each broker the policy's routes use for its
// runtime table (GET_BROKER_RUNTIME_INFO) and holds out, for two intervals, one whose figures
// cross a threshold (fault.Tolerance.Pressured, reason BrokerPressure). A zero threshold judges
// nothing of its figure.
type PressurePolicy struct {
	// Enabled turns the polling on. Needs Probe.Enabled (it runs in the probe loop).
	Enabled bool
	// SendQueueFillPercent: the send queue's size as a share of its capacity.
	SendQueueFillPercent int
	// SendQueueHeadWait: how long the oldest queued send has waited; the broker refuses it as
	// busy past its waitTimeMillsInSendQueue (200 ms by default). Half the broker's own limit,
	// when the poll has read it and it is sooner, applies instead (see crosses).
	SendQueueHeadWait time.Duration
	// PageCacheLock: how long the put in progress has held the commit log's lock; the broker
	// refuses sends past its osPageCacheBusyTimeOutMills (1000 ms by default). Half the broker's
	// own limit applies instead when sooner.
	PageCacheLock time.Duration
	// PutLatency99: the 99th percentile of the broker's recent put times.
	PutLatency99 time.Duration
}

// pressed reports whether p crosses any of the policy's thresholds, each tightened to halfway to
// the broker's own limit for its figure when that is sooner (see crosses): a broker configured to
// refuse sooner than RocketMQ's defaults is held out sooner too.
func (pp *PressurePolicy) pressed(p remoting.BrokerPressure, l remoting.BrokerLimits) bool {
	fill := p.SendQueueFillPercent()
	return (pp.SendQueueFillPercent > 0 && fill >= float64(pp.SendQueueFillPercent)) ||
		crosses(pp.SendQueueHeadWait, l.SendQueueWaitMillis, float64(p.SendQueueHeadWaitMillis)) ||
		(l.SendQueueWaitMillis == 0 && pp.SendQueueHeadWait > 0 && p.SendQueueSize > 0) ||
		crosses(pp.PageCacheLock, l.PageCacheBusyMillis, float64(p.PageCacheLockMillis)) ||
		crosses(pp.PutLatency99, -1, p.PutLatency99Millis)
}

// crosses reports whether a figure in ms (-1: unknown) crosses a threshold of the policy (0:
// judges nothing) or, when sooner, half of the broker's own limit in ms (-1: unknown), so the
// broker is held out never later than halfway to what makes it refuse. A limit of 0 refuses
// whatever waits at all (the broker compares waits with >= 0 and > 0), so any figure above 0
// crosses it; a quiet broker reports 0 (BrokerController.headSlowTimeMills of an empty queue,
// CommitLog.lockTimeMills with no lock held) and is not pressed.
func crosses(policy time.Duration, limitMillis int64, figure float64) bool {
	if policy <= 0 || figure < 0 {
		return false
	}
	if limitMillis == 0 {
		return figure > 0
	}
	// In float ms: a hostile limit near the int64 bound would overflow a Duration.
	threshold := float64(policy) / float64(time.Millisecond)
	if limitMillis > 0 {
		threshold = min(threshold, float64(limitMillis)/2)
	}
	return figure >= threshold
}

// Policy is a fault policy: one fault table shared by every topic that references it. Start from
// PresetPolicy (or DefaultPolicy) and change fields: every field overrides what the preset says.
type Policy struct {
	// Name identifies the policy; routes reference it by name. "" is the runtime's default policy.
	Name string
	// Preset is the behaviour the policy starts from ("" means PresetDetour). It alone decides
	// how outcomes update the table, how queues are selected and how each send mode retries; the
	// other fields set numbers and extensions.
	Preset Preset
	// Table is the latency-to-isolation table; nil means the preset's.
	Table *fault.Table
	// Retry configures attempts and time budgets.
	Retry RetryPolicy
	// Probe configures the recovery probe loop.
	Probe ProbePolicy
	// Pressure configures the polling of brokers' own pressure figures.
	Pressure PressurePolicy
	// MaxIsolatedPercent is the isolation limit, the share of brokers isolated at once; 0 or 100
	// means no limit.
	MaxIsolatedPercent int
	// RespectPodHealth keeps brokers whose pods are not ready or terminating out of selection
	// while other brokers remain.
	RespectPodHealth bool
	// GrowOnRepeat lengthens the isolation of repeated failure episodes (see fault.Options).
	GrowOnRepeat bool
	// StallAfter holds out a broker whose oldest attempt in flight has gone unanswered this long
	// and fault.StallThresholdFactor times its usual latency, before the attempt reaches its
	// deadline (see fault.Options.StallAfter); 0 turns it off. PresetDetour sets DetourStallAfter.
	StallAfter time.Duration
	// Hedge configures hedged sends (PresetDetour only; off by default).
	Hedge HedgePolicy
}

// PresetPolicy returns the policy named name that behaves exactly as preset, with every number
// and extension at the preset's value. It fails for an unknown preset.
func PresetPolicy(name string, preset Preset) (Policy, error) {
	if !preset.known() {
		return Policy{}, fmt.Errorf("policy %q: unknown preset %q (known: %v)", name, preset, Presets)
	}
	preset = preset.orDefault()
	p := Policy{
		Name:   name,
		Preset: preset,
		Table:  preset.table(),
		Retry: RetryPolicy{
			Attempts:     DefaultAttempts,
			SendTimeout:  DefaultSendTimeout,
			RetryOnCodes: slices.Clone(preset.retryCodes()),
		},
		Probe: ProbePolicy{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout},
		// Off in every preset; the budget is the one hedging gets when turned on.
		Hedge: HedgePolicy{BudgetPercent: DefaultHedgeBudgetPercent},
	}
	if preset == PresetDetour {
		p.Retry.PerAttemptTimeout = DetourPerAttemptTimeout
		p.Retry.AdaptivePerAttempt = true
		p.StallAfter = DetourStallAfter
		p.Probe.Enabled = true
		p.Probe.ProbationProbes = DetourProbationProbes
		p.Pressure = PressurePolicy{Enabled: true, SendQueueFillPercent: DetourPressureFillPercent,
			SendQueueHeadWait: DetourPressureHeadWait, PageCacheLock: DetourPressurePageCacheLock,
			PutLatency99: DetourPressurePutLatency99}
		p.MaxIsolatedPercent = DetourMaxIsolatedPercent
		p.RespectPodHealth = true
		p.GrowOnRepeat = true
	}
	return p, nil
}

// DefaultPolicy is the Detour preset's policy, which the runtime's default policy (used by routes
// without a policy of their own) also is.
func DefaultPolicy(name string) Policy {
	p, err := PresetPolicy(name, PresetDetour)
	if err != nil {
		panic(err) // PresetDetour is always known
	}
	return p
}

// normalize fills defaults and checks ranges; it returns a copy that shares nothing mutable with p.
func (p Policy) normalize() (Policy, error) {
	if !p.Preset.known() {
		return p, fmt.Errorf("policy %q: unknown preset %q (known: %v)", p.Name, p.Preset, Presets)
	}
	p.Preset = p.Preset.orDefault()
	if p.Retry.Attempts < 0 {
		return p, fmt.Errorf("policy %q: retry attempts %d must not be negative", p.Name, p.Retry.Attempts)
	}
	if p.Retry.Attempts == 0 {
		p.Retry.Attempts = DefaultAttempts
	}
	if p.Retry.SendTimeout < 0 || p.Retry.PerAttemptTimeout < 0 {
		return p, fmt.Errorf("policy %q: retry timeouts must not be negative", p.Name)
	}
	if p.Retry.SendTimeout == 0 {
		p.Retry.SendTimeout = DefaultSendTimeout
	}
	if p.Retry.RetryOnCodes == nil {
		p.Retry.RetryOnCodes = p.Preset.retryCodes()
	}
	p.Retry.RetryOnCodes = slices.Clone(p.Retry.RetryOnCodes)
	if p.Probe.Interval < 0 || p.Probe.Timeout < 0 {
		return p, fmt.Errorf("policy %q: probe interval and timeout must not be negative", p.Name)
	}
	if p.Probe.Interval == 0 {
		p.Probe.Interval = DefaultProbeInterval
	}
	if p.Probe.Timeout == 0 {
		p.Probe.Timeout = DefaultProbeTimeout
	}
	if p.Probe.ProbationProbes < 0 || p.Probe.ProbationProbes > MaxProbationProbes {
		return p, fmt.Errorf("policy %q: probe probationProbes %d must be within 0..%d", p.Name, p.Probe.ProbationProbes, MaxProbationProbes)
	}
	if pp := p.Pressure; pp.SendQueueFillPercent < 0 || pp.SendQueueFillPercent > 100 || pp.SendQueueHeadWait < 0 || pp.PageCacheLock < 0 || pp.PutLatency99 < 0 {
		return p, fmt.Errorf("policy %q: pressure thresholds must not be negative, the fill at most 100 %%", p.Name)
	}
	if p.MaxIsolatedPercent < 0 || p.MaxIsolatedPercent > 100 {
		return p, fmt.Errorf("policy %q: maxIsolatedPercent %d must be within 0..100", p.Name, p.MaxIsolatedPercent)
	}
	if p.Hedge.BudgetPercent < 0 || p.Hedge.BudgetPercent > MaxHedgeBudgetPercent {
		return p, fmt.Errorf("policy %q: hedge budgetPercent %d must be within 0..%d", p.Name, p.Hedge.BudgetPercent, MaxHedgeBudgetPercent)
	}
	if p.Hedge.Enabled && p.Preset.rocketMQ() {
		return p, fmt.Errorf("policy %q: hedging needs the %s preset; the preset %s stays exactly what it names", p.Name, PresetDetour, p.Preset)
	}
	if p.Hedge.BudgetPercent == 0 {
		p.Hedge.BudgetPercent = DefaultHedgeBudgetPercent
	}
	if p.Table == nil {
		p.Table = p.Preset.table()
	}
	return p, nil
}

// retries reports whether code is one of the policy's retry codes. The set is small (8 by
// default), so a linear scan beats a map here and allocates nothing.
func (p *Policy) retries(code int16) bool {
	return slices.Contains(p.Retry.RetryOnCodes, code)
}

// Names of what Policy.Behavior reports beside the preset. The strings stay as users' listings
// and alerts know them: "isolationCap" is the isolation limit, "perAttemptCap" the per-attempt
// timeout (the attempt deadline), "adaptiveCap" the adaptive attempt deadline, "stall" stall
// detection.
const (
	BehaviorTable         = "table"         // the threshold table or failure latency
	BehaviorRetry         = "retry"         // attempts, send timeout, retry codes, not-store-OK retry
	BehaviorProbing       = "probing"       // Probe
	BehaviorWatch         = "watch"         // Probe.Routed
	BehaviorPressure      = "pressure"      // Pressure
	BehaviorGrowth        = "growth"        // GrowOnRepeat
	BehaviorPodHealth     = "podHealth"     // RespectPodHealth
	BehaviorIsolationCap  = "isolationCap"  // MaxIsolatedPercent
	BehaviorPerAttemptCap = "perAttemptCap" // Retry.PerAttemptTimeout
	BehaviorAdaptiveCap   = "adaptiveCap"   // Retry.AdaptivePerAttempt
	BehaviorStall         = "stall"         // StallAfter
	BehaviorHedge         = "hedge"         // Hedge
)

// Behavior says in a word or a few what the policy does, so that a listing never hides it: the
// preset's name alone when every field is the preset's, else followed by "+x" for each extension
// the policy turns on that the preset has off, "-x" for each it turns off, and "~x" where it
// changes numbers (x being BehaviorTable, BehaviorRetry, or an extension whose settings differ
// while it is on in both). For example "RocketMQ5", "RocketMQ5+probing", "Detour-growth~table".
func (p Policy) Behavior() string {
	preset := p.Preset.orDefault()
	base, err := PresetPolicy(p.Name, preset)
	if err != nil {
		return string(p.Preset)
	}
	p, err = p.normalize()
	if err != nil {
		return string(preset) + "?"
	}
	var b strings.Builder
	b.WriteString(string(preset))
	changed := func(name string, diff bool) {
		if diff {
			b.WriteString("~" + name)
		}
	}
	toggled := func(name string, on, baseOn, sameSettings bool) {
		switch {
		case on && !baseOn:
			b.WriteString("+" + name)
		case !on && baseOn:
			b.WriteString("-" + name)
		case on && !sameSettings:
			b.WriteString("~" + name)
		}
	}
	changed(BehaviorTable, !slices.Equal(p.Table.Rules(), base.Table.Rules()) || p.Table.FailureLatency() != base.Table.FailureLatency())
	changed(BehaviorRetry, p.Retry.Attempts != base.Retry.Attempts || p.Retry.SendTimeout != base.Retry.SendTimeout ||
		p.Retry.RetryAnotherBrokerWhenNotStoreOK != base.Retry.RetryAnotherBrokerWhenNotStoreOK ||
		!sameCodes(p.Retry.RetryOnCodes, base.Retry.RetryOnCodes))
	toggled(BehaviorProbing, p.Probe.Enabled, base.Probe.Enabled, p.Probe.Interval == base.Probe.Interval && p.Probe.Timeout == base.Probe.Timeout &&
		max(p.Probe.ProbationProbes, 1) == max(base.Probe.ProbationProbes, 1))
	toggled(BehaviorWatch, p.Probe.Enabled && p.Probe.Routed, base.Probe.Enabled && base.Probe.Routed, true)
	toggled(BehaviorPressure, p.Probe.Enabled && p.Pressure.Enabled, base.Probe.Enabled && base.Pressure.Enabled,
		p.Pressure == base.Pressure)
	toggled(BehaviorGrowth, p.GrowOnRepeat, base.GrowOnRepeat, true)
	toggled(BehaviorPodHealth, p.RespectPodHealth, base.RespectPodHealth, true)
	capped := func(v int) bool { return v > 0 && v < 100 }
	toggled(BehaviorIsolationCap, capped(p.MaxIsolatedPercent), capped(base.MaxIsolatedPercent), p.MaxIsolatedPercent == base.MaxIsolatedPercent)
	toggled(BehaviorPerAttemptCap, p.Retry.PerAttemptTimeout > 0, base.Retry.PerAttemptTimeout > 0, p.Retry.PerAttemptTimeout == base.Retry.PerAttemptTimeout)
	if p.Retry.PerAttemptTimeout > 0 {
		// Without a per-attempt timeout there is nothing to adapt: "-perAttemptCap" already says
		// it.
		toggled(BehaviorAdaptiveCap, p.Retry.AdaptivePerAttempt, base.Retry.PerAttemptTimeout > 0 && base.Retry.AdaptivePerAttempt, true)
	}
	toggled(BehaviorStall, p.StallAfter > 0 && p.Preset != PresetDisabled, base.StallAfter > 0, p.StallAfter == base.StallAfter)
	toggled(BehaviorHedge, p.Hedge.Enabled, false, p.Hedge.BudgetPercent == DefaultHedgeBudgetPercent)
	return b.String()
}

// sameCodes reports whether two code lists hold the same set.
func sameCodes(a, b []int16) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
