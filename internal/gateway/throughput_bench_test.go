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

	"github.com/detourmq/detour/internal/testsupport/leanhttp"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// benchConcurrency is the number of concurrent senders the gateway's real-broker figures use.
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
	return routedRuntime(b, "bench", broker.Addr())
}

// routedRuntime returns a runtime that routes BenchTopic to the 4 queues of the broker name at addr.
func routedRuntime(b *testing.B, name, addr string) *producer.Runtime {
	b.Helper()
	rt := producer.New(producer.Options{})
	b.Cleanup(func() { rt.Close() })
	rt.SetBroker(producer.Broker{Name: name, Addr: addr, Ready: true})
	if err := rt.SetRoute(producer.Route{Topic: "BenchTopic", Brokers: []producer.BrokerQueues{{Broker: name, WriteQueues: 4}}}); err != nil {
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

// runSenders calls send b.N times from benchConcurrency goroutines and reports messages per
// second, each call counting perCall messages.
func runSenders(b *testing.B, perCall int, send func() error) {
	b.Helper()
	runOwnSenders(b, perCall, func() func() error { return send })
}

// runOwnSenders is runSenders with a sender of its own for each goroutine (a connection each),
// made before the clock starts.
func runOwnSenders(b *testing.B, perCall int, newSender func() func() error) {
	b.Helper()
	senders := makeSenders(newSender)
	b.ResetTimer()
	elapsed := sendAll(b, senders, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N*perCall)/elapsed.Seconds(), "msgs/s")
}

// makeSenders makes benchConcurrency senders with newSender.
func makeSenders(newSender func() func() error) []func() error {
	senders := make([]func() error, benchConcurrency)
	for i := range senders {
		senders[i] = newSender()
	}
	return senders
}

// sendAll makes calls calls, each sender in a goroutine of its own taking the next, and returns
// how long they took.
func sendAll(b *testing.B, senders []func() error, calls int) time.Duration {
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, send := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(calls) {
				if err := send(); err != nil && failed.Add(1) == 1 {
					b.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// leanSenders returns a maker of senders that post body over a lean client's connection each.
func leanSenders(b *testing.B, url, contentType string, body []byte, headers map[string]string) func() func() error {
	return func() func() error {
		c, err := leanhttp.Dial(url, contentType, body, headers)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c.Post
	}
}

// benchBatchSize is the batch size of the gateway's batch target (5x the single-message rate).
const benchBatchSize = 32

// BenchmarkGatewayAgainstRuntime measures, in one run against the same kind of loopback brokersim
// broker, 64 concurrent senders of 1 KiB messages: calling the runtime directly, posting one
// message per request through the gateway over loopback HTTP/1.1 (client, server, runtime and
// broker in this process), and posting 32 per batch request (JSON, bodyText). The ratios of their
// msgs/s are the gateway's share of the runtime's throughput and what batching gains over HTTP.
//
// The gateway is measured with two load generators: "lean" is leanhttp.Client (wrk-like: 64
// persistent connections writing a request encoded once and parsing the answers minimally), which
// leaves the gateway the CPU a deployment's clients, running elsewhere, would leave it;
// "nethttp" is Go's net/http client, which in this process takes about a third of the CPU.
func BenchmarkGatewayAgainstRuntime(b *testing.B) {
	benchGatewayShapes(b, benchRuntime, true)
}

// benchGatewayShapes runs the throughput benchmark's shapes, each with a runtime of its own from
// newRuntime: the runtime directly, and the gateway with one message and 32 per request from the
// lean client and, when nethttp is set, from net/http's client.
func benchGatewayShapes(b *testing.B, newRuntime func(*testing.B) *producer.Runtime, nethttp bool) {
	body := bytes.Repeat([]byte("x"), 1024)
	batch := benchBatch(b, body)
	single := map[string]string{HeaderTags: "tag"}
	b.Run("runtime-direct", func(b *testing.B) {
		send := directSend(newRuntime(b), body)
		b.ReportAllocs()
		runSenders(b, 1, send)
	})
	b.Run("gateway-lean", func(b *testing.B) {
		url := expand(startBenchGateway(b, newRuntime(b)) + MessagesPath)
		b.ReportAllocs()
		runOwnSenders(b, 1, leanSenders(b, url, "application/octet-stream", body, single))
	})
	b.Run("gateway-batch32-lean", func(b *testing.B) {
		url := expand(startBenchGateway(b, newRuntime(b)) + BatchPath)
		b.ReportAllocs()
		runOwnSenders(b, benchBatchSize, leanSenders(b, url, "application/json", batch, nil))
	})
	if !nethttp {
		return
	}
	b.Run("gateway-nethttp", func(b *testing.B) {
		url := expand(startBenchGateway(b, newRuntime(b)) + MessagesPath)
		client := benchHTTPClient(b)
		b.ReportAllocs()
		runSenders(b, 1, func() error {
			return postOK(client, url, "application/octet-stream", body, single)
		})
	})
	b.Run("gateway-batch32-nethttp", func(b *testing.B) {
		url := expand(startBenchGateway(b, newRuntime(b)) + BatchPath)
		client := benchHTTPClient(b)
		b.ReportAllocs()
		runSenders(b, benchBatchSize, func() error {
			return postOK(client, url, "application/json", batch, nil)
		})
	})
}

// benchBatch encodes a batch request of benchBatchSize messages of body, as text.
func benchBatch(b *testing.B, body []byte) []byte {
	b.Helper()
	msgs := make([]JSONMessage, benchBatchSize)
	text := string(body)
	for i := range msgs {
		msgs[i] = JSONMessage{BodyText: &text, Tags: "tag"}
	}
	batch, err := json.Marshal(JSONBatch{Messages: msgs})
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

// benchHTTPClient is a net/http client that keeps a connection per concurrent sender.
func benchHTTPClient(b *testing.B) *http.Client {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency}}
	b.Cleanup(client.CloseIdleConnections)
	return client
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
