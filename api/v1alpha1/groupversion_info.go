// Package v1alpha1 holds the routing.detour.dev/v1alpha1 API: Cluster, which points at an
// existing RocketMQ cluster through its name servers; Topic, which declares a RocketMQ topic on a
// Cluster or on a set of broker pods; FaultPolicy, which declares how producers isolate slow and
// failing brokers and reports which brokers are isolated; and ReplicaView, in which each manager
// replica publishes the isolations it learnt itself, for the others to merge.
//
// +kubebuilder:object:generate=true
// +groupName=routing.detour.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "routing.detour.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
