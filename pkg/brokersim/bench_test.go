package brokersim_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// benchCallers is the concurrency of the parallel benchmarks: RunParallel starts
// parallelism*GOMAXPROCS goroutines.
const benchCallers = 64

func setParallelCallers(b *testing.B) {
	p := benchCallers / runtime.GOMAXPROCS(0)
	if p < 1 {
		p = 1
	}
	b.SetParallelism(p)
}

func startBenchBroker(b *testing.B) *brokersim.Broker {
	br, err := brokersim.StartBrokerWith("broker-a", "127.0.0.1:0", brokersim.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close() })
	br.CreateTopic("Bench", 4)
	return br
}

// sendOnce builds and sends one message the way a producer runtime does (fresh UNIQ_KEY,
// properties, V2 header) and checks the answer.
func sendOnce(ctx context.Context, c *remoting.Client, addr string, body []byte, queue int32, st remoting.SerializeType) error {
	m := remoting.Message{Topic: "Bench", Tags: "TagA", Body: body, Properties: map[string]string{
		remoting.PropertyUniqKey: remoting.NewUniqID(), remoting.PropertyWaitStoreMsgOK: "true",
	}}
	h := remoting.SendHeader{
		ProducerGroup: "bench", Topic: m.Topic, DefaultTopic: remoting.DefaultTopic, DefaultTopicQueueNums: 4,
		QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Properties: m.EncodeProperties(), BrokerName: "broker-a",
	}
	req := remoting.NewSendRequest(&h, m.Body, true)
	req.SerializeType = st
	resp, err := c.Invoke(ctx, addr, req)
	if err != nil {
		return err
	}
	_, err = remoting.ParseSendResponse(resp)
	return err
}

// BenchmarkInvokeSend is a full send round trip through remoting.Client to a brokersim broker
// over loopback: build the request, send, wait, parse the answer. The broker answers in the
// request's header serialisation.
func BenchmarkInvokeSend(b *testing.B) {
	br := startBenchBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{})
	defer c.Close()
	body := make([]byte, 256)
	ctx := context.Background()
	for _, st := range []remoting.SerializeType{remoting.JSON, remoting.RocketMQ} {
		if err := sendOnce(ctx, c, br.Addr(), body, 0, st); err != nil {
			b.Fatal(err)
		}
		b.Run("Serial/"+st.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := sendOnce(ctx, c, br.Addr(), body, int32(i&3), st); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Parallel64/"+st.String(), func(b *testing.B) {
			b.ReportAllocs()
			setParallelCallers(b)
			b.RunParallel(func(pb *testing.PB) {
				for i := int32(0); pb.Next(); i++ {
					if err := sendOnce(ctx, c, br.Addr(), body, i&3, st); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkInvokeHeartbeat is the smallest round trip: a cached request and an empty answer.
func BenchmarkInvokeHeartbeat(b *testing.B) {
	br := startBenchBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{})
	defer c.Close()
	req := remoting.NewHeartbeatRequest("bench@1", "bench")
	ctx := context.Background()
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := c.Invoke(ctx, br.Addr(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel64", func(b *testing.B) {
		b.ReportAllocs()
		setParallelCallers(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Invoke(ctx, br.Addr(), req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkClientGoSendSync is rocketmq-client-go's SendSync against the same broker, as the
// reference for BenchmarkInvokeSend (same body, same concurrency).
func BenchmarkClientGoSendSync(b *testing.B) {
	br := startBenchBroker(b)
	ns, err := brokersim.StartNameServer("127.0.0.1:0", br)
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	p := newClientGoProducer(b, ns.Addr(), 3*time.Second, 2)
	body := make([]byte, 256)
	ctx := context.Background()
	send := func() error {
		msg := primitive.NewMessage("Bench", body)
		msg.WithTag("TagA")
		_, err := p.SendSync(ctx, msg)
		return err
	}
	if err := send(); err != nil {
		b.Fatal(err)
	}
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := send(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel64", func(b *testing.B) {
		b.ReportAllocs()
		setParallelCallers(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := send(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
