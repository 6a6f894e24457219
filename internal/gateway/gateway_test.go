package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// testBed is a gateway in front of a real producer runtime sending to brokersim brokers over
// loopback: Topic "orders" in namespace "shop" is RocketMQ topic "Orders" on a healthy broker,
// Topic "doomed" is topic "Doomed" on a broker that refuses connections, and Topic "unrouted"
// names a RocketMQ topic the runtime has no route for.
type testBed struct {
	srv     *Server
	handler http.Handler
	good    *brokersim.Broker
	rt      *producer.Runtime
}

func newTestBed(t testing.TB, auth Authorizer) *testBed {
	t.Helper()
	good, err := brokersim.StartBroker("broker-good", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close() })
	dead, err := brokersim.StartBroker("broker-dead", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	dead.SetFault(brokersim.Fault{Refuse: true})

	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	rt.SetBroker(producer.Broker{Name: good.Name(), Addr: good.Addr(), Ready: true})
	rt.SetBroker(producer.Broker{Name: dead.Name(), Addr: dead.Addr(), Ready: true})
	for topic, broker := range map[string]string{"Orders": good.Name(), "Doomed": dead.Name()} {
		if err := rt.SetRoute(producer.Route{Topic: topic, Brokers: []producer.BrokerQueues{{Broker: broker, WriteQueues: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	topics := map[string]string{"shop/orders": "Orders", "shop/doomed": "Doomed", "shop/unrouted": "Unrouted"}
	srv, err := New(Options{
		Addr:   "127.0.0.1:0",
		Sender: rt,
		Topics: front.NameResolverFunc(func(_ context.Context, ns, name string) (front.Target, error) {
			if topic, ok := topics[ns+"/"+name]; ok {
				return front.Target{Topic: topic}, nil
			}
			return front.Target{}, front.ErrTopicNotFound
		}),
		Authorizer: auth,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &testBed{srv: srv, handler: srv.Handler(), good: good, rt: rt}
}

func (b *testBed) do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

const ordersPath = "/v1/namespaces/shop/topics/orders/messages"

func post(path, contentType string, body []byte, headers map[string]string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		req.Header.Add(k, v)
	}
	return req
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// storedMessage finds the message with the given msgId on the good broker.
func (b *testBed) storedMessage(t *testing.T, res SendResponse) brokersim.StoredMessage {
	t.Helper()
	for _, m := range b.good.Messages(res.Topic, res.QueueID) {
		if m.UniqKey == res.MsgID {
			return m
		}
	}
	t.Fatalf("message %s not stored on %s queue %d", res.MsgID, res.Topic, res.QueueID)
	return brokersim.StoredMessage{}
}

// TestSendStoresTheMessageAsRequested proves that both request forms reach the broker with body,
// tags, keys and properties as the caller gave them, and that the answer says where it is.
func TestSendStoresTheMessageAsRequested(t *testing.T) {
	bed := newTestBed(t, nil)
	text := "hello"
	cases := []struct {
		name      string
		req       *http.Request
		wantBody  string
		wantTags  string
		wantKeys  string
		wantProps map[string]string
	}{
		{
			name: "raw body with tags, keys and properties in headers",
			req: post(ordersPath, "application/octet-stream", []byte("raw bytes"), map[string]string{
				HeaderTags: "TagA", HeaderKeys: "k1 k2", "X-Detour-Property-Order-Id": "42",
			}),
			wantBody: "raw bytes", wantTags: "TagA", wantKeys: "k1 k2", wantProps: map[string]string{"order-id": "42"},
		},
		{
			name:     "raw body without a content type",
			req:      post(ordersPath, "", []byte("plain"), nil),
			wantBody: "plain",
		},
		{
			name: "JSON with a base64 body and keys as a list",
			req: post(ordersPath, "application/json; charset=utf-8", jsonBody(t, map[string]any{
				"body": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "tags": "TagB",
				"keys": []string{"a", "b"}, "properties": map[string]string{"orderId": "7"},
			}), nil),
			wantBody: "\x00\x01\x02\xff", wantTags: "TagB", wantKeys: "a b", wantProps: map[string]string{"orderId": "7"},
		},
		{
			name:     "JSON with bodyText and keys as one string",
			req:      post(ordersPath, "application/json", jsonBody(t, JSONMessage{BodyText: &text, Keys: Keys{"x", "y"}}), nil),
			wantBody: "hello", wantKeys: "x y",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := bed.do(t, tc.req)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, body %s", res.StatusCode, body)
			}
			var sr SendResponse
			if err := json.Unmarshal(body, &sr); err != nil {
				t.Fatal(err)
			}
			if sr.MsgID == "" || sr.Topic != "Orders" || sr.Broker != "broker-good" || sr.Attempts != 1 ||
				len(sr.BrokersTried) != 1 || sr.Status != producer.StatusSendOK {
				t.Fatalf("answer %+v, want msgId, topic Orders, broker-good, one attempt, SEND_OK", sr)
			}
			m := bed.storedMessage(t, sr)
			if string(m.Body) != tc.wantBody || m.Tags != tc.wantTags || m.Keys != tc.wantKeys || m.QueueOffset != sr.QueueOffset {
				t.Errorf("stored body %q tags %q keys %q offset %d; want %q %q %q %d",
					m.Body, m.Tags, m.Keys, m.QueueOffset, tc.wantBody, tc.wantTags, tc.wantKeys, sr.QueueOffset)
			}
			for k, v := range tc.wantProps {
				if m.Properties[k] != v {
					t.Errorf("stored property %q = %q, want %q (all: %v)", k, m.Properties[k], v, m.Properties)
				}
			}
		})
	}
}

// TestRefusalsHaveTheirStatusCodes proves every way a request can fail gets its own status code
// and machine-readable code, with RocketMQ's own text for invalid messages.
func TestRefusalsHaveTheirStatusCodes(t *testing.T) {
	bed := newTestBed(t, nil)
	big := bytes.Repeat([]byte("x"), producer.MaxMessageSize+1)
	chunked := post(ordersPath, "", big, nil)
	chunked.ContentLength = -1 // as a chunked upload arrives: the size is only known by reading
	cases := []struct {
		name       string
		req        *http.Request
		wantStatus int
		wantCode   string
		wantText   string
	}{
		{"an empty body breaks RocketMQ's rules", post(ordersPath, "", nil, nil),
			http.StatusBadRequest, CodeInvalidMessage, "the message body length is zero"},
		{"JSON without a body is a null body", post(ordersPath, "application/json", []byte(`{"tags":"a"}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "the message body is null"},
		{"JSON with both body forms", post(ordersPath, "application/json", []byte(`{"body":"eA==","bodyText":"x"}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "either body (base64) or bodyText"},
		{"JSON with a body that is not base64", post(ordersPath, "application/json", []byte(`{"body":"not base64!"}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "not standard base64"},
		{"JSON with an unknown field", post(ordersPath, "application/json", []byte(`{"bodyText":"x","tag":"a"}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, `unknown field "tag"`},
		{"malformed JSON", post(ordersPath, "application/json", []byte(`{"bodyText":`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "decoding the JSON message"},
		{"keys that are neither string nor list", post(ordersPath, "application/json", []byte(`{"bodyText":"x","keys":3}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "keys must be a string or a list of strings"},
		{"an unknown Topic", post("/v1/namespaces/shop/topics/missing/messages", "", []byte("x"), nil),
			http.StatusNotFound, CodeTopicNotFound, `Topic "missing" not found in namespace "shop"`},
		{"a namespace that cannot exist", post("/v1/namespaces/Shop_1/topics/orders/messages", "", []byte("x"), nil),
			http.StatusNotFound, CodeTopicNotFound, "not found"},
		{"a path that is not the gateway's", post("/v1/topics/orders", "", []byte("x"), nil),
			http.StatusNotFound, CodeNotFound, "send with POST"},
		{"a path with .. is not redirected", post("/v1/namespaces/other/../shop/topics/orders/messages", "", []byte("x"), nil),
			http.StatusNotFound, CodeNotFound, "send with POST"},
		{"a path with // is not redirected", post("/v1/namespaces/shop//topics/orders/messages", "", []byte("x"), nil),
			http.StatusNotFound, CodeNotFound, "send with POST"},
		{"a path with . is not redirected", post("/v1/namespaces/shop/topics/orders/./messages", "", []byte("x"), nil),
			http.StatusNotFound, CodeNotFound, "send with POST"},
		{"a body over 4 MiB", post(ordersPath, "", big, nil),
			http.StatusRequestEntityTooLarge, CodeMessageTooLarge, "MAX: 4194304"},
		{"a chunked body over 4 MiB", chunked,
			http.StatusRequestEntityTooLarge, CodeMessageTooLarge, "MAX: 4194304"},
		{"a JSON body over 4 MiB", post(ordersPath, "application/json",
			jsonBody(t, map[string]string{"body": base64.StdEncoding.EncodeToString(big)}), nil),
			http.StatusRequestEntityTooLarge, CodeMessageTooLarge, "MAX: 4194304"},
		{"GET is not a send", httptest.NewRequest(http.MethodGet, ordersPath, nil),
			http.StatusMethodNotAllowed, CodeMethodNotAllowed, "send with POST"},
		{"every attempt fails", post("/v1/namespaces/shop/topics/doomed/messages", "", []byte("x"), nil),
			http.StatusServiceUnavailable, CodeSendFailed, "BrokersSent: [broker-dead"},
		{"a topic without a route", post("/v1/namespaces/shop/topics/unrouted/messages", "", []byte("x"), nil),
			http.StatusServiceUnavailable, CodeNoRoute, "no ready broker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := bed.do(t, tc.req)
			var er ErrorResponse
			if err := json.Unmarshal(body, &er); err != nil {
				t.Fatalf("status %d, body %q is not an ErrorResponse: %v", res.StatusCode, body, err)
			}
			if res.StatusCode != tc.wantStatus || er.Code != tc.wantCode || !strings.Contains(er.Error, tc.wantText) {
				t.Fatalf("got %d %s %q; want %d %s containing %q", res.StatusCode, er.Code, er.Error,
					tc.wantStatus, tc.wantCode, tc.wantText)
			}
			if tc.wantStatus == http.StatusMethodNotAllowed && res.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", res.Header.Get("Allow"))
			}
			if tc.wantCode == CodeSendFailed && (er.Attempts != producer.DefaultAttempts || len(er.BrokersTried) != er.Attempts) {
				t.Errorf("attempts %d, brokers tried %v; want %d attempts, each named", er.Attempts, er.BrokersTried, producer.DefaultAttempts)
			}
		})
	}
}

// TestUnsafeMessagesAreRefusedWith400AndNothingSent proves that reserved property names,
// separators, blank names or values and strings that are not UTF-8 are answered 400
// InvalidMessage, in both request forms, without the broker seeing a request.
func TestUnsafeMessagesAreRefusedWith400AndNothingSent(t *testing.T) {
	bed := newTestBed(t, nil)
	raw := func(headers map[string]string) *http.Request {
		return post(ordersPath, "application/octet-stream", []byte("x"), headers)
	}
	withProps := func(props map[string]string) *http.Request {
		return post(ordersPath, "application/json", jsonBody(t, map[string]any{"bodyText": "x", "properties": props}), nil)
	}
	cases := []struct {
		name     string
		req      *http.Request
		wantText string
	}{
		{"TRAN_MSG would store a half message", withProps(map[string]string{"TRAN_MSG": "true"}),
			"The Property<TRAN_MSG> is used by system"},
		{"DELAY", withProps(map[string]string{"DELAY": "3"}), "The Property<DELAY> is used by system"},
		{"UNIQ_KEY is the gateway's to set", withProps(map[string]string{"UNIQ_KEY": "MINE"}), "The Property<UNIQ_KEY> is used by system"},
		{"WAIT", withProps(map[string]string{"WAIT": "false"}), "The Property<WAIT> is used by system"},
		{"TAGS as a property", withProps(map[string]string{"TAGS": "a"}), "The Property<TAGS> is used by system"},
		{"KEYS as a property", withProps(map[string]string{"KEYS": "a"}), "The Property<KEYS> is used by system"},
		{"5.x timer property", withProps(map[string]string{"TIMER_DELAY_SEC": "10"}), "The Property<TIMER_DELAY_SEC> is used by system"},
		{"an empty value in JSON", withProps(map[string]string{"a": ""}), "can not be null or blank string"},
		{"a blank value in JSON", withProps(map[string]string{"a": "   "}), "can not be null or blank string"},
		{"an empty name in JSON", withProps(map[string]string{"": "v"}), "can not be null or blank string"},
		{"an empty property header", raw(map[string]string{"X-Detour-Property-Note": ""}), `can not be null or blank string! (property "note")`},
		{"0x02 in a value injects a property", withProps(map[string]string{"a": "x\x02TRAN_MSG\x01true"}),
			`the value of property "a" contains a property separator`},
		{"0x01 in a name", withProps(map[string]string{"a\x01b": "v"}), "contains a property separator"},
		{"0x02 in tags", post(ordersPath, "application/json", jsonBody(t, map[string]any{"bodyText": "x", "tags": "t\x02DELAY\x013"}), nil),
			"the tags contains a property separator"},
		{"0x01 in keys", post(ordersPath, "application/json", jsonBody(t, map[string]any{"bodyText": "x", "keys": []string{"k\x01"}}), nil),
			"the keys contains a property separator"},
		{"a property header that is not UTF-8", raw(map[string]string{"X-Detour-Property-Note": "caf\xe9"}),
			`the value of property "note" is not valid UTF-8`},
		{"a tags header that is not UTF-8", raw(map[string]string{HeaderTags: "\xff"}), "the tags is not valid UTF-8"},
		{"a keys header that is not UTF-8", raw(map[string]string{HeaderKeys: "k \xc3"}), "the keys is not valid UTF-8"},
		{"a JSON request that is not UTF-8", post(ordersPath, "application/json",
			[]byte("{\"bodyText\":\"x\",\"properties\":{\"a\":\"caf\xe9\"}}"), nil), "not valid UTF-8"},
		{"5,000 properties, more than a broker stores", withProps(manyProperties(5000)), "over the broker's limit of 32767"},
	}
	before := bed.good.Stats()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := bed.do(t, tc.req)
			var er ErrorResponse
			if err := json.Unmarshal(body, &er); err != nil {
				t.Fatalf("status %d, body %q is not an ErrorResponse: %v", res.StatusCode, body, err)
			}
			if res.StatusCode != http.StatusBadRequest || er.Code != CodeInvalidMessage || !strings.Contains(er.Error, tc.wantText) {
				t.Fatalf("got %d %s %q; want 400 %s containing %q", res.StatusCode, er.Code, er.Error, CodeInvalidMessage, tc.wantText)
			}
		})
	}
	if after := bed.good.Stats(); after.Requests != before.Requests {
		t.Fatalf("the broker saw %d requests for refused messages", after.Requests-before.Requests)
	}
}

// manyProperties returns n distinct, valid user properties.
func manyProperties(n int) map[string]string {
	props := make(map[string]string, n)
	for i := range n {
		props[fmt.Sprintf("prop%d", i)] = "value"
	}
	return props
}

// TestExactlyFourMiBIsAccepted proves the size limit is RocketMQ's: a body of exactly 4 MiB is sent.
// The send budget is raised from 3 s: compressing 4 MiB under the race detector on a loaded machine
// can take longer than that, and this test is about the limit, not the speed.
func TestExactlyFourMiBIsAccepted(t *testing.T) {
	bed := newTestBed(t, nil)
	unhurried := producer.DefaultPolicy("")
	unhurried.Retry.SendTimeout = time.Minute
	unhurried.Retry.PerAttemptTimeout = 0
	if err := bed.rt.SetPolicy(unhurried); err != nil {
		t.Fatal(err)
	}
	res, body := bed.do(t, post(ordersPath, "", bytes.Repeat([]byte("y"), producer.MaxMessageSize), nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, body %s", res.StatusCode, body)
	}
}

// fakeAuth answers with a fixed decision and records what it was asked: a Topic as
// token@ns/name, a Cluster as token@ns/clusters/name.
type fakeAuth struct {
	decision kubeauth.Decision
	err      error
	// forbidClusters answers every question about a Cluster Forbidden, whatever decision says.
	forbidClusters bool
	mu             sync.Mutex
	asked          []string
}

func (f *fakeAuth) Authorize(_ context.Context, token, ns, topic string) (kubeauth.Decision, string, error) {
	f.mu.Lock()
	f.asked = append(f.asked, token+"@"+ns+"/"+topic)
	f.mu.Unlock()
	return f.decision, "reason from the authorizer", f.err
}

func (f *fakeAuth) AuthorizeCluster(_ context.Context, token, ns, cluster string) (kubeauth.Decision, string, error) {
	f.mu.Lock()
	f.asked = append(f.asked, token+"@"+ns+"/clusters/"+cluster)
	f.mu.Unlock()
	if f.forbidClusters {
		return kubeauth.Forbidden, "not on clusters/messages", nil
	}
	return f.decision, "reason from the authorizer", f.err
}

// TestAuthorizerDecidesBeforeAnythingIsSent proves the gateway asks the Authorizer with the bearer
// token and the Topic, and answers 401, 403, 429 or 503 without sending when it does not allow.
func TestAuthorizerDecidesBeforeAnythingIsSent(t *testing.T) {
	cases := []struct {
		name       string
		auth       *fakeAuth
		wantStatus int
		wantCode   string
	}{
		{"allowed", &fakeAuth{decision: kubeauth.Allowed}, http.StatusOK, ""},
		{"unauthenticated", &fakeAuth{decision: kubeauth.Unauthenticated}, http.StatusUnauthorized, CodeUnauthorized},
		{"forbidden", &fakeAuth{decision: kubeauth.Forbidden}, http.StatusForbidden, CodeForbidden},
		{"authorizer unavailable", &fakeAuth{err: errors.New("api server down")}, http.StatusServiceUnavailable, CodeUnavailable},
		{"too many reviews from this client", &fakeAuth{err: kubeauth.ErrTooManyReviews}, http.StatusTooManyRequests, CodeTooManyRequests},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bed := newTestBed(t, tc.auth)
			res, body := bed.do(t, post(ordersPath, "", []byte("x"), map[string]string{"Authorization": "Bearer tok-1"}))
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, body %s; want %d", res.StatusCode, body, tc.wantStatus)
			}
			if got := strings.Join(tc.auth.asked, ","); got != "tok-1@shop/orders" {
				t.Errorf("authorizer asked %q, want tok-1@shop/orders", got)
			}
			stored := bed.good.Stats().MessagesStored
			if tc.wantStatus != http.StatusOK {
				var er ErrorResponse
				_ = json.Unmarshal(body, &er)
				if er.Code != tc.wantCode || stored != 0 {
					t.Errorf("code %q, %d stored; want %q and nothing stored", er.Code, stored, tc.wantCode)
				}
			}
			if tc.wantStatus == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "1" {
				t.Errorf("Retry-After = %q, want 1", res.Header.Get("Retry-After"))
			}
			if tc.wantStatus == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", res.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// blockingSender holds every send until released, so a test controls what is in flight.
type blockingSender struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingSender) SendRouteAs(_ context.Context, _ string, m *producer.Message, _ producer.Delivery) (*producer.SendResult, error) {
	b.started <- struct{}{}
	<-b.release
	return &producer.SendResult{MsgID: "id-" + string(m.Body), Topic: m.Topic, Broker: "b", Attempts: 1,
		BrokersTried: []string{"b"}, Status: producer.StatusSendOK}, nil
}

// TestShutdownAnswersRequestsInFlight proves that when the gateway stops it refuses new
// connections at once but answers the request whose send is still running, and only then
// reports that it is done.
func TestShutdownAnswersRequestsInFlight(t *testing.T) {
	sender := &blockingSender{started: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := New(Options{Addr: "127.0.0.1:0", Sender: sender,
		Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) { return front.Target{Topic: "T"}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Serving() == nil {
		t.Fatal("a gateway that has not started reports serving")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startErr := make(chan error, 1)
	go func() { startErr <- srv.Start(ctx) }()

	url := srv.URL() + "/v1/namespaces/ns/topics/t/messages"
	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := http.Post(url, "text/plain", strings.NewReader("m1"))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answered <- answer{status: res.StatusCode, body: string(b)}
	}()
	<-sender.started
	if srv.Serving() != nil || srv.InFlight() != 1 {
		t.Fatalf("serving %v, in flight %d; want serving with one request in flight", srv.Serving(), srv.InFlight())
	}

	cancel()
	eventually(t, func() bool { return srv.Serving() != nil }, "the gateway to report draining")
	eventually(t, func() bool {
		conn, err := net.DialTimeout("tcp", srv.Addr(), time.Second)
		if err != nil {
			return true // the listener is closed: new requests are refused
		}
		conn.Close()
		return false
	}, "the draining gateway to refuse new connections")
	select {
	case <-srv.Done():
		t.Fatal("the gateway reported done while a send was in flight")
	default:
	}

	close(sender.release)
	a := <-answered
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(a.body, `"msgId":"id-m1"`) {
		t.Fatalf("in-flight request: %d %q %v; want 200 with its msgId", a.status, a.body, a.err)
	}
	if err := <-startErr; err != nil {
		t.Fatalf("Start: %v", err)
	}
	<-srv.Done()
}

// eventually polls cond until it holds, failing the test after five seconds.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, 5*time.Second, time.Millisecond, what, poll.True(cond))
}

// TestAMessageTheBrokerRefusesIsTheCallersMistake proves a message the broker refuses as
// MESSAGE_ILLEGAL (its properties pushed over 32767 bytes by what the broker adds) is answered 400
// InvalidMessage, not 503: retrying it anywhere would fail the same way.
func TestAMessageTheBrokerRefusesIsTheCallersMistake(t *testing.T) {
	bed := newTestBed(t, nil)
	body := jsonBody(t, map[string]any{"bodyText": "m",
		"properties": map[string]string{"big": strings.Repeat("p", 32767-len("big")-2-60)}})
	res, out := bed.do(t, post(ordersPath, "application/json", body, nil))
	var er ErrorResponse
	if err := json.Unmarshal(out, &er); err != nil {
		t.Fatalf("answer %d %s: %v", res.StatusCode, out, err)
	}
	if res.StatusCode != http.StatusBadRequest || er.Code != CodeInvalidMessage || er.Attempts != 1 || !strings.Contains(er.Error, "CODE: 13") {
		t.Fatalf("answer %d %+v, want 400 InvalidMessage after one attempt quoting the broker's MESSAGE_ILLEGAL", res.StatusCode, er)
	}
	if n := bed.good.Stats().MessagesStored; n != 0 {
		t.Fatalf("%d messages stored", n)
	}
}
