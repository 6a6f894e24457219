package facade

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// BenchmarkConcurrentClientsAskingOneRoute measures the facade's amplification: upstream route
// requests per client route request, with many clients (each its own connection) polling the same
// topic at once against a name server on loopback. upstream/req is 1 when every client request
// is forwarded on its own.
func BenchmarkConcurrentClientsAskingOneRoute(b *testing.B) {
	f := start(b, Options{})
	var served atomic.Int64
	before := f.ns.RouteQueries()
	b.SetParallelism(16) // 32 clients on 2 cores, more than the cores so requests overlap
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := remoting.NewClient(remoting.ClientOptions{})
		defer client.Close()
		req := remoting.NewGetRouteInfoRequest("Governed")
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			resp, err := client.Invoke(ctx, f.srv.Addr(), req)
			cancel()
			if err != nil || resp.Code != remoting.Success {
				b.Errorf("route through the facade: %v %v", resp, err)
				return
			}
			served.Add(1)
		}
	})
	b.StopTimer()
	if n := served.Load(); n > 0 {
		b.ReportMetric(float64(f.ns.RouteQueries()-before)/float64(n), "upstream/req")
	}
}
