package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels on the Services of Cluster facades, naming the Cluster they front.
const (
	LabelFacadeClusterNamespace = "routing.detour.dev/cluster-namespace"
	LabelFacadeClusterName      = "routing.detour.dev/cluster-name"
)

// FacadeServiceName names the Service of a Cluster's facade: namesrv-<namespace>-<name>, or, when
// that is no valid Service name (over 63 characters), a prefix of it and a hash of the whole.
func FacadeServiceName(cluster types.NamespacedName) string {
	name := "namesrv-" + cluster.Namespace + "-" + cluster.Name
	if len(name) <= 63 && !strings.Contains(name, ".") {
		return name
	}
	sum := sha256.Sum256([]byte(cluster.String()))
	prefix := strings.TrimRight(strings.ReplaceAll(name[:min(len(name), 46)], ".", "-"), "-")
	return prefix + "-" + hex.EncodeToString(sum[:])[:16]
}

// With --cluster-facade-service-selector the leader keeps a Service per Cluster facade in the
// operator's own namespace, where the pods it selects are; it reads each one it keeps by name and
// lists none, so a Role there grants no list or watch.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=get;create;update;delete,namespace=system

// servicesKept reports whether this replica keeps the facades' Services.
func (f *ClusterFacades) servicesKept() bool {
	return len(f.Options.ServiceSelector) > 0 && f.Client != nil && (f.Leading == nil || f.Leading())
}

// keepService creates or updates the Service of a Cluster's facade: the facade's port on the
// manager's pods.
func (f *ClusterFacades) keepService(ctx context.Context, cluster types.NamespacedName, port int32) error {
	if !f.servicesKept() {
		return nil
	}
	want := f.facadeService(cluster, port)
	var cur corev1.Service
	err := f.APIReader.Get(ctx, client.ObjectKeyFromObject(want), &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := f.Client.Create(ctx, want); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Created the Service of the Cluster's name-server facade", "service", client.ObjectKeyFromObject(want), "port", port)
		return nil
	case err != nil:
		return err
	}
	if maps.Equal(cur.Spec.Selector, want.Spec.Selector) && len(cur.Spec.Ports) == 1 &&
		cur.Spec.Ports[0].Port == port && cur.Spec.Ports[0].TargetPort == want.Spec.Ports[0].TargetPort {
		return nil
	}
	cur.Labels = want.Labels
	cur.Spec.Selector, cur.Spec.Ports = want.Spec.Selector, want.Spec.Ports
	return f.Client.Update(ctx, &cur)
}

// removeService deletes the Service of a Cluster's facade, if there is one.
func (f *ClusterFacades) removeService(ctx context.Context, cluster types.NamespacedName) error {
	if !f.servicesKept() {
		return nil
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: f.Options.ServiceNamespace, Name: FacadeServiceName(cluster)}}
	if err := f.Client.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// facadeService is the Service a Cluster's facade should have.
func (f *ClusterFacades) facadeService(cluster types.NamespacedName, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.Options.ServiceNamespace, Name: FacadeServiceName(cluster),
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": "detour",
				LabelFacadeClusterNamespace:    cluster.Namespace,
				LabelFacadeClusterName:         cluster.Name,
			}},
		Spec: corev1.ServiceSpec{
			Selector: maps.Clone(f.Options.ServiceSelector),
			Ports: []corev1.ServicePort{{Name: "namesrv", Protocol: corev1.ProtocolTCP, Port: port,
				TargetPort: intstr.FromInt32(port)}},
		},
	}
}
