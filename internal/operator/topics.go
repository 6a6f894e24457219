package operator

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/detourmq/detour/controllers"
	"github.com/detourmq/detour/internal/gateway"
)

// resolveTopic finds a Topic in the manager's cache. Namespaces outside --namespace are not
// served: their Topics are not watched.
func (op *Operator) resolveTopic(ctx context.Context, namespace, name string) (gateway.Target, error) {
	if op.namespace != "" && namespace != op.namespace {
		return gateway.Target{}, gateway.ErrTopicNotFound
	}
	var t routingv1alpha1.Topic
	err := op.mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &t)
	if apierrors.IsNotFound(err) {
		return gateway.Target{}, gateway.ErrTopicNotFound
	}
	if err != nil {
		return gateway.Target{}, err
	}
	// Exactly this resource's route: another namespace's Topic of the same topicName has its own.
	return gateway.Target{Topic: t.Spec.TopicName, Route: controllers.RouteKey(namespace, name),
		BrokerPrefix: controllers.TopicBrokerPrefix(&t)}, nil
}
