package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// benchConcurrency is the number of concurrent senders the real-broker figures use.
const benchConcurrency = 64

// benchRuntime starts a loopback brokersim broker that counts what it stores and a runtime routed
// to it, as the gateway's sender.
func benchRuntime(b *testing.B) *producer.Runtime {
	b.Helper()
	broker, err := brokersim.StartBrokerWith("bench", "127.0.0.1:0", brokersim.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { broker.Close() })
	rt := producer.New(producer.Options{})
	b.Cleanup(func() { rt.Close() })
	rt.SetBroker(producer.Broker{Name: "bench", Addr: broker.Addr(), Ready: true})
	if err := rt.SetRoute(producer.Route{Topic: "BenchTopic", Brokers: []producer.BrokerQueues{{Broker: "bench", WriteQueues: 4}}}); err != nil {
		b.Fatal(err)
	}
	return rt
}

// startBenchGateway serves the gateway over loopback HTTP in front of sender.
func startBenchGateway(b *testing.B, sender Sender) string {
	b.Helper()
	srv := benchServer(b, sender)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return srv.URL()
}

// runSenders calls send b.N times from g goroutines and reports messages per second, each call
// counting perCall messages.
func runSenders(b *testing.B, g, perCall int, send func() error) {
	b.Helper()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := send(); err != nil && failed.Add(1) == 1 {
					b.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*perCall)/elapsed.Seconds(), "msgs/s")
}

// benchBatchSize is the batch size of the batch target.
const benchBatchSize = 32

// BenchmarkGatewayAgainstRuntime measures, in one run against the same kind of loopback brokersim
// broker, 64 concurrent senders of 1 KiB messages: calling the runtime directly, posting one
// message per request through the gateway over loopback HTTP (client, server, runtime and broker
// in this process), and posting 32 per batch request (JSON, bodyText). The ratios of their
// msgs/s are the gateway's share of the runtime's throughput and what batching gains over HTTP.
func BenchmarkGatewayAgainstRuntime(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	b.Run("runtime-direct", func(b *testing.B) {
		rt := benchRuntime(b)
		b.ReportAllocs()
		runSenders(b, benchConcurrency, 1, func() error {
			_, err := rt.Send(context.Background(), &producer.Message{Topic: "BenchTopic", Tags: "tag", Body: body})
			return err
		})
	})
	b.Run("gateway", func(b *testing.B) {
		url := expand(startBenchGateway(b, benchRuntime(b)) + MessagesPath)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency}}
		b.Cleanup(client.CloseIdleConnections)
		b.ReportAllocs()
		runSenders(b, benchConcurrency, 1, func() error {
			return postOK(client, url, "application/octet-stream", body, map[string]string{HeaderTags: "tag"})
		})
	})
	b.Run("gateway-batch32", func(b *testing.B) {
		url := expand(startBenchGateway(b, benchRuntime(b)) + BatchPath)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency}}
		b.Cleanup(client.CloseIdleConnections)
		msgs := make([]JSONMessage, benchBatchSize)
		text := string(body)
		for i := range msgs {
			msgs[i] = JSONMessage{BodyText: &text, Tags: "tag"}
		}
		batch, err := json.Marshal(JSONBatch{Messages: msgs})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		runSenders(b, benchConcurrency, benchBatchSize, func() error {
			return postOK(client, url, "application/json", batch, nil)
		})
	})
}

// expand fills a route pattern's wildcards with the benchmark's namespace and Topic.
func expand(pattern string) string {
	return strings.NewReplacer("{namespace}", "ns", "{name}", "t").Replace(pattern)
}

// postOK posts body to url and fails unless the answer is 200.
func postOK(client *http.Client, url, contentType string, body []byte, headers map[string]string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return &statusError{code: res.StatusCode, body: string(answer)}
	}
	return nil
}

type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return http.StatusText(e.code) + ": " + e.body }
