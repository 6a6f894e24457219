package v1alpha1

// ConditionQueuesMatchSpec says whether the queue counts and perm the name servers publish for a
// Topic on a Cluster equal its spec (only for Topics with create).
const ConditionQueuesMatchSpec = "QueuesMatchSpec"

// Reasons of the QueuesMatchSpec condition; it is True with ReasonReconciled.
const (
	// ReasonQueuesDiffer surfaces when a broker publishes read or write queue counts or a perm
	// other than the Topic's spec, which a create does not lower.
	ReasonQueuesDiffer = "QueuesDiffer"
)

// ConditionInUse says whether Topics or Clusters reference a FaultPolicy. While any does,
// deleting the policy waits for them: its table and what it learnt stay in force, as Kubernetes
// holds a PersistentVolumeClaim that pods use.
const ConditionInUse = "InUse"

// Reasons of the InUse condition.
const (
	// ReasonReferencedByTopics surfaces when Topics, and no Cluster, reference the FaultPolicy.
	ReasonReferencedByTopics = "ReferencedByTopics"
	// ReasonReferencedByClusters surfaces when at least one Cluster's faultPolicyRef names the
	// FaultPolicy (Topics may use it too; the message names them all).
	ReasonReferencedByClusters = "ReferencedByClusters"
	// ReasonNotReferenced surfaces when no Topic and no Cluster references the FaultPolicy.
	ReasonNotReferenced = "NotReferenced"
)

// FaultPolicyProtection is the finalizer the operator keeps on every FaultPolicy, so that deleting
// one that Topics or Clusters reference waits until none does.
const FaultPolicyProtection = "routing.detour.dev/policy-protection"

// ConditionReady is the summary condition of every kind. It surfaces whether the object is in
// force in the producer runtime.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonReconciled surfaces when the object is in force in the runtime as specified.
	ReasonReconciled = "Reconciled"
	// ReasonNoBrokers surfaces when a Topic's selector matches no ready master broker pod.
	ReasonNoBrokers = "NoBrokers"
	// ReasonFaultPolicyNotFound surfaces when a Topic or a Cluster references a FaultPolicy that
	// does not exist: a Topic then routes with the runtime's default policy (the Detour preset's),
	// and a Cluster's brokers are neither watched nor hidden under it until it exists.
	ReasonFaultPolicyNotFound = "FaultPolicyNotFound"
	// ReasonTopicCreateFailed surfaces when at least one broker refused UPDATE_AND_CREATE_TOPIC.
	ReasonTopicCreateFailed = "TopicCreateFailed"
	// ReasonClusterNotFound surfaces when a Topic references a Cluster that does not exist.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonNameServersUnreachable surfaces when no name server of a Cluster answered.
	ReasonNameServersUnreachable = "NameServersUnreachable"
	// ReasonTopicNotPublished surfaces when a Cluster's name servers do not publish the topic (it
	// exists on no broker; set create to have the operator create it).
	ReasonTopicNotPublished = "TopicNotPublished"
	// ReasonInvalidSpec surfaces when the runtime refused a spec that the schema accepted.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonRouteRefused surfaces when a Cluster's name servers answered a Topic's route beyond a
	// bound (body size, brokers, queue counts, name lengths); the message names the bound, and
	// the last good route, if any, stays in use.
	ReasonRouteRefused = "RouteRefused"
	// ReasonClusterInfoRefused surfaces when a Cluster's name servers described the cluster
	// beyond a bound (body size, brokers, name lengths); the message names the bound, and the
	// brokers last published stay in status.
	ReasonClusterInfoRefused = "ClusterInfoRefused"
	// ReasonRouteResolving surfaces while the first route query to a Cluster's name servers is
	// under way.
	ReasonRouteResolving = "RouteResolving"
)

// IsolationReason says why a broker is isolated.
// +kubebuilder:validation:Enum=SlowSend;SendFailed;BrokerError;PodNotReady;PodTerminating;ProbeFailed;SlowProbe;BrokerBusy;BrokerPressure;RefusesValidMessages;SendStalled
type IsolationReason string

// Isolation reasons, as written into FaultPolicy status.
const (
	// IsolationSlowSend means a slow answer: a send succeeded but took longer than a threshold of
	// the table.
	IsolationSlowSend IsolationReason = "SlowSend"
	// IsolationSendFailed means a send failed in transport (timeout, refused or reset connection).
	IsolationSendFailed IsolationReason = "SendFailed"
	// IsolationBrokerError means the broker answered a send with an error code.
	IsolationBrokerError IsolationReason = "BrokerError"
	// IsolationPodNotReady means the broker's pod is not Ready.
	IsolationPodNotReady IsolationReason = "PodNotReady"
	// IsolationPodTerminating means the broker's pod is being deleted.
	IsolationPodTerminating IsolationReason = "PodTerminating"
	// IsolationProbeFailed means the isolation ran out but a probe has not yet proved the broker
	// reachable.
	IsolationProbeFailed IsolationReason = "ProbeFailed"
	// IsolationBrokerBusy means the broker refused a send because it is under pressure (its send
	// queue or page cache busy); the send went to another broker (Detour preset).
	IsolationBrokerBusy IsolationReason = "BrokerBusy"
	// IsolationBrokerPressure means the broker's own figures (send queue, page-cache lock, put
	// latency) crossed the policy's pressure thresholds before it refused anything.
	IsolationBrokerPressure IsolationReason = "BrokerPressure"
	// IsolationSlowProbe means a slow answer to a probe, slower than a threshold of the table,
	// and counted as a send of that latency would.
	IsolationSlowProbe IsolationReason = "SlowProbe"
	// IsolationRefusesValidMessages means the broker refused a message as MESSAGE_ILLEGAL that
	// another broker then stored (Detour preset): its store, not the message, is at fault.
	IsolationRefusesValidMessages IsolationReason = "RefusesValidMessages"
	// IsolationSendStalled means a stalled attempt, one that got no answer in time: an attempt to
	// the broker waited far past the broker's usual latency with no answer (stallAfterMillis), or
	// an adaptive attempt deadline cut it (adaptivePerAttempt), before the attempt failed (Detour
	// preset); the broker returns through its probation (probe.probationProbes good probes,
	// spread over as long as its trouble lasted), not with its next answer. A slow answer is
	// SlowSend.
	IsolationSendStalled IsolationReason = "SendStalled"
)
