package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// reconcileOnCluster routes a Topic that references a Cluster: when asked, it creates the topic
// on every master the name servers publish (never lowering queue counts a broker has), then has
// the runtime resolve the route from the name servers, and writes what they publish into status
// once they answered, so a Topic's first write is their answer (see awaitRoute).
// Nothing here waits for a name server: the runtime resolves on the route's own goroutine and the
// describer looks at the cluster on its own, and both ask for this reconcile when they have news,
// so name servers that never answer hold no worker that other Topics need. The reconcile is also
// repeated every refresh interval.
func (r *TopicReconciler) reconcileOnCluster(ctx context.Context, topic *routingv1alpha1.Topic) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(topic)
	var cl routingv1alpha1.Cluster
	err := r.Get(ctx, types.NamespacedName{Namespace: topic.Namespace, Name: topic.Spec.ClusterRef.Name}, &cl)
	if apierrors.IsNotFound(err) {
		r.removeRoute(ctx, key)
		return r.writeClusterTopicStatus(ctx, topic, nil, false, nil, nil, func(c *metav1.Condition) {
			c.Status, c.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonClusterNotFound
			c.Message = fmt.Sprintf("Cluster %q does not exist", topic.Spec.ClusterRef.Name)
		})
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	// The Cluster reconciler sets the credentials too; a Topic's creation may come first.
	if err := r.syncCredentials(ctx, r.Runtime, scope.Cluster(cl.Namespace, cl.Name).Prefix(), cl.Namespace,
		cl.Spec.CredentialsSecretRef); err != nil && !errors.Is(err, errSecretUnusable) {
		return ctrl.Result{}, err
	}
	policyKey, policyFound, err := r.policyOf(ctx, topic)
	if err != nil {
		return ctrl.Result{}, err
	}
	var createErr error
	if ptr.Deref(topic.Spec.Create, false) && r.leading() {
		createErr = r.createOnCluster(ctx, topic, &cl)
	}
	spec := producer.NameServerRoute{Key: scope.TopicRoute(topic.Namespace, topic.Name), Topic: topic.Spec.TopicName,
		Brokers: scope.Cluster(topic.Namespace, cl.Name), NameServers: cl.Spec.NameServers, Policy: policyKey, Refresh: refreshInterval(&cl),
		Async: true, OnChange: func() { r.routeAnswered(key) }}
	if err := r.Runtime.SetNameServerRoute(spec); err != nil {
		return ctrl.Result{}, fmt.Errorf("the runtime refused the route: %w", err)
	}
	if !r.leading() {
		return refreshLater(spec.Refresh), nil
	}
	st, _ := r.Runtime.RouteStatus(spec.Key)
	if wait := r.awaitRoute(key, st); wait > 0 && createErr == nil {
		// The answer's OnChange asks for this reconcile; the requeue writes RouteResolving if
		// none came by then.
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	result, err := r.writeClusterTopicStatus(ctx, topic, &st, policyFound, createErr, cl.Spec.CredentialsSecretRef, nil)
	if err != nil || result.RequeueAfter > 0 {
		return result, err
	}
	if createErr != nil {
		// A broker that refused the topic is retried with the controller's backoff.
		return ctrl.Result{}, createErr
	}
	return refreshLater(spec.Refresh), nil
}

// refreshLater asks for a cluster Topic again after its Cluster's refresh interval, at
// controller-runtime's low priority: the runtime reports a changed route at once (OnChange), so
// the periodic look is a backstop, and at 10,000 Topics (333 a second with the default 30 s) it
// must not hold back the reconciles of changes.
func refreshLater(every time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: every, Priority: ptr.To(handler.LowPriority)}
}

// routeResolvingGrace is how long a cluster Topic whose route has had no answer yet waits for
// one before its status says RouteResolving. A name server that answers does so in milliseconds,
// even with thousands of routes asked for at once, and one that fails is reported within the
// runtime's request timeout (DefaultNameServerTimeout); so Topics are written once, with what the
// name servers said, while a name server that holds requests still gets its Topics a status.
const routeResolvingGrace = 5 * time.Second

// awaitRoute returns how much longer the Topic key should wait for its route's first answer
// before its status is written, given the route's status st; 0 when an answer (a route or an
// error) has come, or the grace has passed since the Topic was first found waiting.
func (r *TopicReconciler) awaitRoute(key types.NamespacedName, st producer.RouteStatus) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.Resolved || st.Err != nil {
		delete(r.asked, key)
		return 0
	}
	first, ok := r.asked[key]
	if !ok {
		r.asked[key] = time.Now()
		return routeResolvingGrace
	}
	return max(routeResolvingGrace-time.Since(first), 0)
}

// routeAnswered asks for a reconcile of a cluster Topic whose route's status changed: at normal
// priority while the Topic waits for its route's first answer (awaitRoute), later changes at low
// priority. So after a start, every Topic's first answer is written before any Topic already
// written is written again, and the Topics not yet looked at (the initial list, which
// controller-runtime queues at low priority) take turns with later changes: a stream of them
// (refreshes failing on a starved machine, each changing a Ready message) cannot hold those back.
func (r *TopicReconciler) routeAnswered(key types.NamespacedName) {
	r.mu.Lock()
	_, first := r.asked[key]
	r.mu.Unlock()
	if first {
		r.routeChanged.add(key)
		return
	}
	r.routeChanged.addLow(key)
}

// createOnCluster sends UPDATE_AND_CREATE_TOPIC to every master the name servers publish, once per
// generation and master, with the spec's perm and queue counts raised to what the broker already
// publishes for the topic, so a create never shrinks a topic. The masters come from the
// describer's last look at the Cluster; before the first look finished it creates nothing (the
// look's end asks for this reconcile again).
func (r *TopicReconciler) createOnCluster(ctx context.Context, topic *routingv1alpha1.Topic, cl *routingv1alpha1.Cluster) error {
	look, _ := r.describer.latest(client.ObjectKeyFromObject(cl), cl.Spec.NameServers, refreshInterval(cl))
	if !look.done {
		return nil
	}
	if look.err != nil {
		return look.err
	}
	view := look.view
	published := map[string]producer.PublishedBroker{}
	if st, ok := r.Runtime.RouteStatus(scope.TopicRoute(topic.Namespace, topic.Name)); ok {
		for _, b := range st.Brokers {
			published[b.Name] = b
		}
	}
	key := client.ObjectKeyFromObject(topic)
	var errs []error
	created := false
	for _, b := range view.Brokers {
		if b.MasterAddr == "" {
			continue
		}
		tb := topicOnBroker{topic: key, addr: b.MasterAddr}
		r.mu.Lock()
		done := r.created[tb] == topic.Generation
		r.mu.Unlock()
		if done {
			continue
		}
		read, write := int(topic.Spec.ReadQueueNums), int(topic.Spec.WriteQueueNums)
		if p, ok := published[b.Name]; ok {
			read, write = max(read, p.ReadQueues), max(write, p.WriteQueues)
		}
		cctx, cancel := context.WithTimeout(ctx, topicCreateTimeout)
		err := r.Runtime.CreateTopicIn(cctx, scope.Cluster(cl.Namespace, cl.Name).Prefix(), b.MasterAddr, topic.Spec.TopicName, read, write, int(topic.Spec.Perm), topicOptions(topic)...)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %s (%s): %w", b.Name, b.MasterAddr, err))
			r.recorder.Eventf(topic, nil, corev1.EventTypeWarning, routingv1alpha1.ReasonTopicCreateFailed, "CreateTopic",
				"Broker %s refused topic %s: %v", b.Name, topic.Spec.TopicName, err)
			continue
		}
		created = true
		r.mu.Lock()
		r.created[tb] = topic.Generation
		r.mu.Unlock()
		ctrl.LoggerFrom(ctx).Info("Topic created on broker", "broker", b.Name, "addr", b.MasterAddr,
			"rocketmqTopic", topic.Spec.TopicName, "readQueues", read, "writeQueues", write)
	}
	if created {
		// The broker registers the new topic with the name servers at once; ask for the route now
		// rather than at the next refresh.
		r.Runtime.RefreshRoute(scope.TopicRoute(topic.Namespace, topic.Name))
	}
	return errors.Join(errs...)
}

// writeClusterTopicStatus fills status from the route the name servers publish (st; nil when the
// Cluster is missing) and writes it once. override, when set, decides the Ready condition.
func (r *TopicReconciler) writeClusterTopicStatus(ctx context.Context, topic *routingv1alpha1.Topic, st *producer.RouteStatus,
	policyFound bool, createErr error, credsRef *routingv1alpha1.CredentialsSecretReference, override func(*metav1.Condition)) (ctrl.Result, error) {
	if !r.leading() {
		return ctrl.Result{}, nil
	}
	orig := topic.DeepCopy()
	computeClusterTopicStatus(topic, st, r.routeBrokers(topic), r.isolatedIn(front.TopicScope(topic), topicPolicyKey(topic)), policyFound, createErr, override)
	rf := credentialsCondition(&topic.Status.Conditions, topic.Generation, r.Runtime, front.TopicScope(topic).Prefix(), topic.Spec.TopicName, credsRef, nil)
	r.credentialsEvent(topic, meta.FindStatusCondition(orig.Status.Conditions, routingv1alpha1.ConditionCredentialsAccepted),
		meta.FindStatusCondition(topic.Status.Conditions, routingv1alpha1.ConditionCredentialsAccepted), rf)
	return r.topicWrites.patchStatus(ctx, r.Client, topic, orig,
		!equality.Semantic.DeepEqual(topic.Status, orig.Status), r.metrics, "Topic")
}

// routeBrokers returns the brokers of a Topic's compiled route, by RocketMQ broker name.
func (r *TopicReconciler) routeBrokers(topic *routingv1alpha1.Topic) map[string]producer.RouteBroker {
	out := map[string]producer.RouteBroker{}
	if info, ok := r.Runtime.RouteInfo(scope.TopicRoute(topic.Namespace, topic.Name)); ok {
		for _, b := range info.Brokers {
			if name, ok := front.TopicScope(topic).Local(b.Name); ok {
				out[name] = b
			}
		}
	}
	return out
}

// topicPolicyKey is the runtime key of the policy a Topic references; "" (the runtime's default
// policy) without a reference.
func topicPolicyKey(topic *routingv1alpha1.Topic) string {
	if ref := topic.Spec.FaultPolicyRef; ref != nil {
		return scope.PolicyKey(topic.Namespace, ref.Name)
	}
	return ""
}

// isolatedIn returns the brokers of a scope that a policy isolates now, by RocketMQ broker name.
func (r *TopicReconciler) isolatedIn(brokers scope.Scope, policyKey string) map[string]bool {
	out := map[string]bool{}
	for _, it := range r.Runtime.Isolated(policyKey) {
		if name, ok := brokers.Local(it.Broker); ok {
			out[name] = true
		}
	}
	return out
}

// computeClusterTopicStatus fills a cluster Topic's status: every broker the name servers publish
// for it, with queue counts and perm as published, pod health and isolation as the runtime sees
// them; Ready and, with create, QueuesMatchSpec.
func computeClusterTopicStatus(topic *routingv1alpha1.Topic, st *producer.RouteStatus, routed map[string]producer.RouteBroker,
	isolated map[string]bool, policyFound bool, createErr error, override func(*metav1.Condition)) {
	s := &topic.Status
	s.ObservedGeneration = topic.Generation
	mismatch := applyClusterTopicBrokers(topic, st, routed, isolated)
	applyQueuesMatchSpec(topic, st, mismatch)
	cond := metav1.Condition{Type: routingv1alpha1.ConditionReady, ObservedGeneration: topic.Generation}
	if override != nil {
		override(&cond)
	} else {
		computeClusterTopicReady(&cond, topic, st, len(routed), policyFound, createErr)
	}
	meta.SetStatusCondition(&s.Conditions, cond)
}

// applyClusterTopicBrokers fills the status's broker list (cut to the schema's bound) and queue
// totals from the route the name servers publish, st (nil: no Cluster, so none), and returns how
// each broker that publishes other queue counts or perm than the spec differs, for
// QueuesMatchSpec.
func applyClusterTopicBrokers(topic *routingv1alpha1.Topic, st *producer.RouteStatus, routed map[string]producer.RouteBroker,
	isolated map[string]bool) (mismatch []string) {
	s := &topic.Status
	s.Brokers, s.WritableQueues, s.AvailableQueues, s.BrokerCount = nil, 0, 0, 0
	if st == nil {
		return nil
	}
	for _, b := range st.Brokers {
		tb := computeClusterTopicBroker(b, routed, isolated)
		s.WritableQueues += tb.WriteQueues
		if tb.Ready && !tb.Isolated {
			s.AvailableQueues += tb.WriteQueues
		}
		if int32(b.ReadQueues) != topic.Spec.ReadQueueNums || int32(b.WriteQueues) != topic.Spec.WriteQueueNums || int32(b.Perm)&6 != topic.Spec.Perm {
			mismatch = append(mismatch, fmt.Sprintf("%s publishes read %d write %d perm %d", b.Name, b.ReadQueues, b.WriteQueues, b.Perm))
		}
		if len(s.Brokers) < maxStatusBrokers {
			s.Brokers = append(s.Brokers, tb)
		}
	}
	s.BrokerCount = int32(len(routed))
	return mismatch
}

// computeClusterTopicBroker is one published broker's status entry. Its write queues and pod
// health come from the compiled route, so a broker the route leaves out (not writable, or
// without a master) counts no write queue and is Ready, having no pod health to report.
func computeClusterTopicBroker(b producer.PublishedBroker, routed map[string]producer.RouteBroker, isolated map[string]bool) routingv1alpha1.TopicBroker {
	tb := routingv1alpha1.TopicBroker{Name: b.Name, Address: b.MasterAddr, Ready: true,
		ReadQueues: int32(b.ReadQueues), Perm: int32(b.Perm), Isolated: isolated[b.Name]}
	if rb, ok := routed[b.Name]; ok {
		tb.WriteQueues, tb.Ready = int32(rb.WriteQueues), rb.PodOK
	}
	return tb
}

// applyQueuesMatchSpec sets QueuesMatchSpec on a Topic that creates itself and has a route, from
// the brokers whose published counts differ (mismatch), and removes it otherwise: without create
// the operator never asked for the spec's counts, and without a route it cannot know them.
func applyQueuesMatchSpec(topic *routingv1alpha1.Topic, st *producer.RouteStatus, mismatch []string) {
	s := &topic.Status
	if !ptr.Deref(topic.Spec.Create, false) || st == nil || !st.Resolved {
		meta.RemoveStatusCondition(&s.Conditions, routingv1alpha1.ConditionQueuesMatchSpec)
		return
	}
	qc := metav1.Condition{Type: routingv1alpha1.ConditionQueuesMatchSpec, ObservedGeneration: topic.Generation,
		Status: metav1.ConditionTrue, Reason: routingv1alpha1.ReasonReconciled,
		Message: fmt.Sprintf("Every broker publishes read %d write %d perm %d", topic.Spec.ReadQueueNums, topic.Spec.WriteQueueNums, topic.Spec.Perm)}
	if len(mismatch) > 0 {
		qc.Status, qc.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonQueuesDiffer
		qc.Message = conditionMessage(strings.Join(mismatch, "; ") + " (a create never lowers queue counts a broker has)")
	}
	meta.SetStatusCondition(&s.Conditions, qc)
}

// computeClusterTopicReady fills the Ready condition of a cluster Topic no override decides,
// from the first of these that holds, in order: a failed create, the name servers' refusal, a
// route still asked for, an unpublished topic, unreachable name servers, a missing policy, no
// routed broker. A Ready message gives the queue totals, so it runs after
// applyClusterTopicBrokers.
func computeClusterTopicReady(cond *metav1.Condition, topic *routingv1alpha1.Topic, st *producer.RouteStatus, routedBrokers int,
	policyFound bool, createErr error) {
	switch {
	case createErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, routingv1alpha1.ReasonTopicCreateFailed, conditionMessage(createErr.Error())
	case st != nil && errors.Is(st.Err, producer.ErrAnswerRefused):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, routingv1alpha1.ReasonRouteRefused, routeRefusedMessage(st)
	case st != nil && !st.Resolved && st.Err == nil:
		cond.Status, cond.Reason = metav1.ConditionUnknown, routingv1alpha1.ReasonRouteResolving
		cond.Message = "Asking the name servers for the route"
	case st == nil || (!st.Resolved && errors.Is(st.Err, producer.ErrTopicNotPublished)):
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonTopicNotPublished
		cond.Message = fmt.Sprintf("The name servers do not publish topic %s; set create: true to have it created", topic.Spec.TopicName)
	case !st.Resolved:
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonNameServersUnreachable
		cond.Message = conditionMessage(fmt.Sprintf("No name server answered: %v", st.Err))
	case !policyFound:
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonFaultPolicyNotFound
		cond.Message = fmt.Sprintf("FaultPolicy %q does not exist; routing with the default policy", topic.Spec.FaultPolicyRef.Name)
	case routedBrokers == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonNoBrokers
		cond.Message = fmt.Sprintf("Name server %s publishes no writable queue of a master", st.NameServer)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, routingv1alpha1.ReasonReconciled, routedMessage(&topic.Status, st, routedBrokers)
	}
}

// routeRefusedMessage says why the name servers refused the route and which route, if any, the
// topic keeps using meanwhile.
func routeRefusedMessage(st *producer.RouteStatus) string {
	kept := "no route was received before, so the topic has none"
	if st.Resolved {
		kept = fmt.Sprintf("the last good route, from name server %s at %s, stays in use", st.NameServer, st.LastResolved.UTC().Format(time.RFC3339))
	}
	return conditionMessage(fmt.Sprintf("%v; %s", st.Err, kept))
}

// routedMessage is a Ready Topic's message: where it routes and how many write queues are
// available, noting a failed last refresh (the last route stays in use) and, when the status's
// broker list was cut, how many brokers the name servers publish.
func routedMessage(s *routingv1alpha1.TopicStatus, st *producer.RouteStatus, routedBrokers int) string {
	msg := fmt.Sprintf("Routed by name server %s to %d brokers; %d of %d write queues available",
		st.NameServer, routedBrokers, s.AvailableQueues, s.WritableQueues)
	if st.Err != nil {
		msg += fmt.Sprintf(" (last refresh failed, keeping the last route: %v)", st.Err)
	}
	return conditionMessage(msg + listCut(len(st.Brokers)))
}

// topicsOfCluster maps a Cluster to the Topics referencing it.
func (r *TopicReconciler) topicsOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.topicsWhere(ctx, obj.GetNamespace(), nil, client.MatchingFields{clusterRefField: obj.GetName()})
}

// clusterLooked asks for a reconcile of the Topics that create themselves on a Cluster whose
// look at the name servers just finished: the masters to create on may have changed.
func (r *TopicReconciler) clusterLooked(cluster types.NamespacedName) {
	reqs := r.topicsWhere(context.Background(), cluster.Namespace, func(t *routingv1alpha1.Topic) bool {
		return ptr.Deref(t.Spec.Create, false)
	}, client.MatchingFields{clusterRefField: cluster.Name})
	for _, req := range reqs {
		r.routeChanged.add(req.NamespacedName)
	}
}
