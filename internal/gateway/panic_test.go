package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
)

// panickingSender panics sending a message whose body is "boom", as a bug in the runtime would,
// and stores every other message.
type panickingSender struct{}

func (panickingSender) SendRouteAs(_ context.Context, _ string, m *producer.Message, _ producer.Delivery) (*producer.SendResult, error) {
	if string(m.Body) == "boom" {
		var table map[string]int
		table["boom"]++ // a nil map write: the runtime's own panic, not a test's
	}
	return &producer.SendResult{MsgID: "id-" + string(m.Body), Topic: m.Topic, Broker: "b", Attempts: 1,
		BrokersTried: []string{"b"}, Status: producer.StatusSendOK}, nil
}

// TestAPanicWhileHandlingARequestClosesOnlyItsConnection proves a panic while handling a request
// is answered 500 Internal on a connection that then closes, is counted, and spares the
// gateway and every other connection: a caller whose connection was open before keeps using it.
func TestAPanicWhileHandlingARequestClosesOnlyItsConnection(t *testing.T) {
	set := metrics.NewSet()
	reg := prometheus.NewPedanticRegistry()
	if err := set.Register(reg); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Addr: "127.0.0.1:0", Sender: panickingSender{}, Metrics: set.Gateway,
		Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) { return front.Target{Topic: "T"}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-started; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	eventually(t, func() bool { return srv.Serving() == nil }, "the gateway to serve")
	url := srv.URL() + "/v1/namespaces/ns/topics/t/messages"

	type answer struct {
		status int
		body   ErrorResponse
		closed bool // the server said it closes the connection
		reused bool
	}
	send := func(c *http.Client, body string) answer {
		t.Helper()
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("sending %q: %v", body, err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		a := answer{status: res.StatusCode, closed: res.Close, reused: reused}
		if res.StatusCode != http.StatusOK {
			if err := json.Unmarshal(data, &a.body); err != nil {
				t.Fatalf("status %d, body %q is not an ErrorResponse", res.StatusCode, data)
			}
		}
		return a
	}
	bystander := &http.Client{Transport: &http.Transport{}}
	victim := &http.Client{Transport: &http.Transport{}}
	if a := send(bystander, "before"); a.status != http.StatusOK {
		t.Fatalf("before the panic: %+v", a)
	}
	handlerPanics := "detour_gateway_panics_total{where=" + metrics.PanicInHandler + "}"
	before := metricstest.Gathered(t, reg)[handlerPanics]
	a := send(victim, "boom")
	if a.status != http.StatusInternalServerError || a.body.Code != CodeInternal || !a.closed {
		t.Fatalf("the panicking request: %d %+v, connection closing %v; want 500 %s on a closing connection",
			a.status, a.body, a.closed, CodeInternal)
	}
	if got := metricstest.Gathered(t, reg)[handlerPanics] - before; got != 1 {
		t.Fatalf("%v handler panics counted, want 1", got)
	}
	if a := send(bystander, "after"); a.status != http.StatusOK || !a.reused {
		t.Fatalf("the other caller after the panic: %d, connection reused %v; want 200 on its open connection", a.status, a.reused)
	}
	if a := send(victim, "again"); a.status != http.StatusOK || a.reused {
		t.Fatalf("the panicking caller again: %d, connection reused %v; want 200 on a new connection", a.status, a.reused)
	}
	if srv.Serving() != nil || srv.InFlight() != 0 {
		t.Fatalf("serving %v with %d in flight; want serving, nothing in flight", srv.Serving(), srv.InFlight())
	}
}
