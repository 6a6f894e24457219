package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
)

// clusterBed is a gateway in front of a real runtime whose Cluster "shop/prod" serves undeclared
// topics: a brokersim name server publishes topic "Undeclared" on brokersim broker "broker-a",
// and the runtime keeps the route as it does for the operator (UseRoute, brokers named in the
// Cluster's scope). Cluster "legacy" serves declared topics only; "busy", "dark" and "broken"
// answer as a runtime flooded with new topics, name servers that do not answer and a cache that
// fails. Topic "shop/orders" is the same topic by the Topic path.
type clusterBed struct {
	handler http.Handler
	broker  *brokersim.Broker
	// metrics is what the gateway counted into.
	metrics prometheus.Gatherer
	// resolved counts the questions the Cluster resolver was asked.
	resolved int
}

func newClusterBed(t *testing.T, auth Authorizer) *clusterBed {
	t.Helper()
	broker, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	broker.CreateTopic("Undeclared", 2)
	nsrv, err := brokersim.StartNameServer("127.0.0.1:0", broker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsrv.Close() })
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	prod := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "prod"},
		Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, UndeclaredTopics: routingv1alpha1.UndeclaredTopicsServe,
			FaultPolicyRef: &routingv1alpha1.FaultPolicyReference{Name: "default"}}}
	set, reg := metrics.NewSet(), prometheus.NewPedanticRegistry()
	if err := set.Register(reg); err != nil {
		t.Fatal(err)
	}
	bed := &clusterBed{broker: broker, metrics: reg}
	clusters := ClusterTopicResolverFunc(func(ctx context.Context, ns, cluster, topic string) (front.Target, error) {
		bed.resolved++
		switch ns + "/" + cluster {
		case "shop/prod":
			target := front.UndeclaredTarget(prod, topic)
			err := rt.UseRoute(ctx, *target.Undeclared)
			if errors.Is(err, producer.ErrTopicNotPublished) {
				return front.Target{}, fmt.Errorf("%w: the name servers of Cluster shop/prod do not publish topic %s", front.ErrTopicNotFound, topic)
			}
			return target, err
		case "shop/legacy":
			return front.Target{}, fmt.Errorf("%w: no Topic publishes %s on Cluster shop/legacy, which serves declared topics only (spec.undeclaredTopics)",
				front.ErrTopicNotFound, topic)
		case "shop/busy":
			return front.Target{}, fmt.Errorf("%w: %w", front.ErrBusy, producer.ErrTooManyNewTopics)
		case "shop/dark":
			return front.Target{}, fmt.Errorf("%w: topic %s of Cluster shop/dark: dial tcp: connection refused", front.ErrUnavailable, topic)
		case "shop/broken":
			return front.Target{}, errors.New("the cache failed")
		}
		return front.Target{}, fmt.Errorf("%w: no Cluster %s/%s", front.ErrTopicNotFound, ns, cluster)
	})
	srv, err := New(Options{
		Addr:   "127.0.0.1:0",
		Sender: rt,
		Topics: front.NameResolverFunc(func(ctx context.Context, ns, name string) (front.Target, error) {
			if ns+"/"+name == "shop/orders" {
				return clusters.ResolveClusterTopic(ctx, "shop", "prod", "Undeclared")
			}
			return front.Target{}, front.ErrTopicNotFound
		}),
		Clusters:   clusters,
		Authorizer: auth,
		Metrics:    set.Gateway,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	bed.handler = srv.Handler()
	return bed
}

func clusterPath(cluster, topic string) string {
	return "/v1/namespaces/shop/clusters/" + cluster + "/topics/" + topic + "/messages"
}

// TestClusterPathSendsToATopicTheClusterServes proves a message to a topic no Topic declares,
// sent through the Cluster that serves it, is stored as a send by the Topic path stores it, in
// both forms and as a batch, and answered the same way: the topic, and the broker by its
// RocketMQ name, not the scope the runtime names it in.
func TestClusterPathSendsToATopicTheClusterServes(t *testing.T) {
	bed := newClusterBed(t, nil)
	path := clusterPath("prod", "Undeclared")
	for _, tc := range []struct {
		name  string
		req   *http.Request
		batch bool
	}{
		{"a raw message", post(path, "text/plain", []byte("raw"), map[string]string{HeaderTags: "created"}), false},
		{"a JSON message", post(path, "application/json", []byte(`{"bodyText":"json","keys":"k1"}`), nil), false},
		{"a batch", post(path+":batch", "application/json", []byte(`{"messages":[{"bodyText":"b1"},{"bodyText":"b2"}]}`), nil), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			bed.handler.ServeHTTP(rec, tc.req)
			if rec.Code != http.StatusOK {
				t.Fatalf("answered %d %s, want 200", rec.Code, rec.Body)
			}
			var got struct {
				Topic        string               `json:"topic"`
				Broker       string               `json:"broker"`
				BrokersTried []string             `json:"brokersTried"`
				MsgID        string               `json:"msgId"`
				Messages     []BatchMessageResult `json:"messages"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Topic != "Undeclared" || got.Broker != "broker-a" || !slices.Equal(got.BrokersTried, []string{"broker-a"}) {
				t.Fatalf("answer %s, want topic Undeclared stored on broker-a, named so", rec.Body)
			}
			ids := []string{got.MsgID}
			if tc.batch {
				ids = nil
				for _, m := range got.Messages {
					ids = append(ids, m.MsgID)
				}
			}
			stored := bed.broker.StoredByUniqKey()
			for _, id := range ids {
				if stored[id] != 1 {
					t.Errorf("message %s stored %d times, want once", id, stored[id])
				}
			}
		})
	}
}

// TestSendsAreCountedByTheClusterOfTheirBrokers proves the gateway counts the messages it sent
// through the runtime by the namespace and Cluster whose brokers took them, stored or failed,
// whichever path named the topic, and not the requests refused before a send.
func TestSendsAreCountedByTheClusterOfTheirBrokers(t *testing.T) {
	bed := newClusterBed(t, nil)
	for _, req := range []*http.Request{
		post(clusterPath("prod", "Undeclared"), "text/plain", []byte("one"), nil),
		post(clusterPath("prod", "Undeclared")+":batch", "application/json", []byte(`{"messages":[{"bodyText":"b1"},{"bodyText":"b2"}]}`), nil),
		post("/v1/namespaces/shop/topics/orders/messages", "text/plain", []byte("by the Topic"), nil),
		post(clusterPath("legacy", "Undeclared"), "text/plain", []byte("refused"), nil),
	} {
		bed.handler.ServeHTTP(httptest.NewRecorder(), req)
	}
	bed.broker.Close()
	if rec := httptest.NewRecorder(); func() bool {
		bed.handler.ServeHTTP(rec, post(clusterPath("prod", "Undeclared"), "text/plain", []byte("lost"), nil))
		return rec.Code == http.StatusOK
	}() {
		t.Fatal("a send to a closed broker was stored")
	}
	got := metricstest.Gathered(t, bed.metrics)
	for series, want := range map[string]float64{
		"detour_door_messages_total{cluster=shop/prod,door=gateway,result=stored}":   4,
		"detour_door_messages_total{cluster=shop/prod,door=gateway,result=failed}":   1,
		"detour_door_send_duration_seconds_count{cluster=shop/prod,door=gateway}":    4,
		"detour_door_messages_total{cluster=shop/legacy,door=gateway,result=stored}": 0,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v (all: %v)", series, got[series], want, got)
		}
	}
}

// TestClusterPathRefusalsSayWhy proves what the Cluster path refuses and how: a topic name
// RocketMQ refuses is 400 before anyone is asked about it, names that cannot exist 404 before
// the authorizer is asked, a topic the Cluster does not serve 404 saying why, too many new topics
// at once 429 with Retry-After as the gateway's other 429s, name servers that do not answer 503.
func TestClusterPathRefusalsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       *http.Request
		status    int
		code      string
		text      string
		authAsked bool
	}{
		{"a topic name with characters RocketMQ refuses", post(clusterPath("prod", "bad%20topic"), "", []byte("x"), nil),
			http.StatusBadRequest, CodeInvalidMessage, `the topic "bad topic" in the path breaks RocketMQ's rules: The specified topic[bad topic] contains illegal characters`, false},
		{"a topic name over RocketMQ's length", post(clusterPath("prod", strings.Repeat("t", producer.MaxTopicLength+1)), "", []byte("x"), nil),
			http.StatusBadRequest, CodeInvalidMessage, "longer than topic max length", false},
		{"a topic RocketMQ sends nothing to", post(clusterPath("prod", "SCHEDULE_TOPIC_XXXX"), "", []byte("x"), nil),
			http.StatusBadRequest, CodeInvalidMessage, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden", false},
		{"a bad topic name in a batch", post(clusterPath("prod", "a.b")+":batch", "application/json", []byte(`{"messages":[{"bodyText":"x"}]}`), nil),
			http.StatusBadRequest, CodeInvalidMessage, "contains illegal characters", false},
		{"a Cluster name that cannot exist", post(clusterPath("Prod_1", "Undeclared"), "", []byte("x"), nil),
			http.StatusNotFound, CodeTopicNotFound, `Cluster "Prod_1" not found in namespace "shop"`, false},
		{"GET is not a send", httptest.NewRequest(http.MethodGet, clusterPath("prod", "Undeclared"), nil),
			http.StatusMethodNotAllowed, CodeMethodNotAllowed, "send with POST", false},
		{"no such Cluster", post(clusterPath("nope", "Undeclared"), "", []byte("x"), nil),
			http.StatusNotFound, CodeTopicNotFound, "no Cluster shop/nope", true},
		{"a Cluster that serves declared topics only", post(clusterPath("legacy", "Undeclared"), "", []byte("x"), nil),
			http.StatusNotFound, CodeTopicNotFound, "which serves declared topics only (spec.undeclaredTopics)", true},
		{"a topic the name servers do not publish", post(clusterPath("prod", "Nowhere"), "", []byte("x"), nil),
			http.StatusNotFound, CodeTopicNotFound, "the name servers of Cluster shop/prod do not publish topic Nowhere", true},
		{"too many new topics at once", post(clusterPath("busy", "Undeclared"), "", []byte("x"), nil),
			http.StatusTooManyRequests, CodeTooManyRequests, "too many new topics at once", true},
		{"name servers that do not answer", post(clusterPath("dark", "Undeclared"), "", []byte("x"), nil),
			http.StatusServiceUnavailable, CodeUnavailable, "the name servers did not answer", true},
		{"a lookup that fails", post(clusterPath("broken", "Undeclared"), "", []byte("x"), nil),
			http.StatusServiceUnavailable, CodeUnavailable, "looking up the topic's Cluster failed; retry", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := &fakeAuth{decision: kubeauth.Allowed}
			bed := newClusterBed(t, auth)
			rec := httptest.NewRecorder()
			bed.handler.ServeHTTP(rec, tc.req)
			var er ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil {
				t.Fatalf("status %d, body %q is not an ErrorResponse: %v", rec.Code, rec.Body, err)
			}
			if rec.Code != tc.status || er.Code != tc.code || !strings.Contains(er.Error, tc.text) {
				t.Fatalf("got %d %s %q; want %d %s containing %q", rec.Code, er.Code, er.Error, tc.status, tc.code, tc.text)
			}
			if retry := rec.Header().Get("Retry-After"); (tc.status == http.StatusTooManyRequests) != (retry == "1") {
				t.Errorf("Retry-After = %q; want 1 on a 429 only", retry)
			}
			if asked := len(auth.asked) > 0; asked != tc.authAsked || (!tc.authAsked && bed.resolved > 0) {
				t.Errorf("authorizer asked %v, resolver %d times; want the authorizer asked: %v, and nothing resolved before it",
					auth.asked, bed.resolved, tc.authAsked)
			}
			if n := bed.broker.Stats().MessagesStored; n != 0 {
				t.Errorf("%d messages stored", n)
			}
		})
	}
}

// TestClusterPathIsAuthorisedOnTheCluster proves a send through a Cluster is asked of the
// Authorizer as a send through that Cluster (clusters/messages), not to a Topic: a caller allowed
// on topics/messages alone sends by the Topic path and is refused 403 on the Cluster's.
func TestClusterPathIsAuthorisedOnTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		auth   *fakeAuth
		path   string
		status int
		asked  string
	}{
		{"allowed through the Cluster", &fakeAuth{decision: kubeauth.Allowed}, clusterPath("prod", "Undeclared"),
			http.StatusOK, "tok-1@shop/clusters/prod"},
		{"allowed on topics/messages, by the Topic path", &fakeAuth{decision: kubeauth.Allowed, forbidClusters: true},
			"/v1/namespaces/shop/topics/orders/messages", http.StatusOK, "tok-1@shop/orders"},
		{"allowed on topics/messages, not on clusters/messages", &fakeAuth{decision: kubeauth.Allowed, forbidClusters: true},
			clusterPath("prod", "Undeclared"), http.StatusForbidden, "tok-1@shop/clusters/prod"},
		{"unauthenticated", &fakeAuth{decision: kubeauth.Unauthenticated}, clusterPath("prod", "Undeclared"),
			http.StatusUnauthorized, "tok-1@shop/clusters/prod"},
		{"too many reviews", &fakeAuth{err: kubeauth.ErrTooManyReviews}, clusterPath("prod", "Undeclared"),
			http.StatusTooManyRequests, "tok-1@shop/clusters/prod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bed := newClusterBed(t, tc.auth)
			rec := httptest.NewRecorder()
			bed.handler.ServeHTTP(rec, post(tc.path, "", []byte("x"), map[string]string{"Authorization": "Bearer tok-1"}))
			if rec.Code != tc.status {
				t.Fatalf("answered %d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if got := strings.Join(tc.auth.asked, ","); got != tc.asked {
				t.Errorf("authorizer asked %q, want %q", got, tc.asked)
			}
			if stored := bed.broker.Stats().MessagesStored; (stored == 1) != (tc.status == http.StatusOK) {
				t.Errorf("%d messages stored after a %d", stored, rec.Code)
			}
		})
	}
}

// TestClusterPathIsNotServedWithoutAClusterResolver proves a gateway given no Clusters answers the
// Cluster path as any path it does not serve.
func TestClusterPathIsNotServedWithoutAClusterResolver(t *testing.T) {
	bed := newTestBed(t, nil)
	res, body := bed.do(t, post(clusterPath("prod", "Orders"), "", []byte("x"), nil))
	var er ErrorResponse
	if err := json.Unmarshal(body, &er); err != nil || res.StatusCode != http.StatusNotFound || er.Code != CodeNotFound {
		t.Fatalf("answered %d %s (%v), want 404 %s", res.StatusCode, body, err, CodeNotFound)
	}
}
