package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxReplicaIsolations bounds the isolations one ReplicaView lists, so the object stays well
// under the API server's size limit.
const MaxReplicaIsolations = 2048

// ReplicaViewSpec is what one manager replica learnt itself: the brokers its own sends and
// probes isolate now. Every replica merges every live replica's view into its runtime.
type ReplicaViewSpec struct {
	// replica names the manager replica that writes this view (its pod's name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica"`

	// renewTime is when the replica last wrote this view.
	// +required
	RenewTime metav1.MicroTime `json:"renewTime"`

	// leaseDurationSeconds is how long after renewTime the view stands: a replica that stops
	// writing (it died, or lost the API server) has its isolations end then, or at their until,
	// whichever comes first.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds"`

	// isolated counts the brokers the replica isolates, over all policies; isolations lists the
	// first 2048 by policy and broker name.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Isolated int32 `json:"isolated,omitempty"`

	// isolations are the brokers the replica's own measurements isolate now, by FaultPolicy. A
	// broker leaves the list when the replica readmits it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2048
	Isolations []ReplicaIsolation `json:"isolations,omitempty"`
}

// ReplicaIsolation is one broker a replica isolates under one FaultPolicy.
type ReplicaIsolation struct {
	// faultPolicy is the FaultPolicy, as namespace/name.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`
	FaultPolicy string `json:"faultPolicy"`

	// brokerName is the RocketMQ broker name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	BrokerName string `json:"brokerName"`

	// cluster is the Cluster whose name servers publish the broker; unset for a broker found by
	// its pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// reason says why the replica isolates the broker.
	// +required
	Reason IsolationReason `json:"reason"`

	// latencyMillis is the latency of the replica's last send or probe to the broker.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LatencyMillis int64 `json:"latencyMillis,omitempty"`

	// since is when the replica isolated the broker.
	// +required
	Since metav1.Time `json:"since"`

	// until is when the isolation ends unless extended; unset while it waits for an event (a
	// probe's proof, the pod Ready again).
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}

// ReplicaView is one manager replica's own view of the brokers it isolates, written by that
// replica at most once a second and renewed while it runs. Replicas share what they learn through
// these objects: a broker any live replica isolates is avoided by every replica, its facade and
// its gateway.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=rv,categories=detour
// +kubebuilder:printcolumn:name="Replica",type=string,JSONPath=`.spec.replica`
// +kubebuilder:printcolumn:name="Isolated",type=integer,JSONPath=`.spec.isolated`
// +kubebuilder:printcolumn:name="Renewed",type=date,JSONPath=`.spec.renewTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReplicaView struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the replica's view, written by the replica itself.
	// +required
	Spec ReplicaViewSpec `json:"spec"`
}

// ReplicaViewList is a list of ReplicaView.
//
// +kubebuilder:object:root=true
type ReplicaViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReplicaView `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ReplicaView{}, &ReplicaViewList{})
}
