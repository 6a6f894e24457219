package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/testsupport/poll"
)

// testCertificate is httptest's certificate for 127.0.0.1 and the pool that trusts it.
func testCertificate(t *testing.T) ([]tls.Certificate, *x509.CertPool) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return ts.TLS.Certificates, pool
}

// TestARetiredGatewayServesButSendsClientsToNewConnections proves a retired gateway still
// stores what it is sent, and that each of its answers ends the client's kept-alive connection
// (HTTP/1.1 Connection: close, HTTP/2 GOAWAY), so the client's next send opens a new one: behind
// a Service, that lands on a replica that is not stopping. Before Retire the same client reuses
// its connection, which is what makes the fresh one after it mean something.
func TestARetiredGatewayServesButSendsClientsToNewConnections(t *testing.T) {
	tests := []struct {
		name      string
		tls       bool
		wantProto int
	}{
		{name: "HTTP/1.1", wantProto: 1},
		{name: "HTTP/2", tls: true, wantProto: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bed := newTestBed(t, nil)
			opts := Options{Addr: "127.0.0.1:0", Sender: bed.rt,
				Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) { return front.Target{Topic: "Orders"}, nil })}
			transport := &http.Transport{}
			if tt.tls {
				certs, pool := testCertificate(t)
				opts.TLS = &tls.Config{Certificates: certs, NextProtos: []string{"h2", "http/1.1"}}
				transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
			}
			srv, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			go func() { _ = srv.Start(ctx) }()
			t.Cleanup(func() { cancel(); <-srv.Done() })
			client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
			t.Cleanup(transport.CloseIdleConnections)

			sent := 0
			send := func(body string) (reused bool) {
				t.Helper()
				sent++
				trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
					http.MethodPost, srv.URL()+"/v1/namespaces/shop/topics/orders/messages", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "text/plain")
				res, err := client.Do(req)
				if err != nil {
					t.Fatalf("send %q: %v", body, err)
				}
				defer res.Body.Close()
				_, _ = io.Copy(io.Discard, res.Body) // a connection is kept only once its answer is read
				if res.StatusCode != http.StatusOK || res.ProtoMajor != tt.wantProto {
					t.Fatalf("send %q: HTTP/%d %d, want HTTP/%d 200", body, res.ProtoMajor, res.StatusCode, tt.wantProto)
				}
				return reused
			}
			send("before 1")
			if !send("before 2") {
				t.Fatal("a serving gateway's client did not keep its connection")
			}
			stored, sentBefore := bed.good.Stats().MessagesStored, sent
			srv.Retire()
			send("retired 1")
			poll.Until(t, 10*time.Second, 10*time.Millisecond, "a send on a new connection", func() error {
				if send("retired, next") {
					return poll.ErrNotYet
				}
				return nil
			})
			if got, want := bed.good.Stats().MessagesStored-stored, int64(sent-sentBefore); got != want {
				t.Errorf("the broker stored %d messages after Retire, want the %d sent", got, want)
			}
		})
	}
}
