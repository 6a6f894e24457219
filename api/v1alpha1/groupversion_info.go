// Package v1alpha1 holds the routing.detour.dev/v1alpha1 API: Topic, which declares a RocketMQ
// topic on a set of broker pods, and FaultPolicy, which declares how producers isolate slow and
// failing brokers and reports which brokers are isolated.
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
