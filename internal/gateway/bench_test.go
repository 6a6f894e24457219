package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/producer"
)

// nopSender stores nothing and answers at once, so a benchmark measures the gateway alone.
type nopSender struct{}

func (nopSender) SendRouteAs(_ context.Context, _ string, m *producer.Message, _ producer.Delivery) (*producer.SendResult, error) {
	return &producer.SendResult{MsgID: "id", Topic: m.Topic, Broker: "b", Attempts: 1,
		BrokersTried: []string{"b"}, Status: producer.StatusSendOK}, nil
}

func benchServer(b *testing.B, sender Sender) *Server {
	b.Helper()
	srv, err := New(Options{Addr: "127.0.0.1:0", Sender: sender,
		Topics: front.NameResolverFunc(func(context.Context, string, string) (front.Target, error) {
			return front.Target{Topic: "BenchTopic"}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	return srv
}

// BenchmarkHandlerRawMessage is the gateway's own cost per request (parsing, headers, JSON
// answer, metrics) for a 1 KiB raw message, without the network or a broker.
func BenchmarkHandlerRawMessage(b *testing.B) {
	h := benchServer(b, nopSender{}).Handler()
	body := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/namespaces/ns/topics/t/messages", bytes.NewReader(body))
		req.Header.Set(HeaderTags, "tag")
		req.Header.Set(HeaderKeys, "k1 k2")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkLoopbackSend is a whole send through the gateway over loopback HTTP: client,
// gateway, producer runtime and a brokersim broker storing the message, at the benchmark's
// parallelism.
func BenchmarkLoopbackSend(b *testing.B) {
	rt := benchRuntime(b)
	srv := benchServer(b, rt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	url := srv.URL() + "/v1/namespaces/ns/topics/t/messages"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Post(url, "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}
