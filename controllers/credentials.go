package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// Keys of a credentials Secret.
const (
	SecretAccessKey     = "accessKey"
	SecretSecretKey     = "secretKey"
	SecretSecurityToken = "securityToken"
)

// EventCredentialsRefused is the reason of the Warning Event recorded when a broker refuses
// detour's credentials; the condition's reason (AuthenticationFailed, Forbidden) is its action.
const EventCredentialsRefused = "CredentialsRefused"

// secretCache reads credentials Secrets. The manager watches only Secrets' metadata (so the
// operator does not hold every Secret of the cluster in memory); a Secret's data is read from the
// API server when its resourceVersion changed since the last read.
type secretCache struct {
	meta client.Reader // cached, metadata only
	api  client.Reader // the API server

	mu   sync.Mutex
	read map[types.NamespacedName]readSecret
}

type readSecret struct {
	version string
	creds   *remoting.Credentials
	err     error
}

func newSecretCache(meta, api client.Reader) *secretCache {
	return &secretCache{meta: meta, api: api, read: map[types.NamespacedName]readSecret{}}
}

// errSecretUnusable marks a Secret that is missing or lacks a key: no retry helps until it changes.
var errSecretUnusable = errors.New("credentials Secret unusable")

// credentials returns the credentials in the Secret key names. An error wrapping
// errSecretUnusable means the Secret is missing or incomplete; others are the API server's.
func (c *secretCache) credentials(ctx context.Context, key types.NamespacedName) (*remoting.Credentials, error) {
	var pm metav1.PartialObjectMetadata
	pm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.meta.Get(ctx, key, &pm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s does not exist", errSecretUnusable, key.Name)
		}
		return nil, err
	}
	c.mu.Lock()
	last, ok := c.read[key]
	c.mu.Unlock()
	if ok && last.version == pm.ResourceVersion {
		return last.creds, last.err
	}
	var s corev1.Secret
	if err := c.api.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s does not exist", errSecretUnusable, key.Name)
		}
		return nil, err
	}
	creds, err := credentialsOf(&s)
	c.mu.Lock()
	c.read[key] = readSecret{version: s.ResourceVersion, creds: creds, err: err}
	c.mu.Unlock()
	return creds, err
}

// forget drops what was read of a Secret.
func (c *secretCache) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.read, key)
	c.mu.Unlock()
}

// credentialsOf reads a Secret's credentials keys.
func credentialsOf(s *corev1.Secret) (*remoting.Credentials, error) {
	creds := &remoting.Credentials{AccessKey: string(s.Data[SecretAccessKey]), SecretKey: string(s.Data[SecretSecretKey]),
		SecurityToken: string(s.Data[SecretSecurityToken])}
	if err := creds.Check(); err != nil {
		return nil, fmt.Errorf("%w: Secret %s needs keys %s and %s: %w", errSecretUnusable, s.Name, SecretAccessKey, SecretSecretKey, err)
	}
	return creds, nil
}

// syncCredentials sets the runtime's credentials for scope from the Secret ref names (none when
// ref is nil). A missing or incomplete Secret unsets them and is returned (for the condition); an
// API error leaves them as they were and is returned for a retry.
func (s *shared) syncCredentials(ctx context.Context, rt *producer.Runtime, scope, namespace string,
	ref *routingv1alpha1.CredentialsSecretReference) error {
	if ref == nil {
		return rt.SetCredentials(scope, nil)
	}
	creds, err := s.secrets.credentials(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name})
	if err != nil && !errors.Is(err, errSecretUnusable) {
		return err
	}
	if serr := rt.SetCredentials(scope, creds); serr != nil && err == nil {
		err = fmt.Errorf("%w: %w", errSecretUnusable, serr)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Credentials not usable; requests are sent unsigned", "scope", scope, "secret", ref.Name, "error", err.Error())
	}
	return err
}

// namespaceCredentialsRef is the Secret the brokerSelector Topics of a namespace are signed with:
// the first, by Topic name, that names one. Broker pods of a namespace are one set of brokers to
// the runtime, so one user signs for them all.
func namespaceCredentialsRef(ctx context.Context, c client.Reader, namespace string) (*routingv1alpha1.CredentialsSecretReference, error) {
	var topics routingv1alpha1.TopicList
	if err := c.List(ctx, &topics, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	slices.SortFunc(topics.Items, func(a, b routingv1alpha1.Topic) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for i := range topics.Items {
		t := &topics.Items[i]
		if t.DeletionTimestamp == nil && t.Spec.BrokerSelector != nil && t.Spec.CredentialsSecretRef != nil {
			return t.Spec.CredentialsSecretRef, nil
		}
	}
	return nil, nil
}

// syncNamespaceCredentials sets the credentials of a namespace's broker pods from the Secret its
// brokerSelector Topics name (namespaceCredentialsRef), and returns that reference.
func (r *TopicReconciler) syncNamespaceCredentials(ctx context.Context, namespace string) (*routingv1alpha1.CredentialsSecretReference, error) {
	ref, err := namespaceCredentialsRef(ctx, r.Client, namespace)
	if err != nil {
		return nil, err
	}
	return ref, r.syncCredentials(ctx, r.Runtime, scope.Pods(namespace).Prefix(), namespace, ref)
}

// credentialsCondition sets (or, for an object without credentials that no broker refused,
// removes) the CredentialsAccepted condition from the runtime's refusals in scope (of topic only,
// when topic is not ""), and returns the refusal it names, if any.
func credentialsCondition(conds *[]metav1.Condition, gen int64, rt *producer.Runtime, scope, topic string,
	ref *routingv1alpha1.CredentialsSecretReference, secretErr error) *producer.CredentialRefusal {
	cond := metav1.Condition{Type: routingv1alpha1.ConditionCredentialsAccepted, ObservedGeneration: gen}
	if secretErr != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsUnreadable
		cond.Message = conditionMessage(secretErr.Error() + "; requests are sent unsigned")
		meta.SetStatusCondition(conds, cond)
		return nil
	}
	refused := firstRefusal(rt.CredentialRefusals(), scope, topic)
	switch {
	case refused != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, refused.Reason.String()
		cond.Message = conditionMessage(refusalMessage(refused, ref))
	case ref == nil:
		meta.RemoveStatusCondition(conds, cond.Type)
		return nil
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, routingv1alpha1.ReasonAccepted
		cond.Message = fmt.Sprintf("No broker refused the credentials of Secret %s", ref.Name)
	}
	meta.SetStatusCondition(conds, cond)
	return refused
}

// firstRefusal picks the refusal a condition names: of the brokers in scope (and of topic, or of
// no topic, when topic is set), an authentication refusal before an authorization one.
func firstRefusal(all []producer.CredentialRefusal, scope, topic string) *producer.CredentialRefusal {
	var pick *producer.CredentialRefusal
	for i := range all {
		rf := &all[i]
		if rf.Scope != scope || (topic != "" && rf.Topic != "" && rf.Topic != topic) {
			continue
		}
		if pick == nil || (rf.Reason == remoting.AuthenticationRefused && pick.Reason != remoting.AuthenticationRefused) {
			pick = rf
		}
	}
	return pick
}

// refusalMessage tells what a broker refused and what it said.
func refusalMessage(rf *producer.CredentialRefusal, ref *routingv1alpha1.CredentialsSecretReference) string {
	what := rf.Request
	if rf.Topic != "" {
		what += " on topic " + rf.Topic
	}
	broker := "at " + rf.Addr
	if rf.Broker != "" {
		broker = fmt.Sprintf("%s (%s)", rf.Broker, rf.Addr)
	}
	msg := fmt.Sprintf("Broker %s refused detour's %s: %q (%d refusals since %s)", broker, what, rf.Remark,
		rf.Count, rf.Since.UTC().Format(time.RFC3339))
	if ref == nil {
		msg += "; set spec.credentialsSecretRef to a Secret with the user's accessKey and secretKey"
	}
	return msg
}

// credentialsEvent records a Warning Event when cond names a refusal that the condition before
// (old) did not.
func (s *shared) credentialsEvent(obj client.Object, old *metav1.Condition, cond *metav1.Condition, rf *producer.CredentialRefusal) {
	if rf == nil || cond == nil || cond.Status != metav1.ConditionFalse {
		return
	}
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason {
		return
	}
	s.recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventCredentialsRefused, cond.Reason, "%s", cond.Message)
}

// clustersOfSecret maps a Secret to the Clusters in its namespace that name it.
func (r *ClusterReconciler) clustersOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	r.secrets.forget(client.ObjectKeyFromObject(obj))
	return r.clustersWhere(ctx, obj.GetNamespace(), func(c *routingv1alpha1.Cluster) bool {
		return c.Spec.CredentialsSecretRef != nil && c.Spec.CredentialsSecretRef.Name == obj.GetName()
	})
}

// topicsOfSecret maps a Secret to the brokerSelector Topics in its namespace that name it.
func (r *TopicReconciler) topicsOfSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	r.secrets.forget(client.ObjectKeyFromObject(obj))
	return r.topicsWhere(ctx, obj.GetNamespace(), func(t *routingv1alpha1.Topic) bool {
		return t.Spec.CredentialsSecretRef != nil && t.Spec.CredentialsSecretRef.Name == obj.GetName()
	})
}
