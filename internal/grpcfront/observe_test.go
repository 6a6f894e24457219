package grpcfront

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/internal/metrics"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// TestCallsAndMessagesAreCountedByTheirCodes proves the endpoint counts each call by method and
// the RocketMQ code it was answered with, each message of a send by its entry's code, and a
// handler's panic both as a panic and as the INTERNAL call it became.
func TestCallsAndMessagesAreCountedByTheirCodes(t *testing.T) {
	set := metrics.NewSet()
	reg := prometheus.NewPedanticRegistry()
	if err := set.Register(reg); err != nil {
		t.Fatal(err)
	}
	bed := newTestBed(t, func(o *Options) { o.Metrics = set.GRPC })
	if resp := bed.send(t, newMessage("Orders", "one"), newMessage("Orders", "two")); resp.Status.Code != rmqpb.Code_OK {
		t.Fatalf("answer %v", resp)
	}
	if resp := bed.send(t, newMessage("Unknown", "lost")); resp.Status.Code != rmqpb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("a send to a topic detour does not route was answered %v", resp)
	}
	if _, err := bed.client.QueryRoute(asClient(t), &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: "Boom"}}); err == nil {
		t.Fatal("a panicking call succeeded")
	}
	got := gathered(t, reg)
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

// gathered reads reg's series as name{label=value,...} -> value (counters; histograms by their
// count), labels in name order.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					labels += ","
				}
				labels += l.GetName() + "=" + l.GetValue()
			}
			labels += "}"
			switch {
			case m.GetCounter() != nil:
				out[mf.GetName()+labels] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[mf.GetName()+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
