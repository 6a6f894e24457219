package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FaultPolicyReference names a FaultPolicy in the Topic's namespace.
type FaultPolicyReference struct {
	// name is the FaultPolicy's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ClusterReference names a Cluster in the Topic's namespace.
type ClusterReference struct {
	// name is the Cluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// TopicSpec declares a RocketMQ topic: on an existing cluster whose name servers publish its route
// (clusterRef), or on the master broker pods a selector picks (brokerSelector), for clusters
// without reachable name servers.
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) != has(self.brokerSelector)",message="set exactly one of clusterRef and brokerSelector"
// +kubebuilder:validation:XValidation:rule="has(self.clusterRef) == has(oldSelf.clusterRef)",message="a Topic cannot move between clusterRef and brokerSelector; create a new Topic"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsSecretRef) || has(self.brokerSelector)",message="credentialsSecretRef is for Topics with brokerSelector; a Topic on a Cluster uses the Cluster's credentialsSecretRef"
type TopicSpec struct {
	// topicName is the RocketMQ topic: at most 127 characters from [%|a-zA-Z0-9_-], not one of
	// RocketMQ's system topics. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:Pattern=`^[%|a-zA-Z0-9_-]+$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['TBW102', 'SCHEDULE_TOPIC_XXXX', 'BenchmarkTest', 'RMQ_SYS_TRANS_HALF_TOPIC', 'RMQ_SYS_TRACE_TOPIC', 'RMQ_SYS_TRANS_OP_HALF_TOPIC', 'TRANS_CHECK_MAX_TIME_TOPIC', 'SELF_TEST_TOPIC', 'OFFSET_MOVED_EVENT', 'CHECKPOINT_TOPIC']) && !self.startsWith('rmq_sys_')",message="topicName must not be a RocketMQ system topic"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="topicName is immutable"
	TopicName string `json:"topicName"`

	// clusterRef names the Cluster whose name servers publish the topic's route. Sends go to the
	// writable queues of the masters the route lists, as a RocketMQ client's would.
	// +optional
	ClusterRef *ClusterReference `json:"clusterRef,omitempty"`

	// brokerSelector picks the broker pods, in the Topic's namespace, that serve the topic, with
	// writeQueueNums queues on each. Only master pods receive sends.
	// +optional
	BrokerSelector *metav1.LabelSelector `json:"brokerSelector,omitempty"`

	// create asks the operator to create (or update) the topic on every master with
	// UPDATE_AND_CREATE_TOPIC, with the queue counts and perm below; on a cluster it never lowers
	// the queue counts a broker already publishes. Defaults to true with brokerSelector (the spec
	// is then the only source of the route) and false with clusterRef (the cluster's own topic
	// configuration is kept).
	// +optional
	Create *bool `json:"create,omitempty"`

	// writeQueueNums is the number of write queues on each broker (with clusterRef, what create
	// asks for; the route itself comes from the name servers).
	// +optional
	// +default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	WriteQueueNums int32 `json:"writeQueueNums,omitempty"`

	// readQueueNums is the number of read queues on each broker.
	// +optional
	// +default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	ReadQueueNums int32 `json:"readQueueNums,omitempty"`

	// perm is RocketMQ's permission bits for the topic: 6 read and write, 4 read only, 2 write
	// only. Producers send only to writable topics.
	// +optional
	// +default=6
	// +kubebuilder:validation:Enum=2;4;6
	Perm int32 `json:"perm,omitempty"`

	// messageType is the type of message the topic takes, RocketMQ 5's message.type topic
	// attribute, which create sets on each broker: Normal, FIFO, Delay, Transaction, or Mixed (every
	// type; a 5.x broker creates such a topic only with enableMixedMessageType=true). RocketMQ 5's
	// Proxy and detour's gRPC endpoint refuse a message of another type (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
	// as the RocketMQ 5 SDKs do before sending. Unset creates the topic without the attribute, which
	// RocketMQ 5 treats as Normal; 4.x brokers ignore it.
	// +optional
	MessageType TopicMessageType `json:"messageType,omitempty"`

	// faultPolicyRef names the FaultPolicy whose fault table governs sends to this topic. Unset
	// (or naming a FaultPolicy that does not exist) means the runtime's default policy, which is
	// the Detour preset with every default: not RocketMQ's default, which isolates nothing.
	// +optional
	FaultPolicyRef *FaultPolicyReference `json:"faultPolicyRef,omitempty"`

	// credentialsSecretRef names, with brokerSelector, a Secret in this namespace holding the
	// RocketMQ ACL 2.0 user detour sends to the selected brokers as (keys accessKey, secretKey,
	// optional securityToken), as Cluster.spec.credentialsSecretRef does for a Cluster. Broker
	// pods of one namespace are one set of brokers to detour, so Topics of a namespace that name
	// different Secrets are signed with the first by Topic name.
	// +optional
	CredentialsSecretRef *CredentialsSecretReference `json:"credentialsSecretRef,omitempty"`
}

// TopicMessageType is the type of message a topic takes (RocketMQ 5's message.type attribute).
// +kubebuilder:validation:Enum=Normal;FIFO;Delay;Transaction;Mixed
type TopicMessageType string

// Message types of a topic.
const (
	// TopicMessageNormal takes normal messages only.
	TopicMessageNormal TopicMessageType = "Normal"
	// TopicMessageFIFO takes messages of a message group, stored in order.
	TopicMessageFIFO TopicMessageType = "FIFO"
	// TopicMessageDelay takes messages with a delivery time.
	TopicMessageDelay TopicMessageType = "Delay"
	// TopicMessageTransaction takes transactional messages.
	TopicMessageTransaction TopicMessageType = "Transaction"
	// TopicMessageMixed takes messages of every type.
	TopicMessageMixed TopicMessageType = "Mixed"
)

// TopicBroker is one master broker serving the topic.
type TopicBroker struct {
	// name is the RocketMQ broker name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// pod is the name of the broker's master pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// address is the broker's host:port: from the name servers with clusterRef, else from the pod
	// IP and its container port named "main".
	// +optional
	// +kubebuilder:validation:MaxLength=261
	Address string `json:"address,omitempty"`

	// ready is whether the pod is Ready and not terminating.
	// +required
	Ready bool `json:"ready"`

	// writeQueues is the number of write queues the topic has on this broker (with clusterRef, as
	// the name servers publish it).
	// +optional
	WriteQueues int32 `json:"writeQueues,omitempty"`

	// readQueues is the number of read queues the name servers publish (clusterRef only).
	// +optional
	ReadQueues int32 `json:"readQueues,omitempty"`

	// perm is the topic's permission bits on this broker as the name servers publish them
	// (clusterRef only): without bit 2 (write) the broker gets no sends.
	// +optional
	Perm int32 `json:"perm,omitempty"`

	// isolated is whether the topic's fault policy isolates this broker now.
	// +required
	Isolated bool `json:"isolated"`
}

// TopicStatus is what the operator observed of a Topic.
type TopicStatus struct {
	// conditions hold Ready, which says whether the topic is routed and created on its brokers.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// brokers are the master brokers serving the topic, by name; with more than 1024, the first
	// 1024 by name (brokerCount counts every broker of the route, and the Ready condition says
	// the list was cut).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Brokers []TopicBroker `json:"brokers,omitempty"`

	// brokerCount is the number of master brokers in the route.
	// +optional
	BrokerCount int32 `json:"brokerCount,omitempty"`

	// writableQueues is the number of write queues over all brokers in the route.
	// +optional
	WritableQueues int32 `json:"writableQueues,omitempty"`

	// availableQueues is the number of write queues on brokers that are ready and not isolated.
	// +optional
	AvailableQueues int32 `json:"availableQueues,omitempty"`
}

// Topic declares a RocketMQ topic served by a set of broker pods and the FaultPolicy that governs
// sends to it. The operator creates the topic on every master broker and routes sends to it
// through the fault-aware producer runtime.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rmqtopic,categories=detour
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.spec.topicName`
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.brokerCount`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableQueues`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Topic struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired topic.
	// +required
	Spec TopicSpec `json:"spec"`

	// status is the observed state of the topic.
	// +optional
	Status TopicStatus `json:"status,omitempty"`
}

// TopicList is a list of Topic.
//
// +kubebuilder:object:root=true
type TopicList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topic `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Topic{}, &TopicList{})
}
