package operator

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/pkg/brokersim"
)

// clusterMessagesURL is the gateway's path of a RocketMQ topic sent through a Cluster.
func clusterMessagesURL(base, ns, cluster, topic string) string {
	return fmt.Sprintf("%s/v1/namespaces/%s/clusters/%s/topics/%s/messages", base, ns, cluster, topic)
}

// TestGatewaySendsAnyTopicAClusterServes proves the gateway's Cluster path through the manager,
// with --gateway-auth, against a brokersim name server and broker: a topic no Topic declares,
// which the name server publishes, is sent through the Cluster serving undeclared topics by a
// caller bound to the shipped detour-cluster-sender ClusterRole and stored, as is a declared
// topic of that Cluster; a caller bound to detour-topic-sender alone sends to the Topic and is
// refused 403 on the Cluster's path; a Cluster serving declared topics only, a topic the name
// server does not publish and a Cluster that does not exist are 404 saying why; a topic name
// RocketMQ refuses is 400; a Cluster whose name servers do not answer is 503.
func TestGatewaySendsAnyTopicAClusterServes(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	undeclared, declared := "GatewayUndeclared-"+ns, "GatewayDeclared-"+ns
	broker := clusterOfOneBroker(t, ns, "gwc-a", undeclared, declared)
	sender, topicOnly := serviceAccountToken(t, ns, "sender"), serviceAccountToken(t, ns, "topic-only")
	bindShippedRole(t, ns, "sender", "gateway_cluster_sender_role.yaml")
	bindShippedRole(t, ns, "topic-only", "gateway_sender_role.yaml")

	op := startOperator(t, adminConfig, testOptions(t, ns, "--gateway-auth=true", "--gateway-secure=true"))
	op.waitForRoute(t, declared, 1)
	eventually(t, "Cluster prod to be Ready", func() error {
		var c routingv1alpha1.Cluster
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "prod"}, &c); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, routingv1alpha1.ConditionReady) {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	base, c := op.gw.URL(), insecureClient()
	for _, tc := range []struct {
		name, url, token string
		status           int
		code, text       string
	}{
		{"a topic no Topic declares, through the Cluster serving it", clusterMessagesURL(base, ns, "prod", undeclared), sender,
			http.StatusOK, "", ""},
		{"a topic a Topic declares on the Cluster", clusterMessagesURL(base, ns, "prod", declared), sender, http.StatusOK, "", ""},
		{"the Topic, by a caller allowed on topics/messages", messagesURL(base, ns, "declared"), topicOnly, http.StatusOK, "", ""},
		{"a caller allowed on topics/messages but not clusters/messages", clusterMessagesURL(base, ns, "prod", undeclared), topicOnly,
			http.StatusForbidden, gateway.CodeForbidden, `may not create clusters/messages "prod"`},
		{"no token", clusterMessagesURL(base, ns, "prod", undeclared), "", http.StatusUnauthorized, gateway.CodeUnauthorized, ""},
		{"a Cluster serving declared topics only", clusterMessagesURL(base, ns, "legacy", undeclared), sender,
			http.StatusNotFound, gateway.CodeTopicNotFound, "which serves declared topics only (spec.undeclaredTopics)"},
		{"a topic the name server does not publish", clusterMessagesURL(base, ns, "prod", "Nowhere"), sender,
			http.StatusNotFound, gateway.CodeTopicNotFound, "do not publish topic Nowhere"},
		{"no such Cluster", clusterMessagesURL(base, ns, "nope", undeclared), sender,
			http.StatusNotFound, gateway.CodeTopicNotFound, "no Cluster " + ns + "/nope"},
		{"a topic name RocketMQ refuses", clusterMessagesURL(base, ns, "prod", "a.b"), sender,
			http.StatusBadRequest, gateway.CodeInvalidMessage, "contains illegal characters"},
		{"a Cluster whose name servers do not answer", clusterMessagesURL(base, ns, "dark", undeclared), sender,
			http.StatusServiceUnavailable, gateway.CodeUnavailable, "the name servers did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := postMessage(t, c, tc.url, "text/plain", tc.token, []byte("order through a Cluster"), nil)
			if a.status != tc.status || a.err.Code != tc.code || !strings.Contains(a.err.Error, tc.text) {
				t.Fatalf("answered %d %+v, want %d %s containing %q", a.status, a.err, tc.status, tc.code, tc.text)
			}
			if tc.status != http.StatusOK {
				return
			}
			if a.ok.Broker != "gwc-a" || storedCounts(broker)[a.ok.MsgID] != 1 {
				t.Fatalf("answer %+v: want broker gwc-a, named as RocketMQ names it, and the message stored once", a.ok)
			}
		})
	}
	if got := broker.Stats().MessagesStored; got != 3 {
		t.Errorf("%d messages stored, want the three sends answered 200", got)
	}
}

// clusterOfOneBroker starts a brokersim broker holding the topics behind a brokersim name server,
// and creates in ns: FaultPolicy "shared"; Cluster "prod" on that name server serving undeclared
// topics under it; Cluster "legacy" on it serving declared topics only; Cluster "dark" serving
// undeclared topics from a name server nobody runs; and Topic "declared" declaring the last topic
// on prod.
func clusterOfOneBroker(t *testing.T, ns, name string, topics ...string) *brokersim.Broker {
	t.Helper()
	b, err := brokersim.StartBroker(name, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, topic := range topics {
		b.CreateTopic(topic, 2)
	}
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsrv.Close() })
	shared := &routingv1alpha1.FaultPolicyReference{Name: "shared"}
	cluster := func(name, nameServer string, undeclared routingv1alpha1.UndeclaredTopicsPolicy) *routingv1alpha1.Cluster {
		c := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nameServer}, UndeclaredTopics: undeclared}}
		if undeclared == routingv1alpha1.UndeclaredTopicsServe {
			c.Spec.FaultPolicyRef = shared
		}
		return c
	}
	for _, o := range []client.Object{
		&routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: routingv1alpha1.FaultPolicySpec{Retry: fastRetries}},
		cluster("prod", nsrv.Addr(), routingv1alpha1.UndeclaredTopicsServe),
		cluster("legacy", nsrv.Addr(), routingv1alpha1.UndeclaredTopicsRefuse),
		cluster("dark", freeAddr(t), routingv1alpha1.UndeclaredTopicsServe),
		&routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "declared"},
			Spec: routingv1alpha1.TopicSpec{TopicName: topics[len(topics)-1], ClusterRef: &routingv1alpha1.ClusterReference{Name: "prod"},
				FaultPolicyRef: shared}},
	} {
		if err := k8sClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// bindShippedRole creates the ClusterRole that config/rbac/file defines, named as kustomize
// names it (detour-...), once per control plane, and binds it to the service account sa in ns as
// a user would: the test then proves the shipped rules grant what the gateway asks.
func bindShippedRole(t *testing.T, ns, sa, file string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	role.Name = "detour-" + role.Name
	ctx := context.Background()
	if err := k8sClient.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name + "-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if err := k8sClient.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}
