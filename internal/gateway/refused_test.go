package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// threeBrokerGateway is a gateway whose Topic "shop/orders" routes RocketMQ topic "Orders" over
// three brokersim brokers under the Detour preset, each with the fault faults names (if any).
func threeBrokerGateway(t *testing.T, faults map[string]brokersim.Fault) http.Handler {
	t.Helper()
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	route := producer.Route{Topic: "Orders"}
	for _, name := range []string{"broker-a", "broker-b", "broker-c"} {
		b, err := brokersim.StartBroker(name, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.SetFault(faults[name])
		rt.SetBroker(producer.Broker{Name: name, Addr: b.Addr(), Ready: true})
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: name, WriteQueues: 2})
	}
	if err := rt.SetRoute(route); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{
		Addr:   "127.0.0.1:0",
		Sender: rt,
		Topics: front.NameResolverFunc(func(_ context.Context, ns, name string) (front.Target, error) {
			if ns+"/"+name == "shop/orders" {
				return front.Target{Topic: "Orders"}, nil
			}
			return front.Target{}, front.ErrTopicNotFound
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Handler()
}

// TestOnlyAMessageEveryBrokerTriedRefusedIsTheCallersMistake proves the gateway answers 400 for a
// MESSAGE_ILLEGAL refusal only when every broker it tried refused the message: a broker that
// refuses well-formed messages costs callers nothing (the trial's gateway answered 400 to its
// share of traffic for ever), and a refusal beside brokers that never answered is a 503 to retry.
func TestOnlyAMessageEveryBrokerTriedRefusedIsTheCallersMistake(t *testing.T) {
	illegal, down := brokersim.Fault{IllegalMessages: true}, brokersim.Fault{Refuse: true}
	for _, tc := range []struct {
		name     string
		faults   map[string]brokersim.Fault
		status   int
		code     string
		attempts int
	}{
		{"one broker refuses well-formed messages", map[string]brokersim.Fault{"broker-a": illegal}, http.StatusOK, "", 0},
		{"every broker refuses the message", map[string]brokersim.Fault{"broker-a": illegal, "broker-b": illegal, "broker-c": illegal},
			http.StatusBadRequest, CodeInvalidMessage, 3},
		{"one broker refuses and the others take no connection", map[string]brokersim.Fault{"broker-a": illegal, "broker-b": down, "broker-c": down},
			http.StatusServiceUnavailable, CodeSendFailed, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := threeBrokerGateway(t, tc.faults)
			// 40 requests, as one round of the trial: every broker gets its turn.
			for i := range 40 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, post(ordersPath, "application/json", jsonBody(t, map[string]any{"bodyText": fmt.Sprint("m-", i)}), nil))
				if rec.Code != tc.status {
					t.Fatalf("request %d answered %d %s, want %d", i, rec.Code, rec.Body, tc.status)
				}
				if tc.status == http.StatusOK {
					continue
				}
				var er ErrorResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil {
					t.Fatalf("answer %s: %v", rec.Body, err)
				}
				if er.Code != tc.code || er.Attempts != tc.attempts {
					t.Fatalf("request %d answered %+v, want %s after %d attempts", i, er, tc.code, tc.attempts)
				}
				if tc.status == http.StatusBadRequest {
					if tried := slices.Sorted(slices.Values(er.BrokersTried)); !slices.Equal(tried, []string{"broker-a", "broker-b", "broker-c"}) {
						t.Errorf("brokers tried %v, want each broker once", er.BrokersTried)
					}
					for n, b := range er.BrokersTried {
						if want := fmt.Sprintf("attempt %d on %s: CODE: 13", n+1, b); !strings.Contains(er.Error, want) {
							t.Errorf("error %q does not name %q", er.Error, want)
						}
					}
				}
			}
		})
	}
}

// errSender answers every send with err.
type errSender struct{ err error }

func (s errSender) SendRouteAs(context.Context, string, *producer.Message, producer.Delivery) (*producer.SendResult, error) {
	return nil, s.err
}

// A send whose last attempt a broker refused as MESSAGE_ILLEGAL after an earlier attempt got no
// answer (the order the runtime's random selection makes now and then, which the table above
// cannot force) is a 503: a broker that never answered might have stored the message.
func TestARefusalAfterAnUnansweredAttemptIsNotTheCallersMistake(t *testing.T) {
	refusal := &producer.BrokerError{Code: 13, Remark: "the message is illegal", Broker: "broker-a", Addr: "127.0.0.1:1"}
	for _, tc := range []struct {
		name   string
		err    *producer.SendError
		status int
	}{
		{"refused after an unanswered attempt", &producer.SendError{Topic: "Orders", Attempts: 2, MaxAttempts: 2,
			BrokersTried: []string{"broker-b", "broker-a"}, Err: refusal}, http.StatusServiceUnavailable},
		{"refused by the only broker tried", &producer.SendError{Topic: "Orders", Attempts: 1, MaxAttempts: 3,
			BrokersTried: []string{"broker-a"}, MessageRefused: true, Err: refusal}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Options{Addr: "127.0.0.1:0", Sender: errSender{tc.err},
				Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) { return front.Target{Topic: "Orders"}, nil })})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, post(ordersPath, "application/json", jsonBody(t, map[string]any{"bodyText": "m"}), nil))
			if rec.Code != tc.status {
				t.Fatalf("answered %d %s, want %d", rec.Code, rec.Body, tc.status)
			}
		})
	}
}

// TestRefusedCredentialsAreDetoursNotTheCallers proves a send the brokers refuse for detour's own
// credentials is answered 502 BrokerRefusedCredentials with the broker's remark, not as a generic
// send failure the caller might retry.
func TestRefusedCredentialsAreDetoursNotTheCallers(t *testing.T) {
	rt := producer.New(producer.Options{})
	t.Cleanup(func() { rt.Close() })
	b, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.SetACL(&brokersim.ACL{Users: map[string]string{"detour": "s3cret"}})
	rt.SetBroker(producer.Broker{Name: "broker-a", Addr: b.Addr(), Ready: true})
	if err := rt.SetRoute(producer.Route{Topic: "Orders", Brokers: []producer.BrokerQueues{{Broker: "broker-a", WriteQueues: 2}}}); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Addr: "127.0.0.1:0", Sender: rt,
		Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) { return front.Target{Topic: "Orders"}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, post(ordersPath, "application/json", jsonBody(t, map[string]any{"bodyText": "m"}), nil))
	var got ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("answer %d %q: %v", rec.Code, rec.Body, err)
	}
	if rec.Code != http.StatusBadGateway || got.Code != CodeBrokerRefusedCredentials ||
		!strings.Contains(got.Error, "username cannot be null.") || !strings.Contains(got.Error, "AuthenticationFailed") {
		t.Errorf("answer %d %+v, want 502 %s naming the remark", rec.Code, got, CodeBrokerRefusedCredentials)
	}
}
