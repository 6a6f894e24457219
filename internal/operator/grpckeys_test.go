package operator

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestAccessKeysAreReadFromTheSecretsEntries proves how an access keys Secret reads: each key's
// secret and topics, * for all, a key without topics limited to authenticating, and an empty
// secret left out and named.
func TestAccessKeysAreReadFromTheSecretsEntries(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want grpcfront.StaticAccessKeys
		err  string
	}{
		{"a key with its topics", map[string]string{"app": "s", "app.topics": "Orders, Refunds,,"},
			grpcfront.StaticAccessKeys{"app": {Secret: "s", Topics: []string{"Orders", "Refunds"}}}, ""},
		{"a key for every topic", map[string]string{"admin": "s", "admin.topics": "*"},
			grpcfront.StaticAccessKeys{"admin": {Secret: "s", Topics: []string{"*"}}}, ""},
		{"a key without topics", map[string]string{"probe": "s"},
			grpcfront.StaticAccessKeys{"probe": {Secret: "s"}}, ""},
		{"topics without their key", map[string]string{"gone.topics": "Orders"}, grpcfront.StaticAccessKeys{}, ""},
		{"an empty secret", map[string]string{"open": "", "app": "s"},
			grpcfront.StaticAccessKeys{"app": {Secret: "s"}}, "open have an empty secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			got, err := accessKeysOf(s)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("keys %v, want %v", got, tc.want)
			}
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// TestTheAccessKeysFlagNamesASecretTheManagerWatches proves --grpc-access-keys-secret must be
// namespace/name, within --namespace when that is set.
func TestTheAccessKeysFlagNamesASecretTheManagerWatches(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--grpc-access-keys-secret=shop/keys"}, ""},
		{[]string{"--grpc-access-keys-secret=shop/keys", "--namespace=shop"}, ""},
		{[]string{"--grpc-access-keys-secret=keys"}, "must be namespace/name"},
		{[]string{"--grpc-access-keys-secret=shop/a/b"}, "must be namespace/name"},
		{[]string{"--grpc-access-keys-secret=other/keys", "--namespace=shop"}, "outside --namespace shop"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(tc.args, new(strings.Builder))
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// signedContext signs a call as the Java SDK does, with dateTime as its x-mq-date-time.
func signedContext(ctx context.Context, accessKey, secret, dateTime string) context.Context {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(dateTime))
	return metadata.AppendToOutgoingContext(ctx, "x-mq-date-time", dateTime, "authorization",
		fmt.Sprintf("MQv2-HMAC-SHA1 Credential=%s,SignedHeaders=x-mq-date-time,Signature=%X", accessKey, mac.Sum(nil)))
}

// TestGRPCEndpointChecksCallsAgainstTheAccessKeysSecret proves the manager's endpoint, given
// --grpc-access-keys-secret, refuses every call while the Secret is missing, then serves the
// calls its keys sign for their topics only, and refuses the old secret once it is rotated.
func TestGRPCEndpointChecksCallsAgainstTheAccessKeysSecret(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	brokers := []*brokersim.Broker{startBroker(t, ns, "keys-a", map[string]string{"app": "keys-orders"})}
	createTopic(t, ns, "orders", "KeyedOrders", "keys-orders")
	op := startOperator(t, adminConfig, testOptions(t, ns, "--grpc-access-keys-secret="+ns+"/grpc-keys"))
	op.waitForRoute(t, "KeyedOrders", 1)

	c := dialGRPC(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "keys-test@1")
	const dateTime = "20260301T101500Z"
	send := func(ctx context.Context, topic string) *rmqpb.Status {
		t.Helper()
		r, err := c.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
			Topic: &rmqpb.Resource{Name: topic}, Body: []byte("keyed"),
			SystemProperties: &rmqpb.SystemProperties{MessageId: fmt.Sprintf("01C0FFEE%024d", time.Now().UnixNano()), MessageType: rmqpb.MessageType_NORMAL},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus()
	}
	wantCode := func(what string, want rmqpb.Code, says string, st func() *rmqpb.Status) {
		t.Helper()
		eventually(t, what, func() error {
			if got := st(); got.GetCode() != want || !strings.Contains(got.GetMessage(), says) {
				return fmt.Errorf("status %v, want %v saying %q", got, want, says)
			}
			return nil
		})
	}

	app := signedContext(ctx, "app", "first", dateTime)
	wantCode("a signed send before the Secret exists", rmqpb.Code_UNAUTHORIZED, `"app" is not known`, func() *rmqpb.Status { return send(app, "KeyedOrders") })

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grpc-keys"},
		Data: map[string][]byte{"app": []byte("first"), "app.topics": []byte("KeyedOrders")}}
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	wantCode("a signed send once the Secret exists", rmqpb.Code_OK, "OK", func() *rmqpb.Status { return send(app, "KeyedOrders") })
	if st := send(ctx, "KeyedOrders"); st.GetCode() != rmqpb.Code_UNAUTHORIZED {
		t.Fatalf("an unsigned send got %v", st)
	}
	route, err := c.QueryRoute(app, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "Refunds"}})
	if err != nil || route.GetStatus().GetCode() != rmqpb.Code_FORBIDDEN {
		t.Fatalf("the route of a topic the key may not use: %v %v", route, err)
	}

	secret.Data["app"] = []byte("second")
	if err := k8sClient.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// Heartbeats, not sends, wait for the rotation: a send the old secret still signs is stored.
	wantCode("the old secret after the rotation", rmqpb.Code_UNAUTHORIZED, "signature does not match", func() *rmqpb.Status {
		r, err := c.Heartbeat(app, &rmqpb.HeartbeatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus()
	})
	if st := send(signedContext(ctx, "app", "second", dateTime), "KeyedOrders"); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("the new secret got %v", st)
	}
	total := 0
	for _, n := range storedCounts(brokers...) {
		total += n
	}
	if total != 2 {
		t.Fatalf("%d messages stored, want the two signed with the right secret", total)
	}
}
