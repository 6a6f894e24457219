package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmqprimitive "github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// Sync send throughput against loopback brokersim brokers: detour's runtime and
// rocketmq-client-go's SendSync, at the same concurrency, in one run. Both send the same 128-byte
// body to the same topic on the same two brokers (4 queues each); rocketmq-client-go learns the
// route from a brokersim name server, detour has it pushed.

const benchTopic = "BenchTopic"

type sendBenchEnv struct {
	brokers []*brokersim.Broker
	ns      *brokersim.NameServer
}

// runtime returns a runtime routed to the environment's brokers, 4 write queues each, closed
// when the benchmark ends.
func (env *sendBenchEnv) runtime(b *testing.B) *Runtime {
	b.Helper()
	r := New(Options{})
	b.Cleanup(func() { r.Close() })
	rt := Route{Topic: benchTopic}
	for _, br := range env.brokers {
		r.SetBroker(Broker{Name: br.Name(), Addr: br.Addr(), Ready: true})
		rt.Brokers = append(rt.Brokers, BrokerQueues{Broker: br.Name(), WriteQueues: 4})
	}
	if err := r.SetRoute(rt); err != nil {
		b.Fatal(err)
	}
	return r
}

func startSendBenchEnv(b *testing.B) *sendBenchEnv {
	b.Helper()
	env := &sendBenchEnv{}
	for _, n := range []string{"broker-a", "broker-b"} {
		// CountOnly: a benchmark sends millions of messages; keeping them would measure the GC.
		br, err := brokersim.StartBrokerWith(n, "127.0.0.1:0", brokersim.Options{CountOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		br.CreateTopic(benchTopic, 4)
		env.brokers = append(env.brokers, br)
	}
	ns, err := brokersim.StartNameServer("127.0.0.1:0", env.brokers...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Close() })
	env.ns = ns
	return env
}

// runConcurrently calls send b.N times from g goroutines and reports messages per second.
func runConcurrently(b *testing.B, g int, send func() error) {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := send(); err != nil {
					if failed.Add(1) == 1 {
						b.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

func BenchmarkSendSync(b *testing.B) {
	rlog.SetLogLevel("error")
	env := startSendBenchEnv(b)
	body := make([]byte, 128)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("detour/goroutines=%d", g), func(b *testing.B) {
			r := env.runtime(b)
			ctx := context.Background()
			// Open the connections outside the timed loop, as rocketmq-client-go's side does.
			for range env.brokers {
				if _, err := r.Send(ctx, &Message{Topic: benchTopic, Body: body}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			runConcurrently(b, g, func() error {
				_, err := r.Send(ctx, &Message{Topic: benchTopic, Body: body})
				return err
			})
		})
		b.Run(fmt.Sprintf("rocketmq-client-go/goroutines=%d", g), func(b *testing.B) {
			p, err := rocketmq.NewProducer(
				rmqproducer.WithNameServer([]string{env.ns.Addr()}),
				rmqproducer.WithGroupName(fmt.Sprintf("bench-%d", g)),
				rmqproducer.WithInstanceName(fmt.Sprintf("bench-%d-%d", g, time.Now().UnixNano())),
				rmqproducer.WithRetry(2),
				rmqproducer.WithSendMsgTimeout(3*time.Second),
			)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(); err != nil {
				b.Fatal(err)
			}
			defer p.Shutdown()
			ctx := context.Background()
			// Warm the route and connections outside the timed loop, as detour's route is pushed.
			if _, err := p.SendSync(ctx, rmqprimitive.NewMessage(benchTopic, body)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			runConcurrently(b, g, func() error {
				res, err := p.SendSync(ctx, rmqprimitive.NewMessage(benchTopic, body))
				if err == nil && res.Status != rmqprimitive.SendOK {
					err = fmt.Errorf("status %v", res.Status)
				}
				return err
			})
		})
	}
}

// BenchmarkSendProperties is the properties string a send builds once for all its attempts,
// for a message with tags, keys and two user properties (a new UNIQ_KEY and WAIT added).
func BenchmarkSendProperties(b *testing.B) {
	m := &Message{Topic: benchTopic, Tags: "TagA", Keys: "order-1 order-2", Properties: map[string]string{"region": "eu", "tenant": "t1"}}
	b.ReportAllocs()
	for b.Loop() {
		remoting.EncodeSendProperties(m)
	}
}
