package grpcfront

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/detourmq/detour/pkg/rmqpb"
)

// Keys of the signed test bed: orders may send to Orders only, admin everywhere.
const (
	ordersKey    = "orders-app"
	ordersSecret = "s3cr3t-orders"
	adminKey     = "admin"
	adminSecret  = "s3cr3t-admin"
	failingKey   = "unreadable"
)

// testKeys are the bed's keys; failingKey's lookup fails as an unreadable Secret would.
type testKeys struct{ StaticAccessKeys }

func (k testKeys) LookupAccessKey(ctx context.Context, id string) (AccessKey, bool, error) {
	if id == failingKey {
		return AccessKey{}, false, errors.New("the keys' Secret cannot be read")
	}
	return k.StaticAccessKeys.LookupAccessKey(ctx, id)
}

func newSignedTestBed(t *testing.T) *testBed {
	return newTestBed(t, func(o *Options) {
		o.Credentials = testKeys{StaticAccessKeys{
			ordersKey: {Secret: ordersSecret, Topics: []string{"Orders"}},
			adminKey:  {Secret: adminSecret, Topics: []string{AllTopics}},
		}}
	})
}

// hexHMAC signs data with key as the Java SDK does: HMAC-SHA1 in upper-case hex. Written apart
// from the endpoint's code so that a mistake in one is not repeated in the other.
func hexHMAC(key, data string) string {
	mac := hmac.New(sha1.New, []byte(key))
	mac.Write([]byte(data))
	return fmt.Sprintf("%X", mac.Sum(nil))
}

// javaAuthorization is the authorization header as the Java SDK writes it.
func javaAuthorization(accessKey, signature string) string {
	return "MQv2-HMAC-SHA1 Credential=" + accessKey + ",SignedHeaders=x-mq-date-time,Signature=" + signature
}

const testDateTime = "20260301T101500Z"

// signedAs is a call context of the SDKs' headers plus the given signing headers (pairs).
func signedAs(t *testing.T, pairs ...string) context.Context {
	return metadata.AppendToOutgoingContext(asClient(t), pairs...)
}

// signed is a call context signed with accessKey and secret as the Java SDK signs.
func signed(t *testing.T, accessKey, secret string) context.Context {
	return signedAs(t, "x-mq-date-time", testDateTime, "authorization", javaAuthorization(accessKey, hexHMAC(secret, testDateTime)))
}

// callAs makes one call of a kind with ctx and returns its status.
func callAs(t *testing.T, bed *testBed, ctx context.Context, kind, topic string) *rmqpb.Status {
	t.Helper()
	var st *rmqpb.Status
	var err error
	switch kind {
	case "send":
		var r *rmqpb.SendMessageResponse
		r, err = bed.client.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{newMessage(topic, "signed")}})
		st = r.GetStatus()
		for _, e := range r.GetEntries() {
			if e.GetStatus().GetCode() != st.GetCode() {
				t.Fatalf("entry %v under answer %v", e.GetStatus(), st)
			}
		}
	case "route":
		var r *rmqpb.QueryRouteResponse
		r, err = bed.client.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: topic}})
		st = r.GetStatus()
	case "heartbeat":
		var r *rmqpb.HeartbeatResponse
		r, err = bed.client.Heartbeat(ctx, &rmqpb.HeartbeatRequest{})
		st = r.GetStatus()
	case "terminate":
		var r *rmqpb.NotifyClientTerminationResponse
		r, err = bed.client.NotifyClientTermination(ctx, &rmqpb.NotifyClientTerminationRequest{})
		st = r.GetStatus()
	case "assignment":
		var r *rmqpb.QueryAssignmentResponse
		r, err = bed.client.QueryAssignment(ctx, &rmqpb.QueryAssignmentRequest{Topic: &rmqpb.Resource{Name: topic}})
		st = r.GetStatus()
	case "telemetry":
		st, err = telemetryAnswer(ctx, bed)
	default:
		t.Fatalf("no call %q", kind)
	}
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return st
}

// telemetryAnswer announces a producer's Settings and returns the status of the first answer.
func telemetryAnswer(ctx context.Context, bed *testBed) (*rmqpb.Status, error) {
	stream, err := bed.client.Telemetry(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.CloseSend() }()
	producerType := rmqpb.ClientType_PRODUCER
	if err := stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		ClientType: &producerType, PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{}},
	}}}); err != nil && !errors.Is(err, io.EOF) {
		// io.EOF: the endpoint answered and ended the stream before the Settings went out (a
		// refusal does not wait for them); its answer is still there to read.
		return nil, err
	}
	got, err := stream.Recv()
	return got.GetStatus(), err
}

// TestSignedCallsAreServedAndOthersRefusedSayingWhy proves that with access keys set, a call
// signed as the SDKs sign is served, and every other call is refused: UNAUTHORIZED saying what
// is wrong with its signature, FORBIDDEN naming a topic its key may not use; no refusal echoes a
// secret, and no refused send reaches a broker.
func TestSignedCallsAreServedAndOthersRefusedSayingWhy(t *testing.T) {
	bed := newSignedTestBed(t)
	good := hexHMAC(ordersSecret, testDateTime)
	dt := func(v string) []string { return []string{"x-mq-date-time", v} }
	withAuth := func(v string) []string { return append(dt(testDateTime), "authorization", v) }
	for _, tc := range []struct {
		name    string
		headers []string // nil: signed with ordersKey as the Java SDK signs
		kind    string
		topic   string
		want    rmqpb.Code
		says    string
	}{
		{"a signed send is stored", nil, "send", "Orders", rmqpb.Code_OK, "OK"},
		{"a signed route query is answered", nil, "route", "Orders", rmqpb.Code_OK, "OK"},
		{"a signed heartbeat is answered", nil, "heartbeat", "", rmqpb.Code_OK, "OK"},
		{"a signed telemetry stream gets its settings", nil, "telemetry", "", rmqpb.Code_OK, "OK"},
		{"a signed termination is answered", nil, "terminate", "", rmqpb.Code_OK, "OK"},
		{"a signed consumer call is past the check", nil, "assignment", "Orders", rmqpb.Code_UNSUPPORTED, "Proxy"},
		{"a lower-case hex signature with spaced items is accepted",
			withAuth("MQv2-HMAC-SHA1 Credential=" + ordersKey + ", SignedHeaders=x-mq-date-time, Signature=" + strings.ToLower(good)),
			"send", "Orders", rmqpb.Code_OK, "OK"},
		{"a credential's scope after the access key is ignored",
			withAuth(javaAuthorization(ordersKey+"/20260301/cn-hangzhou", good)), "send", "Orders", rmqpb.Code_OK, "OK"},
		{"a key for every topic sends to any", []string{"x-mq-date-time", testDateTime,
			"authorization", javaAuthorization(adminKey, hexHMAC(adminSecret, testDateTime))}, "send", "Mixed", rmqpb.Code_OK, "OK"},

		{"an unsigned send is unauthorized", []string{}, "send", "Orders", rmqpb.Code_UNAUTHORIZED, "missing authorization header"},
		{"an unsigned route query is unauthorized", []string{}, "route", "Orders", rmqpb.Code_UNAUTHORIZED, "missing authorization header"},
		{"an unsigned heartbeat is unauthorized", []string{}, "heartbeat", "", rmqpb.Code_UNAUTHORIZED, "missing authorization header"},
		{"an unsigned telemetry stream is unauthorized", []string{}, "telemetry", "", rmqpb.Code_UNAUTHORIZED, "missing authorization header"},
		{"an unsigned termination is unauthorized", []string{}, "terminate", "", rmqpb.Code_UNAUTHORIZED, "missing authorization header"},
		{"an unsigned consumer call is unauthorized", []string{}, "assignment", "Orders", rmqpb.Code_UNAUTHORIZED, "missing authorization header"},
		{"a signature without its date-time", []string{"authorization", javaAuthorization(ordersKey, good)}, "send", "Orders",
			rmqpb.Code_UNAUTHORIZED, "missing x-mq-date-time header"},
		{"a date-time given twice", append(withAuth(javaAuthorization(ordersKey, good)), dt(testDateTime)...), "send", "Orders",
			rmqpb.Code_UNAUTHORIZED, "x-mq-date-time header is given more than once"},
		{"an authorization given twice", append(withAuth(javaAuthorization(ordersKey, good)), "authorization", javaAuthorization(ordersKey, good)),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "authorization header is given more than once"},
		{"an oversized date-time", append([]string{"authorization", javaAuthorization(ordersKey, good)}, dt(strings.Repeat("2", 65))...),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "over the limit of 64"},
		{"an oversized authorization", withAuth(javaAuthorization(ordersKey, good) + strings.Repeat(",Pad=x", 8000)),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "over the limit of 1024"},
		{"no algorithm", withAuth("Credential=" + ordersKey), "send", "Orders", rmqpb.Code_UNAUTHORIZED, "followed by its items"},
		{"another algorithm", withAuth(strings.Replace(javaAuthorization(ordersKey, good), "SHA1", "SHA256", 1)),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "algorithm is not MQv2-HMAC-SHA1"},
		{"an item without a value", withAuth("MQv2-HMAC-SHA1 Credential=" + ordersKey + ",Signed,Signature=" + good),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "item 1 of the authorization header is not Name=value"},
		{"no credential", withAuth("MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time,Signature=" + good),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "names no access key"},
		{"an empty credential", withAuth(javaAuthorization("", good)), "send", "Orders", rmqpb.Code_UNAUTHORIZED, "names no access key"},
		{"no signature", withAuth("MQv2-HMAC-SHA1 Credential=" + ordersKey + ",SignedHeaders=x-mq-date-time"),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "has no Signature"},
		{"a signature not in hex", withAuth(javaAuthorization(ordersKey, "zz"+good[2:])), "send", "Orders", rmqpb.Code_UNAUTHORIZED, "not 40 hex digits"},
		{"a signature cut short", withAuth(javaAuthorization(ordersKey, good[:38])), "send", "Orders", rmqpb.Code_UNAUTHORIZED, "not 40 hex digits"},
		{"a credential given twice", withAuth(javaAuthorization(ordersKey, good) + ",Credential=" + adminKey),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "gives Credential twice"},
		{"other signed headers", withAuth(strings.Replace(javaAuthorization(ordersKey, good), "=x-mq-date-time", "=x-mq-client-id", 1)),
			"send", "Orders", rmqpb.Code_UNAUTHORIZED, "verifies signatures of x-mq-date-time only"},
		{"an unknown access key", withAuth(javaAuthorization("nobody", good)), "send", "Orders", rmqpb.Code_UNAUTHORIZED, `access key "nobody" is not known`},
		{"a wrong secret", withAuth(javaAuthorization(ordersKey, hexHMAC("guessed", testDateTime))), "send", "Orders",
			rmqpb.Code_UNAUTHORIZED, `signature does not match access key "orders-app"`},
		{"a signature of another date-time", withAuth(javaAuthorization(ordersKey, hexHMAC(ordersSecret, "20260301T101501Z"))),
			"route", "Orders", rmqpb.Code_UNAUTHORIZED, "signature does not match"},
		{"keys that cannot be read fail the call as the endpoint's", withAuth(javaAuthorization(failingKey, good)),
			"heartbeat", "", rmqpb.Code_INTERNAL_SERVER_ERROR, "cannot read its access keys"},

		{"a send to a topic the key may not use is forbidden", nil, "send", "Mixed", rmqpb.Code_FORBIDDEN, "may not send to topic Mixed"},
		{"a route of a topic the key may not use is forbidden", nil, "route", "Mixed", rmqpb.Code_FORBIDDEN, "may not send to topic Mixed"},
		{"an unknown topic the key may not use is forbidden, not reported missing", nil, "route", "Nowhere",
			rmqpb.Code_FORBIDDEN, "may not send to topic Nowhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := signed(t, ordersKey, ordersSecret)
			if tc.headers != nil {
				ctx = signedAs(t, tc.headers...)
			}
			st := callAs(t, bed, ctx, tc.kind, tc.topic)
			if st.GetCode() != tc.want || !strings.Contains(st.GetMessage(), tc.says) {
				t.Fatalf("status %v, want %v saying %q", st, tc.want, tc.says)
			}
			for _, secret := range []string{ordersSecret, adminSecret} {
				if strings.Contains(st.GetMessage(), secret) {
					t.Fatalf("the answer %q echoes a secret", st.GetMessage())
				}
			}
		})
	}
	// Only the three accepted sends to Orders and the one to Mixed reached a broker (the third
	// broker refuses connections).
	if sends := bed.a.Stats().SendsReceived + bed.b.Stats().SendsReceived; sends > 4 {
		t.Fatalf("brokers got %d sends; refused requests reached them", sends)
	}
}

// TestSignaturesOverTheWrongThingAreRefused is the canary of the signature check: signatures
// that a lax check would accept (over another header, with key and data swapped, with the
// access key as the secret, the right one with a byte flipped) are all refused.
func TestSignaturesOverTheWrongThingAreRefused(t *testing.T) {
	bed := newSignedTestBed(t)
	right := hexHMAC(ordersSecret, testDateTime)
	flipped := []byte(right)
	if flipped[0] == '0' {
		flipped[0] = '1'
	} else {
		flipped[0] = '0'
	}
	for name, sig := range map[string]string{
		"over the client id":      hexHMAC(ordersSecret, "test-client@1"),
		"key and data swapped":    hexHMAC(testDateTime, ordersSecret),
		"with the access key":     hexHMAC(ordersKey, testDateTime),
		"over the header's name":  hexHMAC(ordersSecret, "x-mq-date-time"),
		"one bit off":             string(flipped),
		"another key's signature": hexHMAC(adminSecret, testDateTime),
	} {
		t.Run(name, func(t *testing.T) {
			if sig == right {
				t.Fatal("the canary's signature is the right one")
			}
			ctx := signedAs(t, "x-mq-date-time", testDateTime, "authorization", javaAuthorization(ordersKey, sig))
			if st := callAs(t, bed, ctx, "send", "Orders"); st.GetCode() != rmqpb.Code_UNAUTHORIZED {
				t.Fatalf("a signature %s got %v", name, st)
			}
		})
	}
	// The right signature passes at once, so the refusals above are the signature's.
	if st := callAs(t, bed, signed(t, ordersKey, ordersSecret), "send", "Orders"); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("the right signature got %v", st)
	}
}

// TestAnOldDateTimeIsAcceptedAsTheProxyDoes proves there is no window on the signed date-time:
// the Proxy checks none, and the Java SDK writes its local time behind the literal Z.
func TestAnOldDateTimeIsAcceptedAsTheProxyDoes(t *testing.T) {
	bed := newSignedTestBed(t)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).Format("20060102T150405Z")
	ctx := signedAs(t, "x-mq-date-time", old, "authorization", javaAuthorization(ordersKey, hexHMAC(ordersSecret, old)))
	if st := callAs(t, bed, ctx, "heartbeat", ""); st.GetCode() != rmqpb.Code_OK {
		t.Fatalf("a call signed in 2020 got %v", st)
	}
}
