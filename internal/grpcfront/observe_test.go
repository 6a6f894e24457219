package grpcfront

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// newCountedTestBed is a testBed whose endpoint counts into a registered metrics set, and the
// registry to gather it from.
func newCountedTestBed(t *testing.T) (*testBed, prometheus.Gatherer) {
	t.Helper()
	set := metrics.NewSet()
	reg := prometheus.NewPedanticRegistry()
	if err := set.Register(reg); err != nil {
		t.Fatal(err)
	}
	return newTestBed(t, func(o *Options) { o.Metrics = set.GRPC }), reg
}

// TestCallsAndMessagesAreCountedByTheirCodes proves the endpoint counts each call by method and
// the RocketMQ code it was answered with, each message of a send by its entry's code, and a
// handler's panic both as a panic and as the INTERNAL call it became.
func TestCallsAndMessagesAreCountedByTheirCodes(t *testing.T) {
	bed, reg := newCountedTestBed(t)
	if resp := bed.send(t, newMessage("Orders", "one"), newMessage("Orders", "two")); resp.Status.Code != rmqpb.Code_OK {
		t.Fatalf("answer %v", resp)
	}
	if resp := bed.send(t, newMessage("Unknown", "lost")); resp.Status.Code != rmqpb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("a send to a topic detour does not route was answered %v", resp)
	}
	if _, err := bed.client.QueryRoute(asClient(t), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "Boom"}}); err == nil {
		t.Fatal("a panicking call succeeded")
	}
	got := metricstest.Gathered(t, reg)
	refused := rmqpb.Code_TOPIC_NOT_FOUND.String()
	for series, want := range map[string]float64{
		"detour_grpc_calls_total{code=OK,method=SendMessage}":              1,
		"detour_grpc_calls_total{code=" + refused + ",method=SendMessage}": 1,
		"detour_grpc_calls_total{code=Internal,method=QueryRoute}":         1,
		"detour_grpc_messages_total{code=OK}":                              2,
		"detour_grpc_messages_total{code=" + refused + "}":                 1,
		"detour_grpc_panics_total{}":                                       1,
		"detour_grpc_call_duration_seconds_count{method=SendMessage}":      2,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v (all: %v)", series, got[series], want, got)
		}
	}
}
