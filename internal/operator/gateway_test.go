package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// answer is a decoded gateway response.
type answer struct {
	status int
	ok     gateway.SendResponse
	err    gateway.ErrorResponse
	header http.Header
	// closes: the answer ended its connection (Connection: close, which the client strips).
	closes bool
}

func postMessage(t *testing.T, c *http.Client, url, contentType, token string, body []byte, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return doRequest(t, c, req)
}

func doRequest(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, closes: res.Close}
	target := any(&a.err)
	if res.StatusCode == http.StatusOK {
		target = &a.ok
	}
	if err := json.Unmarshal(data, target); err != nil {
		t.Fatalf("%s %s: status %d, body %q is not JSON: %v", req.Method, req.URL, res.StatusCode, data, err)
	}
	return a
}

func messagesURL(base, ns, name string) string {
	return fmt.Sprintf("%s/v1/namespaces/%s/topics/%s/messages", base, ns, name)
}

// storedCounts reports how often each msgId is stored over all brokers.
func storedCounts(brokers ...*brokersim.Broker) map[string]int {
	out := map[string]int{}
	for _, b := range brokers {
		for k, n := range b.StoredByUniqKey() {
			out[k] += n
		}
	}
	return out
}

// TestGatewaySendsThroughTheOperator proves the whole path: a Topic resource and broker Pods in
// the API server, the controllers routing the runtime, and gateway requests answered with each
// status code, every 200 stored on a broker.
func TestGatewaySendsThroughTheOperator(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	good := []*brokersim.Broker{
		startBroker(t, ns, "gw-a", map[string]string{"app": "gw-good"}),
		startBroker(t, ns, "gw-b", map[string]string{"app": "gw-good"}),
	}
	dead := startBroker(t, ns, "gw-dead", map[string]string{"app": "gw-dead"})
	createTopic(t, ns, "orders", "GatewayOrders", "gw-good")
	createTopic(t, ns, "doomed", "GatewayDoomed", "gw-dead")

	op := startOperator(t, adminConfig, testOptions(t, ns))
	op.waitForRoute(t, "GatewayOrders", 2)
	op.waitForRoute(t, "GatewayDoomed", 1)
	dead.SetFault(brokersim.Fault{Refuse: true})

	base := op.gw.URL()
	c := &http.Client{}
	cases := []struct {
		name        string
		url         string
		contentType string
		body        []byte
		headers     map[string]string
		wantStatus  int
		wantCode    string
		wantText    string
	}{
		{"raw message with headers", messagesURL(base, ns, "orders"), "text/plain", []byte("order 1"),
			map[string]string{gateway.HeaderTags: "created", gateway.HeaderKeys: "order-1"}, http.StatusOK, "", ""},
		{"JSON message", messagesURL(base, ns, "orders"), "application/json",
			[]byte(`{"bodyText":"order 2","tags":"paid","keys":["order-2"],"properties":{"region":"eu"}}`), nil, http.StatusOK, "", ""},
		{"empty body", messagesURL(base, ns, "orders"), "text/plain", nil, nil,
			http.StatusBadRequest, gateway.CodeInvalidMessage, "the message body length is zero"},
		{"unknown Topic", messagesURL(base, ns, "refunds"), "text/plain", []byte("x"), nil,
			http.StatusNotFound, gateway.CodeTopicNotFound, `Topic "refunds" not found`},
		{"namespace the operator does not watch", messagesURL(base, "default", "orders"), "text/plain", []byte("x"), nil,
			http.StatusNotFound, gateway.CodeTopicNotFound, `not found in namespace "default"`},
		{"too large", messagesURL(base, ns, "orders"), "text/plain", bytes.Repeat([]byte("x"), producer.MaxMessageSize+1), nil,
			http.StatusRequestEntityTooLarge, gateway.CodeMessageTooLarge, "MAX: 4194304"},
		{"every attempt fails", messagesURL(base, ns, "doomed"), "text/plain", []byte("x"), nil,
			http.StatusServiceUnavailable, gateway.CodeSendFailed, "BrokersSent: [gw-dead"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := postMessage(t, c, tc.url, tc.contentType, "", tc.body, tc.headers)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d (%+v), want %d", a.status, a.err, tc.wantStatus)
			}
			if tc.wantStatus != http.StatusOK {
				if a.err.Code != tc.wantCode || !strings.Contains(a.err.Error, tc.wantText) {
					t.Fatalf("error %+v, want code %s with %q", a.err, tc.wantCode, tc.wantText)
				}
				if tc.wantCode == gateway.CodeSendFailed && (a.err.Attempts != 2 || len(a.err.BrokersTried) != 2) {
					t.Fatalf("attempts %d, brokers tried %v; want the policy's 2 attempts named", a.err.Attempts, a.err.BrokersTried)
				}
				return
			}
			if a.ok.Topic != "GatewayOrders" || a.ok.MsgID == "" || a.ok.Attempts != 1 {
				t.Fatalf("answer %+v, want topic GatewayOrders, a msgId and one attempt", a.ok)
			}
			if n := storedCounts(good...)[a.ok.MsgID]; n != 1 {
				t.Fatalf("msgId %s stored %d times, want once", a.ok.MsgID, n)
			}
		})
	}

	t.Run("wrong method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPut, messagesURL(base, ns, "orders"), strings.NewReader("x"))
		a := doRequest(t, c, req)
		if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "POST" || a.err.Code != gateway.CodeMethodNotAllowed {
			t.Fatalf("PUT: %d %+v Allow=%q; want 405 with Allow: POST", a.status, a.err, a.header.Get("Allow"))
		}
	})
}

// TestGatewayAuthUsesKubernetesIdentities proves that with --gateway-auth the gateway refuses
// callers without a valid token (401) and callers whose RBAC does not allow create on
// topics/messages (403), and serves a service account that a Role allows, over HTTPS.
func TestGatewayAuthUsesKubernetesIdentities(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	b := startBroker(t, ns, "auth-a", map[string]string{"app": "auth"})
	createTopic(t, ns, "orders", "AuthOrders", "auth")
	senderToken := serviceAccountToken(t, ns, "sender")
	strangerToken := serviceAccountToken(t, ns, "stranger")
	grantSend(t, ns, "sender", "orders")

	op := startOperator(t, adminConfig, testOptions(t, ns, "--gateway-auth=true", "--gateway-secure=true"))
	op.waitForRoute(t, "AuthOrders", 1)
	if !strings.HasPrefix(op.gw.URL(), "https://") {
		t.Fatalf("gateway URL %s, want HTTPS", op.gw.URL())
	}
	c := insecureClient()
	url := messagesURL(op.gw.URL(), ns, "orders")
	cases := []struct {
		name       string
		token      string
		wantStatus int
		wantCode   string
	}{
		{"no token", "", http.StatusUnauthorized, gateway.CodeUnauthorized},
		{"a token the API server never issued", "not-a-token", http.StatusUnauthorized, gateway.CodeUnauthorized},
		{"a service account without the grant", strangerToken, http.StatusForbidden, gateway.CodeForbidden},
		{"a service account allowed to create topics/messages", senderToken, http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := postMessage(t, c, url, "text/plain", tc.token, []byte("secret order"), nil)
			if a.status != tc.wantStatus || (tc.wantCode != "" && a.err.Code != tc.wantCode) {
				t.Fatalf("status %d %+v, want %d %s", a.status, a.err, tc.wantStatus, tc.wantCode)
			}
			if tc.wantStatus == http.StatusOK && storedCounts(b)[a.ok.MsgID] != 1 {
				t.Fatalf("accepted message %s not stored once", a.ok.MsgID)
			}
		})
	}
	if got := b.Stats().MessagesStored; got != 1 {
		t.Errorf("%d messages stored, want only the allowed caller's", got)
	}
}

// serviceAccountToken creates a service account and a token for it with the TokenRequest API.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// grantSend lets a service account send to one Topic, as a user would with a Role.
func grantSend(t *testing.T, ns, sa, topic string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "send-" + topic},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{kubeauth.AuthGroup}, Resources: []string{"topics/messages"},
			Verbs: []string{"create"}, ResourceNames: []string{topic}}},
	}
	if err := k8sClient.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "send-" + topic + "-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if err := k8sClient.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}
