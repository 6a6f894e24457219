package operator

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// knownKindsFirst maps the kinds the operator watches (Pods and its own) without asking the API
// server, and everything else as the dynamic mapper does. Building the pod cache needs to know
// whether Pods are namespaced, and a replica must be buildable while the API server is
// unreachable: it then waits, not ready, instead of failing.
type knownKindsFirst struct {
	known *meta.DefaultRESTMapper
	meta.RESTMapper
}

func newKnownKindsFirst(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	known := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion, routingv1alpha1.GroupVersion})
	known.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	for _, kind := range []string{"Topic", "FaultPolicy", "Cluster", "ReplicaView"} {
		known.Add(routingv1alpha1.GroupVersion.WithKind(kind), meta.RESTScopeNamespace)
	}
	return knownKindsFirst{known: known, RESTMapper: dynamic}, nil
}

// RESTMapping implements meta.RESTMapper.
func (m knownKindsFirst) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if mapping, err := m.known.RESTMapping(gk, versions...); err == nil {
		return mapping, nil
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// RESTMappings implements meta.RESTMapper.
func (m knownKindsFirst) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	if mappings, err := m.known.RESTMappings(gk, versions...); err == nil && len(mappings) > 0 {
		return mappings, nil
	}
	return m.RESTMapper.RESTMappings(gk, versions...)
}
