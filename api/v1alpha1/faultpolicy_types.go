package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FaultPreset names a built-in threshold table.
// +kubebuilder:validation:Enum=RocketMQ5;RocketMQ4
type FaultPreset string

const (
	// PresetRocketMQ5 is RocketMQ 5.x's table: latency 50, 100, 550, 1800, 3000, 5000, 15000 ms
	// isolate for 0, 0, 2000, 5000, 6000, 10000, 30000 ms; a failed send counts as 10000 ms.
	PresetRocketMQ5 FaultPreset = "RocketMQ5"
	// PresetRocketMQ4 is RocketMQ 4.x's table: latency 50, 100, 550, 1000, 2000, 3000, 15000 ms
	// isolate for 0, 0, 30000, 60000, 120000, 180000, 600000 ms; a failed send counts as 30000 ms.
	PresetRocketMQ4 FaultPreset = "RocketMQ4"
)

// PodHealthMode says whether broker pod readiness takes part in isolation.
// +kubebuilder:validation:Enum=Respect;Ignore
type PodHealthMode string

const (
	// PodHealthRespect keeps producers away from brokers whose pod is not Ready or is terminating,
	// while any healthy broker remains.
	PodHealthRespect PodHealthMode = "Respect"
	// PodHealthIgnore routes by measured sends alone, as a RocketMQ producer does.
	PodHealthIgnore PodHealthMode = "Ignore"
)

// IsolationGrowth says how isolation lengthens while a broker keeps failing.
// +kubebuilder:validation:Enum=None;Exponential
type IsolationGrowth string

const (
	// IsolationGrowthNone isolates for the table's duration every time, as RocketMQ does.
	IsolationGrowthNone IsolationGrowth = "None"
	// IsolationGrowthExponential doubles the isolation for each consecutive failure, up to eight
	// times the table's duration; a successful send resets it.
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

// RetryPolicy bounds how a synchronous send retries.
// +kubebuilder:validation:XValidation:rule="!has(self.perAttemptTimeoutMillis) || !has(self.sendTimeoutMillis) || self.perAttemptTimeoutMillis <= self.sendTimeoutMillis",message="perAttemptTimeoutMillis must not exceed sendTimeoutMillis"
type RetryPolicy struct {
	// attempts is the number of attempts a synchronous send makes, the first included
	// (RocketMQ's 1 + retryTimesWhenSendFailed).
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Attempts int32 `json:"attempts,omitempty"`

	// sendTimeoutMillis is the overall deadline of one send, all attempts together.
	// +optional
	// +kubebuilder:default=3000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	SendTimeoutMillis int32 `json:"sendTimeoutMillis,omitempty"`

	// perAttemptTimeoutMillis caps every attempt but the last, so one hung broker cannot use up
	// the whole send timeout. Unset means no cap, as in RocketMQ before 5.3.3.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600000
	PerAttemptTimeoutMillis *int32 `json:"perAttemptTimeoutMillis,omitempty"`

	// retryOnCodes are the broker response codes that are retried on another broker. Unset means
	// RocketMQ 5.x's set: 1, 2, 14, 16, 17, 204, 205 and 1500.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=32767
	RetryOnCodes []int32 `json:"retryOnCodes,omitempty"`

	// retryAnotherBrokerWhenNotStoreOK retries a send whose broker stored the message but reported
	// a flush or replication timeout.
	// +optional
	RetryAnotherBrokerWhenNotStoreOK *bool `json:"retryAnotherBrokerWhenNotStoreOK,omitempty"`
}

// ProbePolicy configures the probes sent to isolated brokers.
// +kubebuilder:validation:XValidation:rule="!has(self.timeoutMillis) || !has(self.intervalMillis) || self.timeoutMillis < self.intervalMillis",message="timeoutMillis must be less than intervalMillis"
type ProbePolicy struct {
	// enabled turns probing on. With probing, a broker leaves isolation only after a probe
	// (GET_MAX_OFFSET) succeeds, and a failed probe keeps it out.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// intervalMillis is the time between two probes of one isolated broker.
	// +optional
	// +kubebuilder:default=2000
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=600000
	IntervalMillis int32 `json:"intervalMillis,omitempty"`

	// timeoutMillis is how long a probe waits for the broker's answer.
	// +optional
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	TimeoutMillis int32 `json:"timeoutMillis,omitempty"`
}

// FaultPolicySpec declares how producers isolate slow and failing brokers.
// +kubebuilder:validation:XValidation:rule="!has(self.rules) || size(self.rules) == 0 || !has(self.preset)",message="set either rules or preset, not both"
type FaultPolicySpec struct {
	// preset is the built-in threshold table used when rules is empty. Defaults to RocketMQ5.
	// +optional
	Preset FaultPreset `json:"preset,omitempty"`

	// rules is a custom threshold table: latencyMillis strictly increasing, isolationMillis
	// non-decreasing. A send's latency is matched against the highest latencyMillis it reaches.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.exists_one(s, s.latencyMillis == r.latencyMillis)) && self.map(r, r.latencyMillis).isSorted()",message="rules must be strictly increasing in latencyMillis"
	// +kubebuilder:validation:XValidation:rule="self.map(r, r.isolationMillis).isSorted()",message="rules must be non-decreasing in isolationMillis"
	Rules []FaultRule `json:"rules,omitempty"`

	// failureLatencyMillis is the latency a failed send counts as when it is matched against the
	// table. Defaults to the preset's (10000 for RocketMQ5, 30000 for RocketMQ4).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600000
	FailureLatencyMillis *int64 `json:"failureLatencyMillis,omitempty"`

	// retry bounds how a synchronous send retries.
	// +optional
	// +kubebuilder:default={}
	Retry RetryPolicy `json:"retry,omitzero"`

	// probe configures probes of isolated brokers.
	// +optional
	// +kubebuilder:default={}
	Probe ProbePolicy `json:"probe,omitzero"`

	// maxIsolatedPercent is the largest share of a policy's brokers isolated at once; at least one
	// broker always stays selectable. Unset means no cap beyond that one broker.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxIsolatedPercent *int32 `json:"maxIsolatedPercent,omitempty"`

	// podHealth says whether broker pods that are not Ready or are terminating are avoided.
	// +optional
	// +kubebuilder:default=Respect
	PodHealth PodHealthMode `json:"podHealth,omitempty"`

	// isolationGrowth says how isolation lengthens while a broker keeps failing.
	// +optional
	// +kubebuilder:default=Exponential
	IsolationGrowth IsolationGrowth `json:"isolationGrowth,omitempty"`
}

// IsolatedBroker is one broker a FaultPolicy keeps producers away from.
type IsolatedBroker struct {
	// brokerName is the RocketMQ broker name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	BrokerName string `json:"brokerName"`

	// pod is the name of the broker's master pod, when known.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// reason says why the broker is isolated.
	// +required
	Reason IsolationReason `json:"reason"`

	// latencyMillis is the latency of the send that isolated the broker (the failure latency for
	// failed sends).
	// +optional
	// +kubebuilder:validation:Minimum=0
	LatencyMillis int64 `json:"latencyMillis,omitempty"`

	// since is when the broker entered isolation.
	// +required
	Since metav1.Time `json:"since"`

	// until is when the isolation ends unless extended. Unset for isolations that end on an
	// event (pod Ready again, probe success) rather than at a time.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`

	// reachable is false once the broker failed to answer; with probing, it becomes true only
	// after a probe succeeds.
	// +required
	Reachable bool `json:"reachable"`
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

	// isolatedBrokers lists the brokers isolated now, why and until when.
	// +optional
	// +listType=map
	// +listMapKey=brokerName
	// +kubebuilder:validation:MaxItems=1024
	IsolatedBrokers []IsolatedBroker `json:"isolatedBrokers,omitempty"`
}

// FaultPolicy declares how RocketMQ producers isolate slow and failing brokers: a latency
// threshold table, retries, probes and caps. Topics reference it by name; its status lists the
// brokers isolated now.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fp;fpol,categories=detour
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.brokers`
// +kubebuilder:printcolumn:name="Isolated",type=integer,JSONPath=`.status.isolated`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FaultPolicy struct {
	metav1.TypeMeta   `json:",inline"`
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
