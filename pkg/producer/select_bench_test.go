package producer

import (
	"fmt"
	"testing"

	rmqprimitive "github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/detourmq/detour/pkg/fault"
)

// Selection benchmarks: detour's selection (route lookup, fault checks, pod state) against
// rocketmq-client-go's round-robin selector on the same 3 brokers x 4 queues, serially and from
// parallel goroutines, in one run. rocketmq-client-go has no fault tolerance, so its figure is a
// floor that ours includes fault checks on top of.

func benchQueues() []*rmqprimitive.MessageQueue {
	var qs []*rmqprimitive.MessageQueue
	for _, b := range []string{"broker-a", "broker-b", "broker-c"} {
		for i := 0; i < 4; i++ {
			qs = append(qs, &rmqprimitive.MessageQueue{Topic: "T", BrokerName: b, QueueId: i})
		}
	}
	return qs
}

func benchRuntime(b *testing.B, isolate bool) *Runtime {
	r, _ := newSelectionRuntime(b, 4, "broker-a", "broker-b", "broker-c")
	if isolate {
		r.tolerance("").Update("broker-b", 0, fault.TransportError)
	}
	return r
}

func BenchmarkSelect(b *testing.B) {
	benchSelectByTopic(b)
	benchSelectOnRoute(b)
	benchSelectRocketMQClientGo(b)
}

// benchSelectByTopic measures SelectQueue, topic lookup included, on healthy brokers and with one
// isolated.
func benchSelectByTopic(b *testing.B) {
	for _, isolate := range []bool{false, true} {
		name := "healthy"
		if isolate {
			name = "one-isolated"
		}
		b.Run(fmt.Sprintf("detour/%s/serial", name), func(b *testing.B) {
			r := benchRuntime(b, isolate)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.SelectQueue("T", ""); !ok {
					b.Fatal("no queue")
				}
			}
		})
		b.Run(fmt.Sprintf("detour/%s/parallel", name), func(b *testing.B) {
			r := benchRuntime(b, isolate)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, ok := r.SelectQueue("T", ""); !ok {
						b.Error("no queue")
						return
					}
				}
			})
		})
	}
}

// benchSelectOnRoute measures the same selection on a route the caller already holds, as
// rocketmq-client-go's Select is handed its queue list: this isolates selection from the topic
// lookup.
func benchSelectOnRoute(b *testing.B) {
	b.Run("detour/resolved-route/serial", func(b *testing.B) {
		rt := benchRuntime(b, false).state.Load().index.get("T")
		b.ReportAllocs()
		for b.Loop() {
			if rt.pick("", false) == nil {
				b.Fatal("no queue")
			}
		}
	})
	b.Run("detour/resolved-route/parallel", func(b *testing.B) {
		rt := benchRuntime(b, false).state.Load().index.get("T")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if rt.pick("", false) == nil {
					b.Error("no queue")
					return
				}
			}
		})
	})
	b.Run("detour/one-held-for-topic/serial", func(b *testing.B) {
		r := benchRuntime(b, false)
		r.tolerance("").RefusedTopic("broker-b", "T") // broker-b lacks T: a hold for T alone
		rt := r.state.Load().index.get("T")
		b.ReportAllocs()
		for b.Loop() {
			if q := rt.pick("", false); q == nil || q.b.name == "broker-b" {
				b.Fatal("no queue, or the held broker")
			}
		}
	})
	b.Run("detour/retry-avoiding-last/serial", func(b *testing.B) {
		r := benchRuntime(b, false)
		b.ReportAllocs()
		for b.Loop() {
			if q, _ := r.SelectQueue("T", "broker-a"); q.Broker == "broker-a" {
				b.Fatal("picked the last broker")
			}
		}
	})
	b.Run("detour/retry-after-refused-connection/serial", func(b *testing.B) {
		rt := benchRuntime(b, false).state.Load().index.get("T")
		var disconnected []string
		for _, q := range rt.queues {
			if q.b.name == "broker-a" {
				disconnected = []string{q.b.addr}
				break
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if q := rt.pickAvoiding("broker-a", nil, disconnected); q == nil || q.b.name == "broker-a" {
				b.Fatal("picked the broker whose connection failed")
			}
		}
	})
}

// benchSelectRocketMQClientGo measures rocketmq-client-go's round-robin selector on the same
// queues.
func benchSelectRocketMQClientGo(b *testing.B) {
	msg := &rmqprimitive.Message{Topic: "T"}
	b.Run("rocketmq-client-go/serial", func(b *testing.B) {
		sel := rmqproducer.NewRoundRobinQueueSelector()
		qs := benchQueues()
		b.ReportAllocs()
		for b.Loop() {
			if sel.Select(msg, qs, "") == nil {
				b.Fatal("no queue")
			}
		}
	})
	b.Run("rocketmq-client-go/parallel", func(b *testing.B) {
		sel := rmqproducer.NewRoundRobinQueueSelector()
		qs := benchQueues()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if sel.Select(msg, qs, "") == nil {
					b.Error("no queue")
					return
				}
			}
		})
	})
	b.Run("rocketmq-client-go/retry-avoiding-last/serial", func(b *testing.B) {
		sel := rmqproducer.NewRoundRobinQueueSelector()
		qs := benchQueues()
		b.ReportAllocs()
		for b.Loop() {
			if sel.Select(msg, qs, "broker-a").BrokerName == "broker-a" {
				b.Fatal("picked the last broker")
			}
		}
	})
}
