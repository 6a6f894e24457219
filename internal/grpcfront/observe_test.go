package grpcfront

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/testsupport/metricstest"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/rmqpb"
	"github.com/detourmq/detour/pkg/scope"
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
		// Only messages sent through the runtime count by where they went: the two stored, in
		// the namespace whose broker pods the topic's Topic selects (no Cluster).
		"detour_door_messages_total{cluster=shop,door=grpc,result=stored}": 2,
		"detour_door_messages_total{cluster=shop,door=grpc,result=failed}": 0,
		"detour_door_send_duration_seconds_count{cluster=shop,door=grpc}":  1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v (all: %v)", series, got[series], want, got)
		}
	}
}

// TestDoorCountsOnlyWhatStaysStored proves a message stored with the Proxy's "stored, but" codes
// counts as stored, while a half message stored without SEND_OK counts as failed: the endpoint
// rolled it back, so nothing of it stays.
func TestDoorCountsOnlyWhatStaysStored(t *testing.T) {
	flushTimeout := &rmqpb.SendResultEntry{Status: &rmqpb.Status{Code: rmqpb.Code_MASTER_PERSISTENCE_TIMEOUT}}
	ok := &rmqpb.SendResultEntry{Status: okStatus()}
	refused := &rmqpb.SendResultEntry{Status: &rmqpb.Status{Code: rmqpb.Code_TOPIC_NOT_FOUND}}
	for _, tc := range []struct {
		name           string
		half           bool
		entries        []*rmqpb.SendResultEntry
		stored, failed float64
	}{
		{"a message stored with its disk flush timed out", false, []*rmqpb.SendResultEntry{flushTimeout}, 1, 0},
		{"a half message stored with its disk flush timed out, rolled back", true, []*rmqpb.SendResultEntry{flushTimeout}, 0, 1},
		{"a half message stored with SEND_OK", true, []*rmqpb.SendResultEntry{ok}, 1, 0},
		{"a batch refused", false, []*rmqpb.SendResultEntry{refused, refused}, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := metrics.NewSet()
			reg := prometheus.NewPedanticRegistry()
			if err := set.Register(reg); err != nil {
				t.Fatal(err)
			}
			s := &Server{metrics: set.GRPC}
			s.countSent(front.Target{Topic: "T", Brokers: scope.Cluster("shop", "prod")}, tc.half, tc.entries, time.Millisecond)
			got := metricstest.Gathered(t, reg)
			const series = "detour_door_messages_total{cluster=shop/prod,door=grpc,result="
			if got[series+"stored}"] != tc.stored || got[series+"failed}"] != tc.failed {
				t.Errorf("stored %v, failed %v; want %v, %v", got[series+"stored}"], got[series+"failed}"], tc.stored, tc.failed)
			}
		})
	}
}
