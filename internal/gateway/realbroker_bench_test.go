package gateway

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// BenchmarkGatewayAgainstRuntimeOnRealBroker is BenchmarkGatewayAgainstRuntime's three shapes
// (the runtime directly, the gateway with one message and with 32 per request, from the lean
// client), one after the other and interleaved (see BenchmarkGatewayShapesInterleaved), against
// one real RocketMQ 5.x broker that stores every message (asynchronous flush, as the harness
// configures it). It runs only when asked (-bench) and with DETOUR_ROCKETMQ set:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go test -run '^$' -bench OnRealBroker -count 3 ./internal/gateway/
func BenchmarkGatewayAgainstRuntimeOnRealBroker(b *testing.B) {
	if os.Getenv(rmqtest.EnvDist) == "" {
		b.Skipf("%s is not set: this benchmark needs a real RocketMQ", rmqtest.EnvDist)
	}
	c := rmqtest.Start(b, rmqtest.V5, rmqtest.BrokerConfig{})
	broker := c.Brokers()[0]
	admin := producer.New(producer.Options{})
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.CreateTopic(ctx, broker.Addr, "BenchTopic", 4, 4, 6); err != nil {
		b.Fatal(err)
	}
	newRuntime := func(b *testing.B) *producer.Runtime { return routedRuntime(b, broker.Name, broker.Addr) }
	benchGatewayShapes(b, newRuntime, false)
	b.Run("interleaved", func(b *testing.B) { benchShapesInterleaved(b, newRuntime) })
}
