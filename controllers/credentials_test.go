package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/scope"
)

// createCredentials creates a credentials Secret.
func createCredentials(t *testing.T, ns, name, accessKey, secretKey string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{SecretAccessKey: []byte(accessKey), SecretSecretKey: []byte(secretKey)}}
	if err := k8sClient.Create(context.Background(), s); err != nil {
		t.Fatalf("creating secret: %v", err)
	}
	return s
}

// credentialsAccepted succeeds when obj's CredentialsAccepted condition has status and reason and
// its message holds every one of words.
func credentialsAccepted(obj client.Object, conds func() []metav1.Condition, status metav1.ConditionStatus, reason string, words ...string) error {
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	c := meta.FindStatusCondition(conds(), routingv1alpha1.ConditionCredentialsAccepted)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("CredentialsAccepted = %+v, want %s %s", c, status, reason)
	}
	for _, w := range words {
		if !strings.Contains(c.Message, w) {
			return fmt.Errorf("CredentialsAccepted message %q lacks %q", c.Message, w)
		}
	}
	return nil
}

// credentialsEventAbout succeeds when a Warning CredentialsRefused Event regards the named object.
func credentialsEventAbout(ns, kind, name, action string) error {
	var list eventsv1.EventList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.Reason == EventCredentialsRefused && ev.Action == action && ev.Regarding.Kind == kind && ev.Regarding.Name == name && ev.Type == "Warning" {
			return nil
		}
	}
	return errors.New("no CredentialsRefused Event")
}

// TestSelectorTopicCredentialsFromASecret proves a brokerSelector Topic's credentialsSecretRef
// signs what detour sends its brokers: with a wrong secret the brokers refuse the topic's
// creation and its sends, the Topic says AuthenticationFailed with the broker's remark, an Event
// is recorded, and no broker is isolated; once the Secret holds the right secret, the change is
// read, the topic is created, sends are stored and the condition turns True.
func TestSelectorTopicCredentialsFromASecret(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	rt := startManager(t)
	c := startCluster(t, ns, 2)
	for _, b := range c.brokers {
		b.SetACL(&brokersim.ACL{Users: map[string]string{"detour": "s3cret"}})
	}
	secret := createCredentials(t, ns, "rocketmq-user", "detour", "wrong")
	topic := &routingv1alpha1.Topic{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: routingv1alpha1.TopicSpec{TopicName: "T_" + ns + "_orders",
			BrokerSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": c.app}},
			WriteQueueNums:       2,
			CredentialsSecretRef: &routingv1alpha1.CredentialsSecretReference{Name: secret.Name}},
	}
	if err := k8sClient.Create(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	conds := func() []metav1.Condition { return topic.Status.Conditions }
	eventually(t, "CredentialsAccepted=False AuthenticationFailed", func() error {
		return credentialsAccepted(topic, conds, metav1.ConditionFalse, routingv1alpha1.ReasonAuthenticationFailed, "check signature failed.")
	})
	eventually(t, "a Warning Event", func() error {
		return credentialsEventAbout(ns, "Topic", topic.Name, routingv1alpha1.ReasonAuthenticationFailed)
	})
	if _, err := send(rt, topic); err == nil {
		t.Fatal("a send signed with the wrong secret was stored")
	}
	for _, it := range rt.Isolated("") {
		if strings.HasPrefix(it.Broker, scope.Pods(ns).Prefix()) {
			t.Errorf("broker %s isolated (%s) for refusing detour's credentials", it.Broker, it.Reason)
		}
	}

	updateObject(t, secret, func() { secret.Data[SecretSecretKey] = []byte("s3cret") })
	eventually(t, "CredentialsAccepted=True once the Secret is right", func() error {
		return credentialsAccepted(topic, conds, metav1.ConditionTrue, routingv1alpha1.ReasonAccepted, secret.Name)
	})
	topicReady(t, topic, 2)
	for i := range 4 {
		if res, err := send(rt, topic); err != nil || res.Attempts != 1 {
			t.Fatalf("send %d with the right secret: %+v, %v", i, res, err)
		}
	}
}

// TestClusterCredentialsSignTopicCreationAndAreReported proves a Cluster's credentialsSecretRef
// signs topic creation on brokers the name servers publish, and a user without permission shows
// on the Cluster as Forbidden with the broker's remark, while a missing Secret shows as
// CredentialsUnreadable.
func TestClusterCredentialsSignTopicCreationAndAreReported(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	rt := startManager(t)
	var brokers []*brokersim.Broker
	for _, name := range []string{"broker-a", "broker-b"} {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		b.SetACL(&brokersim.ACL{Users: map[string]string{"detour": "s3cret"}})
		brokers = append(brokers, b)
	}
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", brokers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsrv.Close() })
	cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, RouteRefreshSeconds: 1,
			CredentialsSecretRef: &routingv1alpha1.CredentialsSecretReference{Name: "rocketmq-user"}}}
	if err := k8sClient.Create(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	conds := func() []metav1.Condition { return cl.Status.Conditions }
	eventually(t, "CredentialsUnreadable without the Secret", func() error {
		return credentialsAccepted(cl, conds, metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsUnreadable, "rocketmq-user")
	})

	createCredentials(t, ns, "rocketmq-user", "detour", "s3cret")
	topic := clusterTopic(t, ns, "orders", "Orders_"+strings.ReplaceAll(ns, "-", "_"), true)
	eventually(t, "the topic created on both brokers", func() error {
		for _, b := range brokers {
			found := false
			for _, tc := range b.Topics() {
				found = found || tc.Name == topic.Spec.TopicName
			}
			if !found {
				return fmt.Errorf("%s lacks the topic", b.Name())
			}
		}
		return nil
	})
	eventually(t, "CredentialsAccepted=True", func() error {
		return credentialsAccepted(cl, conds, metav1.ConditionTrue, routingv1alpha1.ReasonAccepted)
	})

	for _, b := range brokers {
		b.SetACL(&brokersim.ACL{Users: map[string]string{"detour": "s3cret"},
			NoPub: map[string][]string{"detour": {topic.Spec.TopicName}}})
	}
	eventually(t, "a routed send refused as Forbidden", func() error {
		if _, err := send(rt, topic); err == nil {
			return errors.New("send stored")
		}
		return credentialsAccepted(cl, conds, metav1.ConditionFalse, routingv1alpha1.ReasonForbidden, "has no permission to access", topic.Spec.TopicName)
	})
	eventually(t, "a Warning Event on the Cluster", func() error {
		return credentialsEventAbout(ns, "Cluster", cl.Name, routingv1alpha1.ReasonForbidden)
	})
}
