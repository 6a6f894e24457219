package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterSpec points at an existing RocketMQ cluster through its name servers.
// +kubebuilder:validation:XValidation:rule="!has(self.undeclaredTopics) || self.undeclaredTopics != 'Serve' || has(self.faultPolicyRef)",message="undeclaredTopics: Serve needs a faultPolicyRef: the FaultPolicy that governs the topics no Topic declares"
type ClusterSpec struct {
	// nameServers are the cluster's name servers as host:port, the namesrvAddr RocketMQ clients
	// are given (a Service's DNS name works). They are asked in turn, starting with the one that
	// answered last.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?:[0-9]{1,5}$`
	// +kubebuilder:validation:XValidation:rule="self.all(a, int(a.split(':')[1]) >= 1 && int(a.split(':')[1]) <= 65535)",message="nameServers must be host:port with a port from 1 to 65535"
	NameServers []string `json:"nameServers"`

	// brokerSelector picks the cluster's broker pods in this namespace, for pod health: a broker
	// whose pod is not Ready or is terminating is avoided before sends to it fail. Pods are
	// matched to the brokers the name servers publish by broker name. Unset means brokers are
	// routed on fault data alone.
	// +optional
	BrokerSelector *metav1.LabelSelector `json:"brokerSelector,omitempty"`

	// routeRefreshSeconds is how often topic routes are asked from the name servers, as RocketMQ
	// clients do every 30 s (pollNameServerInterval). Drains, removed brokers and master moves take
	// effect within one refresh.
	// +optional
	// +default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	RouteRefreshSeconds int32 `json:"routeRefreshSeconds,omitempty"`

	// faultPolicyRef names a FaultPolicy in this namespace that governs every topic the cluster
	// publishes, without a Topic per topic: the name-server facade publishes the brokers it
	// isolates, and those whose pods are not Ready or are terminating, read-only in every topic's
	// route, and (unless its probe.routedBrokers is false) its probes watch every broker the
	// cluster lists. A Topic on the cluster with a faultPolicyRef of its own governs its topic
	// instead. The policy counts the Cluster as a user: deleting it waits until no Cluster or
	// Topic names it, and while it does not exist the Cluster is not Ready (FaultPolicyNotFound).
	// +optional
	FaultPolicyRef *FaultPolicyReference `json:"faultPolicyRef,omitempty"`

	// facade asks for a name-server facade of this Cluster's own: every manager replica serves
	// RocketMQ's name-server protocol for this Cluster alone on its port, and the operator keeps a
	// Service for it when it knows its pods' labels (--cluster-facade-service-selector). Clients
	// given that address as namesrvAddr see only this Cluster's brokers.
	// +optional
	Facade *ClusterFacade `json:"facade,omitempty"`

	// credentialsSecretRef names a Secret in this namespace holding the RocketMQ ACL 2.0 user
	// detour sends as: keys accessKey and secretKey, and optionally securityToken. Every request
	// detour sends to the cluster's brokers (sends, heartbeats, probes, pressure polls, topic
	// creation) is signed with it; requests detour forwards for clients are never signed. The
	// user needs PUB and GET on the topics detour serves, and CREATE where a Topic has create:
	// true. Unset sends unsigned requests, which a broker with authentication on refuses.
	// +optional
	CredentialsSecretRef *CredentialsSecretReference `json:"credentialsSecretRef,omitempty"`

	// undeclaredTopics says whether detour's gRPC endpoint and send gateway serve the topics of
	// this cluster that no Topic declares, as RocketMQ Proxy serves every topic of its cluster.
	// Refuse (the default) serves declared Topics only: upgrading detour opens no topic nobody
	// asked it to, and a Cluster shared by teams that each declare their own topics stays so.
	// Serve serves every topic the name servers publish, under faultPolicyRef (required then):
	// a route is asked for when a client first names the topic, refreshed while it is used and
	// let go after five minutes unused, and a topic the name servers do not know is answered as
	// RocketMQ Proxy answers it. A Topic declaring the same topic still wins with its own
	// faultPolicyRef. Sending to an undeclared topic through the gateway needs verb create on
	// clusters/messages of this Cluster. status.undeclaredTopics shows the topics in use.
	// +optional
	UndeclaredTopics UndeclaredTopicsPolicy `json:"undeclaredTopics,omitempty"`

	// proxy is the cluster's RocketMQ Proxy (5.x). detour's gRPC endpoint serves producers
	// itself and forwards consumers' calls on the cluster's topics (assignments, receives, acks,
	// offsets, their Telemetry streams) to it unchanged, each client to one Proxy. Unset answers
	// consumers' calls UNSUPPORTED.
	// +optional
	Proxy *ClusterProxy `json:"proxy,omitempty"`
}

// UndeclaredTopicsPolicy says whether a Cluster's topics that no Topic declares are served.
// +kubebuilder:validation:Enum=Refuse;Serve
type UndeclaredTopicsPolicy string

const (
	// UndeclaredTopicsRefuse serves declared Topics only.
	UndeclaredTopicsRefuse UndeclaredTopicsPolicy = "Refuse"
	// UndeclaredTopicsServe serves every topic the Cluster's name servers publish.
	UndeclaredTopicsServe UndeclaredTopicsPolicy = "Serve"
)

// ClusterProxy is where a cluster's RocketMQ Proxy serves gRPC, and how to reach it.
type ClusterProxy struct {
	// address is the Proxy's gRPC endpoint as host:port (its grpcServerPort, 8081 by default);
	// a Service's DNS name works.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?:[0-9]{1,5}$`
	// +kubebuilder:validation:XValidation:rule="int(self.split(':')[1]) >= 1 && int(self.split(':')[1]) <= 65535",message="address must be host:port with a port from 1 to 65535"
	Address string `json:"address"`

	// tls makes the connection to the Proxy TLS. Unset connects in plaintext, which the Proxy
	// serves on the same port as TLS.
	// +optional
	TLS *ClusterProxyTLS `json:"tls,omitempty"`
}

// ClusterProxyTLS is how the Proxy's certificate is checked. With neither caBundle nor
// insecureSkipVerify, it must chain to the manager's system roots.
// +kubebuilder:validation:XValidation:rule="!(has(self.caBundle) && has(self.insecureSkipVerify) && self.insecureSkipVerify)",message="caBundle and insecureSkipVerify: true must not both be set: a CA is only checked when verification is on"
type ClusterProxyTLS struct {
	// caBundle is the PEM bundle of the CA(s) the Proxy's certificate must chain to.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	CABundle []byte `json:"caBundle,omitempty"`

	// serverName is the name the Proxy's certificate must carry; empty means the host of address.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?$`
	ServerName string `json:"serverName,omitempty"`

	// insecureSkipVerify accepts any certificate the Proxy presents: the connection is encrypted
	// but the Proxy is not authenticated. The Proxy's own certificate is self-signed by default
	// (tlsTestModeEnable), so without its CA this is the only way to speak TLS to it.
	// +optional
	InsecureSkipVerify *bool `json:"insecureSkipVerify,omitempty"`
}

// CredentialsSecretReference names a Secret, in the referring object's namespace, with keys
// accessKey, secretKey and optionally securityToken.
type CredentialsSecretReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ConditionCredentialsAccepted says whether the brokers accept detour's credentials: False with
// reason ReasonAuthenticationFailed or ReasonForbidden and the broker's remark when one refused
// them, or with ReasonCredentialsUnreadable when the Secret cannot be used.
const ConditionCredentialsAccepted = "CredentialsAccepted"

const (
	// ReasonAuthenticationFailed: a broker did not accept who detour's requests are from (no
	// credentials, unknown or disabled user, wrong secret).
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonForbidden: a broker knows the user but refused it a permission (PUB, GET, CREATE).
	ReasonForbidden = "Forbidden"
	// ReasonCredentialsUnreadable: the credentials Secret is missing or lacks a key.
	ReasonCredentialsUnreadable = "CredentialsUnreadable"
	// ReasonAccepted: no broker refused the credentials.
	ReasonAccepted = "Accepted"
)

// ClusterFacade is a Cluster's own name-server facade.
type ClusterFacade struct {
	// port is the TCP port the facade is served on, on every manager replica; two Clusters must
	// not share one.
	// +required
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// ClusterBroker is one broker group the name servers publish.
type ClusterBroker struct {
	// name is the RocketMQ broker name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// cluster is the brokerClusterName the broker registered with.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// masterAddress is the master's (brokerId 0) host:port as the broker registered it; empty
	// when the group has no master.
	// +optional
	// +kubebuilder:validation:MaxLength=261
	MasterAddress string `json:"masterAddress,omitempty"`

	// pod is the broker's master pod, when brokerSelector matches one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// ready is false when the matched pod is not Ready or is terminating; brokers without a
	// matched pod count as ready.
	// +required
	Ready bool `json:"ready"`

	// writable is whether the name servers publish the broker writable: false after
	// `mqadmin wipeWritePerm` or with brokerPermission 4 (read only).
	// +required
	Writable bool `json:"writable"`

	// hidden says why the name-server facade publishes the broker read-only in the routes of
	// topics the cluster's policy governs (set with faultPolicyRef only); unset while it is
	// published as the name servers publish it.
	// +optional
	Hidden IsolationReason `json:"hidden,omitempty"`
}

// ClusterStatus is what the name servers publish of the cluster.
type ClusterStatus struct {
	// conditions hold Ready, which says whether a name server answered and the faultPolicyRef,
	// if any, names a FaultPolicy that exists.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// nameServer is the name server that answered last.
	// +optional
	// +kubebuilder:validation:MaxLength=261
	NameServer string `json:"nameServer,omitempty"`

	// brokers are the broker groups the name servers publish, by name; with more than 1024, the
	// first 1024 by name (brokerCount has them all and the Ready condition says so).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Brokers []ClusterBroker `json:"brokers,omitempty"`

	// brokerCount is the number of broker groups published, also those beyond the 1024 that
	// brokers lists.
	// +optional
	BrokerCount int32 `json:"brokerCount,omitempty"`

	// writableBrokers is the number of published brokers with a master that take writes.
	// +optional
	WritableBrokers int32 `json:"writableBrokers,omitempty"`

	// hiddenBrokers is the number of brokers the cluster's faultPolicyRef hides (see
	// brokers[].hidden).
	// +optional
	HiddenBrokers int32 `json:"hiddenBrokers,omitempty"`

	// undeclaredTopics is what the leader's gRPC endpoint and gateway serve of the topics no
	// Topic declares (spec.undeclaredTopics: Serve); each replica keeps routes for what its own
	// clients use, so another replica may hold other topics.
	// +optional
	UndeclaredTopics *UndeclaredTopicsStatus `json:"undeclaredTopics,omitempty"`
}

// UndeclaredTopicsStatus is what is served of a Cluster's undeclared topics.
type UndeclaredTopicsStatus struct {
	// inUse is how many undeclared topics have a route kept now: named by a client within the
	// last five minutes.
	// +required
	// +kubebuilder:validation:Minimum=0
	InUse *int32 `json:"inUse,omitempty"`

	// refused are undeclared topics whose last request was refused (recently: a refusal is
	// remembered for seconds), at most 16 of them by name.
	// +optional
	// +listType=map
	// +listMapKey=topic
	// +kubebuilder:validation:MaxItems=16
	Refused []RefusedTopic `json:"refused,omitempty"`

	// refusedCount is how many undeclared topics are refused now, also those beyond the 16
	// listed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RefusedCount int32 `json:"refusedCount,omitempty"`
}

// RefusedTopic is an undeclared topic a request named that was refused, and why.
type RefusedTopic struct {
	// topic is the RocketMQ topic named.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=127
	Topic string `json:"topic"`

	// reason is TopicNotPublished (the name servers do not know it) or NameServersUnreachable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// message says more.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// Cluster is an existing RocketMQ cluster, reached through its name servers. Topics that reference
// it route as RocketMQ clients do: from the routes its name servers publish.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rmqcluster,categories=detour
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.brokerCount`
// +kubebuilder:printcolumn:name="Writable",type=integer,JSONPath=`.status.writableBrokers`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.faultPolicyRef.name`
// +kubebuilder:printcolumn:name="Hidden",type=integer,JSONPath=`.status.hiddenBrokers`
// +kubebuilder:printcolumn:name="Undeclared",type=integer,JSONPath=`.status.undeclaredTopics.inUse`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Cluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is how to reach the cluster.
	// +required
	Spec ClusterSpec `json:"spec"`

	// status is what its name servers publish.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterList is a list of Cluster.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Cluster{}, &ClusterList{})
}
