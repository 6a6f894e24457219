package grpcfront

import (
	"testing"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/scope"
)

// TestACheckBackGoesOnlyToAStreamOfItsBrokersScope proves that a broker's check-back of a half
// message is handed to a producer stream whose topic routes to that broker's scope, and never to
// one of another tenant's, nor of a Cluster's where the stream publishes on the namespace's pods
// (the narrower scope a plain prefix match would have let in).
func TestACheckBackGoesOnlyToAStreamOfItsBrokersScope(t *testing.T) {
	pods, prod := &producerStream{}, &producerStream{}
	o := &orphanRegistry{byTopic: map[string][]registered{"Orders": {
		{pods, front.Target{Topic: "Orders", Route: "shop/orders", Brokers: scope.Pods("shop")}},
		{prod, front.Target{Topic: "Orders", Route: "shop/prod-orders", Brokers: scope.Cluster("shop", "prod")}},
	}}}
	for _, tc := range []struct {
		name   string
		broker string
		want   *producerStream // nil: no stream takes the check
	}{
		{"a broker of the namespace's pods", "shop/broker-a", pods},
		{"a broker of the namespace's Cluster", "shop/prod/broker-a", prod},
		{"a broker of another Cluster of the namespace", "shop/test/broker-a", nil},
		{"a broker of another namespace", "bank/broker-a", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Twice: streams that fit take turns, so a second stream let in would show.
			for range 2 {
				got, ok := o.pick("Orders", tc.broker)
				if ok != (tc.want != nil) || got != tc.want {
					t.Fatalf("pick(%q) = %p, %v; want %p", tc.broker, got, ok, tc.want)
				}
			}
		})
	}
}
