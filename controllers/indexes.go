package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
)

// Fields the manager's cache indexes, so the watches that map a FaultPolicy or a Cluster to the
// objects naming it list only those, not the whole namespace; front.TopicNameField, the doors'
// index, is registered with them. The API server cannot select on them: a list by one of these
// must read the cache (the manager's client), never an APIReader.
const (
	// faultPolicyRefField indexes Topics and Clusters by the FaultPolicy they name.
	faultPolicyRefField = "spec.faultPolicyRef.name"
	// clusterRefField indexes Topics by the Cluster they name.
	clusterRefField = "spec.clusterRef.name"
)

// fieldIndex is one index: the kind it indexes, the field and the values an object has for it.
type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// fieldIndexes are the indexes indexFields registers.
var fieldIndexes = []fieldIndex{
	{&routingv1alpha1.Topic{}, faultPolicyRefField, func(o client.Object) []string {
		return policyRefName(o.(*routingv1alpha1.Topic).Spec.FaultPolicyRef)
	}},
	{&routingv1alpha1.Topic{}, clusterRefField, func(o client.Object) []string {
		return clusterRefName(o.(*routingv1alpha1.Topic).Spec.ClusterRef)
	}},
	{&routingv1alpha1.Cluster{}, faultPolicyRefField, func(o client.Object) []string {
		return policyRefName(o.(*routingv1alpha1.Cluster).Spec.FaultPolicyRef)
	}},
	// The doors' requests name a RocketMQ topic: the front layer finds the Topic declaring it
	// through this index, and never lists a namespace on a request.
	{&routingv1alpha1.Topic{}, front.TopicNameField, front.TopicNameValues},
}

// indexFields registers the field indexes with the manager's cache. It must run before the
// manager starts: an informer takes its indexes when it is created.
func indexFields(ctx context.Context, mgr ctrl.Manager) error {
	for _, ix := range fieldIndexes {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// policyRefName is the index value of a FaultPolicy reference: its name, or none when it is unset,
// so an object without one is listed under no name.
func policyRefName(ref *routingv1alpha1.FaultPolicyReference) []string {
	if ref == nil {
		return nil
	}
	return []string{ref.Name}
}

// clusterRefName is the index value of a Cluster reference, as policyRefName is of a FaultPolicy's.
func clusterRefName(ref *routingv1alpha1.ClusterReference) []string {
	if ref == nil {
		return nil
	}
	return []string{ref.Name}
}

// requestsFor lists the objects of namespace into list, narrowed by opts, and asks for a
// reconcile of each that match accepts (nil accepts all). A failed list is logged and asks for
// none: the watch's next event lists again.
func requestsFor[T client.Object](ctx context.Context, c client.Reader, list client.ObjectList, namespace string,
	match func(T) bool, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, append(opts, client.InNamespace(namespace))...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing failed", "list", fmt.Sprintf("%T", list), "namespace", namespace)
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(T); ok && (match == nil || match(obj)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
		return nil
	})
	return reqs
}
