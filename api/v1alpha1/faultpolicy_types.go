package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FaultPreset names a whole behaviour: how send outcomes isolate brokers, how queues are chosen,
// how each send mode retries, and which of detour's extensions are on. Every other field of the
// spec that is set overrides what the preset says; status.behavior shows the result.
// +kubebuilder:validation:Enum=Detour;RocketMQ5;RocketMQ4;Disabled
type FaultPreset string

const (
	// PresetDetour (the default) is RocketMQ 5.x's table and update rules with detour's extensions
	// on: probing (an isolated broker returns after a successful probe), isolation growth on
	// repeated failure episodes, pod health respected, never every broker isolated (an isolation
	// limit of 99%), an attempt deadline of 1000 ms for every attempt but the last that follows
	// each broker's latency, and stalled attempts held out after 100 ms. Beyond RocketMQ, a retry
	// never goes back to the previous broker while another broker with a healthy pod exists, async
	// sends retry broker retry codes as sync sends do, and oneway sends retry a failed write.
	PresetDetour FaultPreset = "Detour"
	// PresetRocketMQ5 is RocketMQ 5.3.x's producer with sendLatencyFaultEnable=true, exactly:
	// latency 50, 100, 550, 1800, 3000, 5000, 15000 ms isolates for 0, 0, 2000, 5000, 6000, 10000,
	// 30000 ms and a failed send for 10000 ms; isolation only extends; a broker that refused a
	// send is marked unreachable; retries avoid the previous broker among available, then
	// reachable brokers, then take any queue; retry codes 1, 2, 14, 16, 17, 204, 205, 1500; one
	// attempt for oneway sends, which return as sent even when the broker is unreachable (the
	// message is then lost, as with RocketMQ 5.x's client); async sends retry transport failures
	// only. No extension is on.
	PresetRocketMQ5 FaultPreset = "RocketMQ5"
	// PresetRocketMQ4 is RocketMQ 4.9.x's producer with sendLatencyFaultEnable=true, exactly:
	// latency 50, 100, 550, 1000, 2000, 3000, 15000 ms isolates for 0, 0, 30000, 60000, 120000,
	// 180000, 600000 ms and a failed send (a client-side failure too) for 600000 ms; every send
	// sets the isolation anew, so a fast success ends one; queues are walked from one index step
	// to the first available broker, the previous one included, then the least bad isolated broker
	// is taken; retry codes 1, 14, 16, 17, 204, 205; one attempt for oneway sends, which fail when
	// the broker cannot be connected to; async sends retry transport failures only. No extension
	// is on.
	PresetRocketMQ4 FaultPreset = "RocketMQ4"
	// PresetDisabled is RocketMQ's default, sendLatencyFaultEnable=false: no broker is isolated by
	// sends; a retry only avoids the previous attempt's broker. Otherwise RocketMQ 5.3.x's
	// producer. No extension is on.
	PresetDisabled FaultPreset = "Disabled"
)

// PodHealthMode says whether broker pod readiness takes part in isolation.
// +kubebuilder:validation:Enum=Respect;Ignore
type PodHealthMode string

const (
	// PodHealthRespect keeps producers away from brokers whose pod is not Ready or is terminating,
	// while any healthy broker remains. The Detour preset's.
	PodHealthRespect PodHealthMode = "Respect"
	// PodHealthIgnore routes by measured sends alone, as a RocketMQ producer does. RocketMQ's
	// presets'.
	PodHealthIgnore PodHealthMode = "Ignore"
)

// IsolationGrowth says how isolation lengthens while a broker keeps failing.
// +kubebuilder:validation:Enum=None;Exponential
type IsolationGrowth string

const (
	// IsolationGrowthNone isolates for the table's duration every time, as RocketMQ does.
	// RocketMQ's presets'.
	IsolationGrowthNone IsolationGrowth = "None"
	// IsolationGrowthExponential doubles a failed send's isolation for each earlier isolation
	// episode of the broker (an entry into isolation by a failure; failures while it is still
	// isolated do not count again), 1x, 2x, 4x, 8x, but never beyond the table's longest
	// isolation: with RocketMQ 5.x's table 10 s, 20 s, 30 s; with RocketMQ 4.x's, whose failure
	// isolation already is its longest, no growth at all. Successes do not reset the count; it is
	// cleared once the broker has gone a failure isolation's length without failing. The Detour
	// preset's.
	IsolationGrowthExponential IsolationGrowth = "Exponential"
)

// FaultRule isolates a broker for isolationMillis once one send to it took at least latencyMillis.
type FaultRule struct {
	// latencyMillis is the send latency, in milliseconds, at or above which this rule applies.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600000
	LatencyMillis int64 `json:"latencyMillis"`

	// isolationMillis is how long, in milliseconds, the broker is kept out of selection.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600000
	IsolationMillis int64 `json:"isolationMillis"`
}

// RetryPolicy bounds how a send retries. It applies to every send mode as the preset says: under
// RocketMQ's presets a sync send makes up to attempts attempts and retries transport failures and
// retryOnCodes, an async send makes up to attempts attempts but retries transport failures only,
// and a oneway send makes one attempt; under Detour every mode retries as a sync send does.
// +kubebuilder:validation:XValidation:rule="!has(self.perAttemptTimeoutMillis) || !has(self.sendTimeoutMillis) || self.perAttemptTimeoutMillis <= self.sendTimeoutMillis",message="perAttemptTimeoutMillis must not exceed sendTimeoutMillis"
type RetryPolicy struct {
	// attempts is the number of attempts a send may make, the first included (RocketMQ's
	// 1 + retryTimesWhenSendFailed, and for async sends 1 + retryTimesWhenSendAsyncFailed).
	// +optional
	// +default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Attempts int32 `json:"attempts,omitempty"`

	// sendTimeoutMillis is the overall deadline of one send, all attempts together.
	// +optional
	// +default=3000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	SendTimeoutMillis int32 `json:"sendTimeoutMillis,omitempty"`

	// perAttemptTimeoutMillis is the attempt deadline of every attempt but the last: how long one
	// attempt may wait for an answer before the send goes on to another broker, so one hung broker
	// cannot use up the whole send timeout (RocketMQ 5.3.3's sendMsgMaxTimeoutPerRequest). The
	// last attempt has what is left of the send timeout. Unset means the preset's: 1000 for
	// Detour, none for RocketMQ's presets. Set it to sendTimeoutMillis to cut no attempt short.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	PerAttemptTimeoutMillis *int32 `json:"perAttemptTimeoutMillis,omitempty"`

	// adaptivePerAttempt makes each broker's attempt deadline follow its own latency: four times
	// its usual latency on success (the smoothed latency plus four deviations), at least 200 ms
	// and at most perAttemptTimeoutMillis, so a send's budget is not spent waiting on one sick
	// broker. An attempt so cut is a stalled attempt (reason SendStalled): the broker is held out
	// until it answers, and a failure counts only if its silence goes on. Unset means the preset's: true for Detour, false for RocketMQ's presets (a fixed deadline,
	// as RocketMQ's). It needs perAttemptTimeoutMillis.
	// +optional
	AdaptivePerAttempt *bool `json:"adaptivePerAttempt,omitempty"`

	// retryOnCodes are the broker response codes that are retried on another broker. Unset means
	// the preset's: RocketMQ 4.9.x's 1, 14, 16, 17, 204 and 205 for RocketMQ4, RocketMQ 5.3.x's
	// 1, 2, 14, 16, 17, 204, 205 and 1500 otherwise.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=32767
	RetryOnCodes []int32 `json:"retryOnCodes,omitempty"`

	// retryAnotherBrokerWhenNotStoreOK retries a send whose broker stored the message but reported
	// a flush or replication timeout (only sync sends under RocketMQ's presets, as in RocketMQ).
	// Unset means false.
	// +optional
	RetryAnotherBrokerWhenNotStoreOK *bool `json:"retryAnotherBrokerWhenNotStoreOK,omitempty"`
}

// ProbePolicy configures the probes sent to isolated brokers.
// +kubebuilder:validation:XValidation:rule="!has(self.timeoutMillis) || !has(self.intervalMillis) || self.timeoutMillis < self.intervalMillis",message="timeoutMillis must be less than intervalMillis"
type ProbePolicy struct {
	// enabled turns probing on. With probing, a broker that failed is held out until a probe
	// (GET_MAX_OFFSET) or a send succeeds, a successful probe ends its isolation at once (with
	// isolation growth, only a first offender's; after silence, a slow answer or a repeated
	// isolation, probationProbes in a row), a failed probe keeps it out, and a suspect broker
	// (silent, refusing, slow or just readmitted) is probed again about a quarter of an interval
	// later. Unset means the preset's: on for Detour, off for RocketMQ's presets.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// intervalMillis is the mean time between two probe rounds, each drawn within ±50 % so a
	// broker that stalls periodically is not always probed in the same phase (RocketMQ's own
	// detector, which detour does not run, probes every broker every 3000 ms).
	// +optional
	// +default=2000
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=600000
	IntervalMillis int32 `json:"intervalMillis,omitempty"`

	// timeoutMillis is how long a probe waits for the broker's answer.
	// +optional
	// +default=200
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	TimeoutMillis int32 `json:"timeoutMillis,omitempty"`

	// routedBrokers also probes, every interval, each broker the policy's Topics route to that is
	// not isolated, so a silent broker (no connection, or no answer within a send attempt's time:
	// the attempt deadline, else the send timeout) is found without any traffic through detour. It
	// is judged as a failed send attempt, with reason ProbeFailed: isolated for the failure
	// latency's time (grown on repeat) and readmitted as after a failed send; one answered slower
	// than a threshold of rules counts as a send of that latency, with reason SlowProbe. Turn it
	// on where the name-server facade serves clients that do not send through detour. Busy or
	// refusing answers isolate nothing but bring the broker's next probe forward. Needs probing
	// (enabled). Unset means true for a policy a Cluster's faultPolicyRef names (when probing is
	// on: the policy then watches every broker it routes to, its Topics' too), false otherwise;
	// set it false to keep a whole-cluster policy from watching.
	// +optional
	RoutedBrokers *bool `json:"routedBrokers,omitempty"`

	// probationProbes is how many good probes in a row readmit a broker isolated for silence or a
	// slow answer, or whose isolation repeated: a send got no answer, a watch probe went
	// unanswered, a send or watch probe was answered slower than a threshold of rules that
	// isolates, a probe found it failing (silent, refusing or slow) while it was isolated, or it
	// failed again after an earlier isolation. Under the Detour preset, after silence the good
	// probes must also span as long as the broker's trouble lasted (from its first silence within
	// a minute, at most 10 s). A good probe counts only if answered faster than the
	// first threshold of rules (50 ms in both presets) while the isolation's timer runs; a slower
	// one readmits nothing and starts the count over (after the timer it counts, so a far broker
	// returns). One good probe readmits a broker isolated for a broker error. Busy, pressure and
	// refused valid messages end with their timer, and pod marks with the pod. Unset means the
	// preset's: 3 for Detour, 1 for RocketMQ's presets.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	ProbationProbes *int32 `json:"probationProbes,omitempty"`
}

// PressurePolicy shifts new sends away from a broker whose own figures say it is about to refuse
// them, before it does: about every probe interval each broker the policy's Topics route to is
// asked for its runtime figures (GET_BROKER_RUNTIME_INFO), and one whose figures cross a threshold
// is held out for two intervals with reason BrokerPressure (the name-server facade hides it too),
// never beyond maxIsolatedPercent: a pressed broker is the first the isolation limit lets back.
// Unset thresholds are the preset's; 0 judges nothing of that figure. Each broker's own limits
// (waitTimeMillsInSendQueue, osPageCacheBusyTimeOutMills, read with GET_BROKER_CONFIG) tighten the
// head-wait and page-cache thresholds to half of them when that is sooner: never later than halfway
// to what makes this broker refuse.
type PressurePolicy struct {
	// enabled turns the polling on. Unset means the preset's: on for Detour, off for RocketMQ's
	// presets. Needs probing.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// sendQueueFillPercent is the threshold for the broker's send queue (sendThreadPoolQueueSize)
	// as a share of its capacity (sendThreadPoolQueueCapacity). Detour: 50.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SendQueueFillPercent *int32 `json:"sendQueueFillPercent,omitempty"`

	// sendQueueHeadWaitMillis is the threshold for how long the oldest queued send has waited
	// (sendThreadPoolQueueHeadWaitTimeMills); the broker refuses it as busy past its
	// waitTimeMillsInSendQueue, 200 ms by default. Detour: 100, or half the broker's own limit
	// when sooner (any wait when it is 0).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000
	SendQueueHeadWaitMillis *int32 `json:"sendQueueHeadWaitMillis,omitempty"`

	// pageCacheLockMillis is the threshold for how long the put in progress has held the commit
	// log's lock (pageCacheLockTimeMills); the broker refuses sends past its osPageCacheBusyTimeOutMills,
	// 1000 ms by default. Detour: 500, or half the broker's own limit when sooner.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000
	PageCacheLockMillis *int32 `json:"pageCacheLockMillis,omitempty"`

	// putLatency99Millis is the threshold for the 99th percentile of the broker's recent put
	// times (putLatency99). Detour: 500.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000
	PutLatency99Millis *int32 `json:"putLatency99Millis,omitempty"`
}

// HedgePolicy configures hedged sends: a send whose attempt has waited past what its broker
// usually takes (its usual latency, at least 20 ms) while the attempt deadline is still ahead also
// sends the same message, with the same message id (UNIQ_KEY), to another writable broker; the
// first to store it answers the send. A hedge may store a second copy of the message, which a
// consumer deduplicating by message id drops. Never for a message group's messages, a
// transaction's half messages or oneway sends, and only with the Detour preset.
type HedgePolicy struct {
	// enabled turns hedging on. Off by default: a second stored copy is a change users opt into.
	// Needs the Detour preset.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// budgetPercent is the most extra sends hedges add, as a share of the sends of every policy
	// with hedging on in one replica: each send earns a share of a hedge and each hedge spends a
	// whole one (at most ten are saved up), so when every broker is slow at once hedging adds no
	// more than this. Unset means 2.
	// +optional
	// +default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	BudgetPercent *int32 `json:"budgetPercent,omitempty"`
}

// FaultPolicySpec declares how producers isolate slow and failing brokers: a preset, and any field
// that should differ from it.
// +kubebuilder:validation:XValidation:rule="!has(self.preset) || self.preset != 'Disabled' || ((!has(self.rules) || size(self.rules) == 0) && !has(self.failureLatencyMillis))",message="rules and failureLatencyMillis must not be set with preset Disabled, which isolates nothing"
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || !has(self.probe.routedBrokers) || !self.probe.routedBrokers || (has(self.probe.enabled) ? self.probe.enabled : (!has(self.preset) || self.preset == 'Detour'))",message="probe.routedBrokers needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"
// +kubebuilder:validation:XValidation:rule="!has(self.probe) || !has(self.probe.probationProbes) || self.probe.probationProbes == 1 || (has(self.probe.enabled) ? self.probe.enabled : (!has(self.preset) || self.preset == 'Detour'))",message="probe.probationProbes above 1 needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"
// +kubebuilder:validation:XValidation:rule="!has(self.pressure) || !has(self.pressure.enabled) || !self.pressure.enabled || (has(self.probe) && has(self.probe.enabled) ? self.probe.enabled : (!has(self.preset) || self.preset == 'Detour'))",message="pressure.enabled needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"
// +kubebuilder:validation:XValidation:rule="!has(self.hedge) || !has(self.hedge.enabled) || !self.hedge.enabled || !has(self.preset) || self.preset == 'Detour'",message="hedge.enabled needs the Detour preset: RocketMQ's presets stay exactly RocketMQ's, which never hedges"
type FaultPolicySpec struct {
	// preset is the behaviour the policy starts from; every other field set here overrides it.
	// Detour (the default) is RocketMQ 5.x with detour's extensions on; RocketMQ5, RocketMQ4 and
	// Disabled are RocketMQ's own producers, proven step by step against its classes.
	// +optional
	// +default="Detour"
	Preset FaultPreset `json:"preset,omitempty"`

	// rules is a custom threshold table replacing the preset's: latencyMillis strictly
	// increasing, isolationMillis non-decreasing. A send's latency is matched against the highest
	// latencyMillis it reaches. The preset's update rules still apply.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(s, s.latencyMillis == r.latencyMillis)) && self.map(r, r.latencyMillis).isSorted()",message="rules must be strictly increasing in latencyMillis"
	// +kubebuilder:validation:XValidation:rule="self.map(r, r.isolationMillis).isSorted()",message="rules must be non-decreasing in isolationMillis"
	Rules []FaultRule `json:"rules,omitempty"`

	// failureLatencyMillis is the latency a failed send counts as when it is matched against the
	// table. Unset means the preset's: 30000 for RocketMQ4 (600 s of isolation), 10000 otherwise
	// (10 s).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600000
	FailureLatencyMillis *int64 `json:"failureLatencyMillis,omitempty"`

	// retry bounds how sends retry.
	// +optional
	// +default={}
	Retry RetryPolicy `json:"retry,omitzero"`

	// probe configures probes of isolated brokers.
	// +optional
	// +default={}
	Probe ProbePolicy `json:"probe,omitzero"`

	// pressure shifts new sends away from brokers whose own figures say they are about to refuse.
	// +optional
	// +default={}
	Pressure PressurePolicy `json:"pressure,omitzero"`

	// maxIsolatedPercent is the isolation limit: the largest share of a policy's brokers isolated at
	// once, rounded down but at least one; while it holds, at least one broker stays selectable. When
	// a new isolation would break it, the least bad isolated broker is released: one that still
	// answers (slow, or busy) before one that a send or probe found silent, then fewer failures. Unset
	// means the preset's: 99 for Detour (never every broker), no limit for RocketMQ's presets (every
	// broker may be isolated, as in RocketMQ). 100 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxIsolatedPercent *int32 `json:"maxIsolatedPercent,omitempty"`

	// stallAfterMillis turns on stall detection: a stalled attempt is one that got no answer in
	// time, and a broker whose oldest send attempt in flight has gone unanswered this long, and
	// four times the broker's usual latency, is held out while that attempt still waits, before its
	// attempt deadline: new sends go to brokers that answer (reason SendStalled). Under the Detour
	// preset the broker returns through its probation (probe.probationProbes good probes, spread
	// over as long as its trouble lasted; after the failure isolation when it left an attempt
	// unanswered while it answered others), under RocketMQ's presets with its next answer. A slow
	// answer is not a stall: it isolates by the table. 0 turns it off. Unset means the preset's:
	// 100 for Detour, 0 for RocketMQ's presets (RocketMQ knows nothing of attempts in flight).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=600000
	StallAfterMillis *int32 `json:"stallAfterMillis,omitempty"`

	// podHealth says whether broker pods that are not Ready or are terminating are avoided. Unset
	// means the preset's: Respect for Detour, Ignore for RocketMQ's presets.
	// +optional
	PodHealth PodHealthMode `json:"podHealth,omitempty"`

	// hedge configures hedged sends, off by default.
	// +optional
	// +default={}
	Hedge HedgePolicy `json:"hedge,omitzero"`

	// isolationGrowth says how isolation lengthens while a broker keeps failing. Unset means the
	// preset's: Exponential for Detour, None for RocketMQ's presets.
	// +optional
	IsolationGrowth IsolationGrowth `json:"isolationGrowth,omitempty"`
}

// IsolatedBroker is one broker a FaultPolicy keeps producers away from.
type IsolatedBroker struct {
	// brokerName is the RocketMQ broker name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	BrokerName string `json:"brokerName"`

	// cluster is the Cluster whose name servers publish the broker; empty for a broker found by
	// its pod. Brokers of different Clusters may share a name: cluster and brokerName together
	// name one broker.
	// +optional
	// +default=""
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// pod is the name of the broker's master pod, when known.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// reason says why the broker is isolated.
	// +required
	Reason IsolationReason `json:"reason"`

	// latencyMillis is the measured latency of the last send or probe to the broker, as RocketMQ
	// stores it (for a failed send too: the failure latency only decides how long it isolates).
	// +optional
	// +kubebuilder:validation:Minimum=0
	LatencyMillis int64 `json:"latencyMillis,omitempty"`

	// since is when the broker entered isolation.
	// +required
	Since metav1.Time `json:"since"`

	// until is when the isolation's timer ends. Unset once it has ended while the broker is still
	// held (see heldUntilProven), and for isolations that end on an event (pod Ready again)
	// rather than at a time.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`

	// heldUntilProven is set while the broker returns only on proof, whatever its timer says:
	// it did not answer (probing), or it is on probation and needs more good probes in a row
	// (see probe.probationProbes). A successful probe or send readmits it, not the time.
	// +optional
	HeldUntilProven bool `json:"heldUntilProven,omitempty"`

	// reachable is false once the broker failed to answer; with probing, it becomes true only
	// after a probe succeeds.
	// +required
	Reachable bool `json:"reachable"`

	// seenBy names the manager replicas whose own measurements isolate the broker (see
	// ReplicaView), first 32 by name; every replica avoids it while any of them does. When it
	// names fewer replicas than status.replicas, the replicas differ.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	SeenBy []string `json:"seenBy,omitempty"`

	// pressure is what the broker last said of its send path (GET_BROKER_RUNTIME_INFO) when the
	// status was written, for a broker isolated with reason BrokerPressure; a figure it did not
	// report is left out.
	// +optional
	Pressure *BrokerPressureFigures `json:"pressure,omitempty"`
}

// BrokerPressureFigures are a broker's own send-path figures.
type BrokerPressureFigures struct {
	// sendQueueFillPercent is its send queue's size as a share of the queue's capacity, rounded
	// up.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SendQueueFillPercent *int32 `json:"sendQueueFillPercent,omitempty"`
	// sendQueueHeadWaitMillis is how long the oldest queued send had waited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SendQueueHeadWaitMillis *int64 `json:"sendQueueHeadWaitMillis,omitempty"`
	// pageCacheLockMillis is how long the put in progress had held the commit log's lock.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PageCacheLockMillis *int64 `json:"pageCacheLockMillis,omitempty"`
	// putLatency99Millis is the 99th percentile of its recent put times, rounded up.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PutLatency99Millis *int64 `json:"putLatency99Millis,omitempty"`
	// sendQueueWaitLimitMillis is the broker's own waitTimeMillsInSendQueue as last read
	// (GET_BROKER_CONFIG): a send that waited this long in its send queue is refused as busy, so
	// pressure counts from half of it when that is sooner than the policy's head-wait threshold
	// (from any wait at all when it is 0). Left out while the broker's configuration is unread.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SendQueueWaitLimitMillis *int64 `json:"sendQueueWaitLimitMillis,omitempty"`
	// pageCacheBusyLimitMillis is the broker's own osPageCacheBusyTimeOutMills as last read: it
	// refuses sends while its page cache is locked longer, so pressure counts from half of it when
	// that is sooner than the policy's page-cache threshold.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PageCacheBusyLimitMillis *int64 `json:"pageCacheBusyLimitMillis,omitempty"`
}

// EffectiveFaultPolicy is a FaultPolicy with every field resolved against its preset: what the
// runtime applies.
type EffectiveFaultPolicy struct {
	// preset is the behaviour the policy starts from.
	// +required
	Preset FaultPreset `json:"preset"`

	// failureLatencyMillis is the latency a failed send counts as.
	// +required
	FailureLatencyMillis int64 `json:"failureLatencyMillis"`

	// failureIsolationMillis is how long a failed send isolates a broker, before any growth (0
	// with preset Disabled, which isolates nothing).
	// +required
	FailureIsolationMillis int64 `json:"failureIsolationMillis"`

	// attempts is the most attempts a sync send makes.
	// +required
	Attempts int32 `json:"attempts"`

	// onewayAttempts is the most attempts a oneway send makes.
	// +required
	OnewayAttempts int32 `json:"onewayAttempts"`

	// sendTimeoutMillis is the budget of one send, all attempts together.
	// +required
	SendTimeoutMillis int32 `json:"sendTimeoutMillis"`

	// perAttemptTimeoutMillis is the attempt deadline of every attempt but the last; unset means
	// none.
	// +optional
	PerAttemptTimeoutMillis *int32 `json:"perAttemptTimeoutMillis,omitempty"`

	// adaptivePerAttempt says whether each broker's attempt deadline follows its own latency,
	// under perAttemptTimeoutMillis.
	// +optional
	AdaptivePerAttempt bool `json:"adaptivePerAttempt,omitempty"`

	// stallAfterMillis is how long a broker's oldest attempt in flight may go unanswered (and four
	// times its usual latency) before it is held out as stalled; unset means never.
	// +optional
	StallAfterMillis *int32 `json:"stallAfterMillis,omitempty"`

	// retryOnCodes are the broker response codes retried on another broker.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	RetryOnCodes []int32 `json:"retryOnCodes,omitempty"`

	// probe says whether isolated brokers are probed and return only on proof.
	// +required
	Probe bool `json:"probe"`

	// probeRoutedBrokers says whether brokers that are not isolated are probed too, so silent
	// ones are isolated without traffic.
	// +optional
	ProbeRoutedBrokers bool `json:"probeRoutedBrokers,omitempty"`

	// probationProbes is how many good probes in a row readmit a broker isolated for silence or a
	// slow answer, or whose isolation repeated (with probing; 1 otherwise).
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProbationProbes int32 `json:"probationProbes,omitempty"`

	// pressure holds the thresholds brokers' own figures are judged by, when they are polled.
	// +optional
	Pressure *EffectivePressure `json:"pressure,omitempty"`

	// isolationGrowth says whether isolation grows on repeated failure episodes.
	// +required
	IsolationGrowth IsolationGrowth `json:"isolationGrowth"`

	// podHealth says whether unhealthy broker pods are avoided.
	// +required
	PodHealth PodHealthMode `json:"podHealth"`

	// maxIsolatedPercent is the isolation limit, the share of brokers isolated at once; unset
	// means no limit.
	// +optional
	MaxIsolatedPercent *int32 `json:"maxIsolatedPercent,omitempty"`

	// hedge is the hedging in force; unset means sends are not hedged.
	// +optional
	Hedge *EffectiveHedge `json:"hedge,omitempty"`
}

// EffectiveHedge is the hedging in force.
type EffectiveHedge struct {
	// budgetPercent is the most extra sends hedges add, as a share of sends.
	// +required
	BudgetPercent int32 `json:"budgetPercent"`
}

// EffectivePressure is the pressure polling in force; a threshold of 0 judges nothing.
type EffectivePressure struct {
	// sendQueueFillPercent is the send queue's share of its capacity that counts as pressure.
	// +required
	SendQueueFillPercent int32 `json:"sendQueueFillPercent"`
	// sendQueueHeadWaitMillis is the wait of the oldest queued send that counts as pressure.
	// +required
	SendQueueHeadWaitMillis int32 `json:"sendQueueHeadWaitMillis"`
	// pageCacheLockMillis is the page-cache lock time that counts as pressure.
	// +required
	PageCacheLockMillis int32 `json:"pageCacheLockMillis"`
	// putLatency99Millis is the put latency p99 that counts as pressure.
	// +required
	PutLatency99Millis int32 `json:"putLatency99Millis"`
}

// FaultPolicyStatus is what the operator observed of a FaultPolicy.
type FaultPolicyStatus struct {
	// conditions hold Ready, which says whether the policy is in force.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// brokers is the number of brokers governed by this policy, over all topics using it.
	// +optional
	Brokers int32 `json:"brokers,omitempty"`

	// isolated is the number of brokers isolated now.
	// +optional
	Isolated int32 `json:"isolated,omitempty"`

	// replicas is the number of manager replicas whose views (ReplicaViews) were merged into
	// this status, the writer's own included; 0 when replicas do not share views.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// behavior names the behaviour in force: the preset, followed by +x for each extension turned
	// on beyond it, -x for each turned off, and ~x where numbers differ from it (x: table, retry,
	// probing, growth, podHealth, isolationCap, perAttemptCap, hedge; isolationCap is the isolation
	// limit, perAttemptCap the per-attempt deadline). For example RocketMQ5, RocketMQ5+probing,
	// Detour-growth~table. When the spec cannot be applied it is the behaviour
	// still in force, that of the last valid spec or of the runtime's default policy.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Behavior string `json:"behavior,omitempty"`

	// effective spells out the behaviour in force, every default resolved.
	// +optional
	Effective *EffectiveFaultPolicy `json:"effective,omitempty"`

	// isolatedBrokers lists the brokers isolated now, why and until when, one entry per broker:
	// brokers of different Clusters, and a broker found by its pod, may share a name, so entries
	// are keyed by cluster and brokerName together. With more than 1024, the first 1024 by
	// identity (isolated counts them all, and the Ready condition says the list was cut).
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +listMapKey=brokerName
	// +kubebuilder:validation:MaxItems=1024
	IsolatedBrokers []IsolatedBroker `json:"isolatedBrokers,omitempty"`
}

// FaultPolicy declares how RocketMQ producers isolate slow and failing brokers: a latency
// threshold table, retries, probes and limits. Topics reference it by name; its status lists the
// brokers isolated now.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fp;fpol,categories=detour
// +kubebuilder:printcolumn:name="Behavior",type=string,JSONPath=`.status.behavior`
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.brokers`
// +kubebuilder:printcolumn:name="Isolated",type=integer,JSONPath=`.status.isolated`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FaultPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired fault policy.
	// +optional
	Spec FaultPolicySpec `json:"spec,omitempty"`

	// status is the observed state of the policy.
	// +optional
	Status FaultPolicyStatus `json:"status,omitempty"`
}

// FaultPolicyList is a list of FaultPolicy.
//
// +kubebuilder:object:root=true
type FaultPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FaultPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FaultPolicy{}, &FaultPolicyList{})
}
