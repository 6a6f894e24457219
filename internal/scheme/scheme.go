// Package scheme is the scheme the operator's clients and caches use, as kubebuilder's cmd/main.go
// builds it: the built-in kinds of client-go and detour's routing.detour.dev/v1alpha1. It is a
// package of its own so the manager, the demo and the tests share one, and the API package stays
// free of client-go's kinds.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// builder adds the built-in kinds and detour's to a scheme.
var builder = runtime.NewSchemeBuilder(clientgoscheme.AddToScheme, routingv1alpha1.AddToScheme)

// AddToScheme adds the built-in kinds and detour's to s.
func AddToScheme(s *runtime.Scheme) error { return builder.AddToScheme(s) }

// New returns a scheme that knows the built-in kinds and detour's.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
