package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// topicCreateTimeout bounds one UPDATE_AND_CREATE_TOPIC request.
const topicCreateTimeout = 5 * time.Second

// TopicReconciler routes a Topic through the runtime: it builds the route from the master pods
// the selector picks, pushes it with the referenced policy, creates the topic on every ready
// master (UPDATE_AND_CREATE_TOPIC), and writes what it found into status. Every replica routes;
// only the leader creates topics and writes status.
type TopicReconciler struct {
	client.Client
	Runtime *producer.Runtime
	*shared

	mu sync.Mutex
	// created records the generation last created on each broker address, so
	// UPDATE_AND_CREATE_TOPIC is sent once per spec change and broker, not on every reconcile.
	created map[topicOnBroker]int64
	// routeChanged carries Topics on a Cluster whose route status changed, or whose Cluster's
	// look at the name servers finished.
	routeChanged requestQueue
	// asked records when a cluster Topic's route was first found still unanswered, for the
	// Topics whose route has had no answer yet (see awaitRoute).
	asked map[types.NamespacedName]time.Time
}

type topicOnBroker struct {
	topic types.NamespacedName
	addr  string
}

// selectedBroker is a master broker pod a Topic selects.
type selectedBroker struct {
	brokerPod
	pod string
}

var _ reconcile.Reconciler = (*TopicReconciler)(nil)

// Reconcile gets the Topic, computes its route and pushes it into the runtime, creates the topic
// on its brokers, and writes status once.
func (r *TopicReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var topic routingv1alpha1.Topic
	if err := r.Get(ctx, req.NamespacedName, &topic); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.removeRoute(ctx, req.NamespacedName)
		_, err := r.syncNamespaceCredentials(ctx, req.Namespace)
		return ctrl.Result{}, err
	}
	if topic.Spec.ClusterRef != nil {
		return r.reconcileOnCluster(ctx, &topic)
	}
	r.mu.Lock()
	delete(r.asked, req.NamespacedName) // moved off its Cluster, it waits for no name server
	r.mu.Unlock()
	credsRef, secretErr := r.syncNamespaceCredentials(ctx, topic.Namespace)
	if secretErr != nil && !errors.Is(secretErr, errSecretUnusable) {
		return ctrl.Result{}, secretErr
	}
	brokers, err := r.selectedBrokers(ctx, &topic)
	if err != nil {
		return ctrl.Result{}, err
	}
	policyKey, policyFound, err := r.policyOf(ctx, &topic)
	if err != nil {
		return ctrl.Result{}, err
	}
	routeErr := r.pushRoute(&topic, brokers, policyKey)
	if !r.leading() {
		return ctrl.Result{}, nil
	}
	var createErr error
	if ptr.Deref(topic.Spec.Create, true) {
		createErr = r.createOnBrokers(ctx, &topic, brokers)
	}

	orig := topic.DeepCopy()
	r.computeStatus(&topic, brokers, policyKey, policyFound, errors.Join(routeErr, createErr))
	rf := credentialsCondition(&topic.Status.Conditions, topic.Generation, r.Runtime, scope.Pods(topic.Namespace).Prefix(),
		topic.Spec.TopicName, credsRef, secretErr)
	r.credentialsEvent(&topic, meta.FindStatusCondition(orig.Status.Conditions, routingv1alpha1.ConditionCredentialsAccepted),
		meta.FindStatusCondition(topic.Status.Conditions, routingv1alpha1.ConditionCredentialsAccepted), rf)
	result, err := r.topicWrites.patchStatus(ctx, r.Client, &topic, orig,
		!equality.Semantic.DeepEqual(topic.Status, orig.Status), r.metrics, "Topic")
	if err != nil {
		return result, err
	}
	// A broker that refused the topic is retried with the controller's backoff.
	return result, createErr
}

// selectedBrokers lists the master broker pods with an address that the selector picks, by
// broker name.
func (r *TopicReconciler) selectedBrokers(ctx context.Context, topic *routingv1alpha1.Topic) ([]selectedBroker, error) {
	byName, err := selectedBrokerPods(ctx, r.Client, topic.Namespace, topic.Spec.BrokerSelector)
	if err != nil {
		return nil, err
	}
	out := make([]selectedBroker, 0, len(byName))
	for _, b := range byName {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// selectedBrokerPods returns the master broker pods with an address that a selector picks in a
// namespace, by broker name; nil or empty selectors pick nothing.
func selectedBrokerPods(ctx context.Context, c client.Reader, namespace string, selector *metav1.LabelSelector) (map[string]selectedBroker, error) {
	if selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || sel.Empty() {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	byName := map[string]selectedBroker{}
	for i := range pods.Items {
		b, ok := describeBrokerPod(&pods.Items[i])
		if !ok || !b.Master || b.Addr == "" {
			continue
		}
		// Of two pods claiming one broker (a replacement during a rollout), prefer the ready one.
		if prev, dup := byName[b.Name]; dup && prev.Ready && !b.Ready {
			continue
		}
		byName[b.Name] = selectedBroker{brokerPod: b, pod: pods.Items[i].Name}
	}
	return byName, nil
}

// policyOf returns the runtime key of the Topic's FaultPolicy and whether it exists. A Topic
// without a reference, or whose policy is missing, routes with the runtime's default policy ("").
func (r *TopicReconciler) policyOf(ctx context.Context, topic *routingv1alpha1.Topic) (key string, found bool, err error) {
	ref := topic.Spec.FaultPolicyRef
	if ref == nil {
		return "", true, nil
	}
	var fp routingv1alpha1.FaultPolicy
	if err := r.Get(ctx, types.NamespacedName{Namespace: topic.Namespace, Name: ref.Name}, &fp); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	key = scope.PolicyKey(topic.Namespace, ref.Name)
	// The FaultPolicy controller may not have pushed the policy yet; a route must never be
	// governed by the defaults while its policy exists, so push it here too (it is idempotent).
	if _, known := r.Runtime.Policy(key); !known {
		users, err := usersOf(ctx, r.Client, &fp)
		if err != nil {
			return "", false, err
		}
		if err := pushPolicy(r.Runtime, &fp, len(users.clusters) > 0); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "FaultPolicy not pushed", "faultPolicy", key)
		}
	}
	return key, true, nil
}

// pushRoute hands the route to the runtime; a read-only topic has no write queues.
func (r *TopicReconciler) pushRoute(topic *routingv1alpha1.Topic, brokers []selectedBroker, policyKey string) error {
	writeQueues := int(topic.Spec.WriteQueueNums)
	if !writable(topic.Spec.Perm) {
		writeQueues = 0
	}
	route := producer.Route{Key: scope.TopicRoute(topic.Namespace, topic.Name), Topic: topic.Spec.TopicName, Policy: policyKey}
	for _, b := range brokers {
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: scope.Pods(topic.Namespace).Broker(b.Name).String(), WriteQueues: writeQueues})
	}
	if err := r.Runtime.SetRoute(route); err != nil {
		return fmt.Errorf("the runtime refused the route: %w", err)
	}
	return nil
}

// removeRoute forgets a deleted Topic's route. Routes are the Topic resource's own, so another
// Topic routing the same RocketMQ topic keeps its route.
func (r *TopicReconciler) removeRoute(ctx context.Context, key types.NamespacedName) {
	r.mu.Lock()
	for k := range r.created {
		if k.topic == key {
			delete(r.created, k)
		}
	}
	delete(r.asked, key)
	r.mu.Unlock()
	r.topicWrites.forget(key)
	if route := scope.TopicRoute(key.Namespace, key.Name); r.Runtime.RemoveRoute(route) {
		ctrl.LoggerFrom(ctx).Info("Route removed from the runtime", "route", route)
	}
}

// createOnBrokers sends UPDATE_AND_CREATE_TOPIC to every ready master not yet told about this
// generation. A refusal is recorded as an Event and returned for a retry with backoff.
func (r *TopicReconciler) createOnBrokers(ctx context.Context, topic *routingv1alpha1.Topic, brokers []selectedBroker) error {
	key := client.ObjectKeyFromObject(topic)
	var errs []error
	for _, b := range brokers {
		if !b.Ready {
			continue
		}
		tb := topicOnBroker{topic: key, addr: b.Addr}
		r.mu.Lock()
		done := r.created[tb] == topic.Generation
		r.mu.Unlock()
		if done {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, topicCreateTimeout)
		err := r.Runtime.CreateTopicIn(cctx, scope.Pods(topic.Namespace).Prefix(), b.Addr, topic.Spec.TopicName,
			int(topic.Spec.ReadQueueNums), int(topic.Spec.WriteQueueNums), int(topic.Spec.Perm), topicOptions(topic)...)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %s (%s): %w", b.Name, b.Addr, err))
			r.recorder.Eventf(topic, nil, corev1.EventTypeWarning, routingv1alpha1.ReasonTopicCreateFailed, "CreateTopic",
				"Broker %s refused topic %s: %v", b.Name, topic.Spec.TopicName, err)
			continue
		}
		r.mu.Lock()
		r.created[tb] = topic.Generation
		r.mu.Unlock()
		ctrl.LoggerFrom(ctx).Info("Topic created on broker", "broker", b.Name, "addr", b.Addr, "rocketmqTopic", topic.Spec.TopicName)
	}
	return errors.Join(errs...)
}

// computeStatus fills the Topic's status from the brokers found and the policy's isolations.
func (r *TopicReconciler) computeStatus(topic *routingv1alpha1.Topic, brokers []selectedBroker, policyKey string, policyFound bool, err error) {
	isolated := r.isolatedIn(front.TopicScope(topic), policyKey)
	writeQueues := topic.Spec.WriteQueueNums
	if !writable(topic.Spec.Perm) {
		writeQueues = 0
	}
	st := &topic.Status
	st.Brokers, st.WritableQueues, st.AvailableQueues = nil, 0, 0
	for _, b := range brokers {
		if len(st.Brokers) < maxStatusBrokers {
			st.Brokers = append(st.Brokers, routingv1alpha1.TopicBroker{
				Name: b.Name, Pod: b.pod, Address: b.Addr, Ready: b.Ready, WriteQueues: writeQueues, Isolated: isolated[b.Name],
			})
		}
		st.WritableQueues += writeQueues
		if b.Ready && !isolated[b.Name] {
			st.AvailableQueues += writeQueues
		}
	}
	st.BrokerCount = int32(len(brokers))
	st.ObservedGeneration = topic.Generation

	cond := metav1.Condition{Type: routingv1alpha1.ConditionReady, ObservedGeneration: topic.Generation}
	switch {
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, routingv1alpha1.ReasonTopicCreateFailed, conditionMessage(err.Error())
	case !policyFound:
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonFaultPolicyNotFound
		cond.Message = fmt.Sprintf("FaultPolicy %q does not exist; routing with the default policy, the Detour preset's", topic.Spec.FaultPolicyRef.Name)
	case len(brokers) == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonNoBrokers
		cond.Message = "The broker selector matches no master broker pod with an address"
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, routingv1alpha1.ReasonReconciled
		cond.Message = fmt.Sprintf("Routed to %d brokers; %d of %d write queues available", len(brokers), st.AvailableQueues, st.WritableQueues)
		cond.Message += listCut(len(brokers))
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

// topicsOfPod maps a pod to the Topics in its namespace whose selector matches it.
func (r *TopicReconciler) topicsOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.topicsWhere(ctx, obj.GetNamespace(), func(t *routingv1alpha1.Topic) bool {
		return selects(t.Spec.BrokerSelector, obj.GetLabels())
	})
}

// topicsOfPolicy maps a FaultPolicy (or an isolation event of it) to the Topics referencing it.
func (r *TopicReconciler) topicsOfPolicy(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.topicsWhere(ctx, obj.GetNamespace(), nil, client.MatchingFields{faultPolicyRefField: obj.GetName()})
}

// topicsWhere asks for a reconcile of each Topic in namespace that opts list and match accepts
// (nil accepts all); see requestsFor.
func (r *TopicReconciler) topicsWhere(ctx context.Context, namespace string, match func(*routingv1alpha1.Topic) bool,
	opts ...client.ListOption) []reconcile.Request {
	return requestsFor(ctx, r, &routingv1alpha1.TopicList{}, namespace, match, opts...)
}

// SetupWithManager registers the reconciler with its watches: broker pods, FaultPolicies, the
// runtime's isolation events and the leader's resync.
func (r *TopicReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.created = map[topicOnBroker]int64{}
	r.asked = map[types.NamespacedName]time.Time{}
	r.describer.subscribe(r.clusterLooked)
	return ctrl.NewControllerManagedBy(mgr).
		Named("topic").
		For(&routingv1alpha1.Topic{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.topicsOfPod)).
		Watches(&routingv1alpha1.FaultPolicy{}, handler.EnqueueRequestsFromMapFunc(r.topicsOfPolicy)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.topicsOfSecret), builder.OnlyMetadata).
		Watches(&routingv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.topicsOfCluster),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.topicIsolations, handler.EnqueueRequestsFromMapFunc(r.topicsOfPolicy))).
		WatchesRawSource(source.Channel(r.topicResync, enqueueResync)).
		WatchesRawSource(r.routeChanged.source()).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: topicWorkers}).
		Complete(r)
}

// topicWorkers is how many Topics are reconciled at once. A reconcile that writes status spends
// most of its time waiting for the API server's answer, and the API server takes writes faster
// with several in flight than one after another (envtest's, on 2 cores: about 1.5 times as
// fast with 8 or 16 as with 1), so 2 workers left it idle between the writes of 10,000 Topics
// turning Ready after a start. The reconcilers' state is shared under locks, and one Topic is
// never reconciled twice at once.
const topicWorkers = 8

// writable reports whether RocketMQ's permission bits allow writes (PERM_WRITE = 2).
func writable(perm int32) bool { return perm&remoting.PermWrite != 0 }

// topicOptions are the broker-side settings of topic beyond queues and perm that create sets: its
// message.type, in RocketMQ's spelling of the API's values.
func topicOptions(topic *routingv1alpha1.Topic) []producer.TopicOption {
	if topic.Spec.MessageType == "" {
		return nil
	}
	return []producer.TopicOption{producer.WithMessageType(rocketMQMessageType(topic.Spec.MessageType))}
}

// rocketMQMessageType is t as RocketMQ spells the message.type attribute's values.
func rocketMQMessageType(t routingv1alpha1.TopicMessageType) string {
	return strings.ToUpper(string(t))
}
