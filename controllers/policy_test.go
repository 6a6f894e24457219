package controllers

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// TestRuntimePolicyTranslatesTheSpec proves every FaultPolicy field reaches the runtime with its
// unit converted and overrides the preset, and that the preset and failure latency pick the right
// table.
func TestRuntimePolicyTranslatesTheSpec(t *testing.T) {
	spec := routingv1alpha1.FaultPolicySpec{
		Preset:               routingv1alpha1.PresetRocketMQ4,
		FailureLatencyMillis: ptr.To[int64](2500),
		Retry: routingv1alpha1.RetryPolicy{Attempts: 4, SendTimeoutMillis: 2000,
			PerAttemptTimeoutMillis: ptr.To[int32](400), RetryOnCodes: []int32{2, 17},
			RetryAnotherBrokerWhenNotStoreOK: ptr.To(true)},
		Probe: routingv1alpha1.ProbePolicy{Enabled: ptr.To(false), IntervalMillis: 700, TimeoutMillis: 70,
			ProbationProbes: ptr.To[int32](5)},
		Pressure: routingv1alpha1.PressurePolicy{Enabled: ptr.To(true), SendQueueFillPercent: ptr.To[int32](80),
			SendQueueHeadWaitMillis: ptr.To[int32](150), PageCacheLockMillis: ptr.To[int32](0), PutLatency99Millis: ptr.To[int32](900)},
		MaxIsolatedPercent: ptr.To[int32](34),
		PodHealth:          routingv1alpha1.PodHealthIgnore,
		IsolationGrowth:    routingv1alpha1.IsolationGrowthNone,
	}
	p, err := runtimePolicy("ns/p", &spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "ns/p" || p.Retry.Attempts != 4 || p.Retry.SendTimeout != 2*time.Second ||
		p.Retry.PerAttemptTimeout != 400*time.Millisecond || !p.Retry.RetryAnotherBrokerWhenNotStoreOK ||
		len(p.Retry.RetryOnCodes) != 2 || p.Retry.RetryOnCodes[1] != 17 {
		t.Errorf("retry = %+v", p.Retry)
	}
	if p.Probe.Enabled || p.Probe.Interval != 700*time.Millisecond || p.Probe.Timeout != 70*time.Millisecond || p.Probe.ProbationProbes != 5 {
		t.Errorf("probe = %+v", p.Probe)
	}
	if want := (producer.PressurePolicy{Enabled: true, SendQueueFillPercent: 80, SendQueueHeadWait: 150 * time.Millisecond,
		PutLatency99: 900 * time.Millisecond}); p.Pressure != want {
		t.Errorf("pressure = %+v, want %+v", p.Pressure, want)
	}
	if p.MaxIsolatedPercent != 34 || p.RespectPodHealth || p.GrowOnRepeat {
		t.Errorf("caps = %d, %v, %v", p.MaxIsolatedPercent, p.RespectPodHealth, p.GrowOnRepeat)
	}
	if p.Preset != producer.PresetRocketMQ4 || p.Behavior() != "RocketMQ4~table~retry+isolationCap+perAttemptCap" {
		t.Errorf("preset %q, behavior %q", p.Preset, p.Behavior())
	}
	// RocketMQ4's table with a failure counted as 2500 ms: 2000 <= 2500 < 3000 isolates for 120 s.
	if got := p.Table.IsolationFor(p.Table.FailureLatency()); got != 120*time.Second {
		t.Errorf("failure isolation = %v, want 120s", got)
	}
}

// TestRuntimePolicyOfAPresetAloneIsThePresetsPolicy proves that a spec naming only a preset (as
// the schema defaults it) runs exactly that preset: no extension sneaks in through a default.
func TestRuntimePolicyOfAPresetAloneIsThePresetsPolicy(t *testing.T) {
	for _, preset := range []routingv1alpha1.FaultPreset{routingv1alpha1.PresetDetour, routingv1alpha1.PresetRocketMQ5,
		routingv1alpha1.PresetRocketMQ4, routingv1alpha1.PresetDisabled} {
		t.Run(string(preset), func(t *testing.T) {
			spec := routingv1alpha1.FaultPolicySpec{Preset: preset,
				Retry: routingv1alpha1.RetryPolicy{Attempts: 3, SendTimeoutMillis: 3000},
				Probe: routingv1alpha1.ProbePolicy{IntervalMillis: 2000, TimeoutMillis: 200}}
			p, err := runtimePolicy("ns/p", &spec, false)
			if err != nil {
				t.Fatal(err)
			}
			want, err := producer.PresetPolicy("ns/p", producer.Preset(preset))
			if err != nil {
				t.Fatal(err)
			}
			if p.Behavior() != string(preset) || !reflect.DeepEqual(p, want) {
				t.Errorf("policy %+v (%s), want %+v", p, p.Behavior(), want)
			}
		})
	}
	p, err := runtimePolicy("ns/p", &routingv1alpha1.FaultPolicySpec{}, false)
	if err != nil || p.Behavior() != "Detour" {
		t.Errorf("an empty spec runs %q (%v), want Detour", p.Behavior(), err)
	}
}

// TestEffectivePolicyResolvesEveryDefault proves status spells out what runs for each preset.
func TestEffectivePolicyResolvesEveryDefault(t *testing.T) {
	tests := []struct {
		spec routingv1alpha1.FaultPolicySpec
		want routingv1alpha1.EffectiveFaultPolicy
	}{
		{routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.PresetRocketMQ5}, routingv1alpha1.EffectiveFaultPolicy{
			Preset: routingv1alpha1.PresetRocketMQ5, FailureLatencyMillis: 10000, FailureIsolationMillis: 10000,
			Attempts: 3, OnewayAttempts: 1, SendTimeoutMillis: 3000, RetryOnCodes: []int32{1, 2, 14, 16, 17, 204, 205, 1500},
			IsolationGrowth: routingv1alpha1.IsolationGrowthNone, PodHealth: routingv1alpha1.PodHealthIgnore, ProbationProbes: 1}},
		{routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.PresetRocketMQ4}, routingv1alpha1.EffectiveFaultPolicy{
			Preset: routingv1alpha1.PresetRocketMQ4, FailureLatencyMillis: 30000, FailureIsolationMillis: 600000,
			Attempts: 3, OnewayAttempts: 1, SendTimeoutMillis: 3000, RetryOnCodes: []int32{1, 14, 16, 17, 204, 205},
			IsolationGrowth: routingv1alpha1.IsolationGrowthNone, PodHealth: routingv1alpha1.PodHealthIgnore, ProbationProbes: 1}},
		{routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.PresetDisabled}, routingv1alpha1.EffectiveFaultPolicy{
			Preset: routingv1alpha1.PresetDisabled, FailureLatencyMillis: 10000, FailureIsolationMillis: 0,
			Attempts: 3, OnewayAttempts: 1, SendTimeoutMillis: 3000, RetryOnCodes: []int32{1, 2, 14, 16, 17, 204, 205, 1500},
			IsolationGrowth: routingv1alpha1.IsolationGrowthNone, PodHealth: routingv1alpha1.PodHealthIgnore, ProbationProbes: 1}},
		{routingv1alpha1.FaultPolicySpec{}, routingv1alpha1.EffectiveFaultPolicy{
			Preset: routingv1alpha1.PresetDetour, FailureLatencyMillis: 10000, FailureIsolationMillis: 10000,
			Attempts: 3, OnewayAttempts: 3, SendTimeoutMillis: 3000, PerAttemptTimeoutMillis: ptr.To[int32](1000),
			AdaptivePerAttempt: true, StallAfterMillis: ptr.To[int32](100),
			RetryOnCodes: []int32{1, 2, 14, 16, 17, 204, 205, 1500}, Probe: true, ProbationProbes: 3,
			Pressure: &routingv1alpha1.EffectivePressure{SendQueueFillPercent: 50, SendQueueHeadWaitMillis: 100,
				PageCacheLockMillis: 500, PutLatency99Millis: 500},
			IsolationGrowth: routingv1alpha1.IsolationGrowthExponential, PodHealth: routingv1alpha1.PodHealthRespect,
			MaxIsolatedPercent: ptr.To[int32](99)}},
	}
	for _, tc := range tests {
		p, err := runtimePolicy("ns/p", &tc.spec, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := effectivePolicy(p); !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("preset %q: effective\n %+v\nwant\n %+v", tc.spec.Preset, *got, tc.want)
		}
	}
}

// TestRuntimePolicyCustomRules proves custom rules replace the preset's thresholds.
func TestRuntimePolicyCustomRules(t *testing.T) {
	spec := routingv1alpha1.FaultPolicySpec{Rules: []routingv1alpha1.FaultRule{
		{LatencyMillis: 100, IsolationMillis: 0}, {LatencyMillis: 200, IsolationMillis: 1000}}}
	p, err := runtimePolicy("ns/p", &spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Table.IsolationFor(250 * time.Millisecond); got != time.Second {
		t.Errorf("IsolationFor(250ms) = %v, want 1s", got)
	}
}

// TestPolicyKeyRoundTrip proves keys split back into namespace and name, and the default policy
// is not mistaken for a resource.
func TestPolicyKeyRoundTrip(t *testing.T) {
	ns, name, ok := scope.ParsePolicyKey(scope.PolicyKey("team-a", "strict"))
	if !ok || ns != "team-a" || name != "strict" {
		t.Errorf("split = %q, %q, %v", ns, name, ok)
	}
	if _, _, ok := scope.ParsePolicyKey(""); ok {
		t.Error("the default policy split as a resource")
	}
}

// TestClusterWidePolicyWatchesRoutedBrokersUnlessItSaysOtherwise proves probe.routedBrokers
// defaults to on for a policy a Cluster names, when probing is on, and that a spec that sets it
// (either way) or has no probing keeps what it says.
func TestClusterWidePolicyWatchesRoutedBrokersUnlessItSaysOtherwise(t *testing.T) {
	tests := []struct {
		name        string
		spec        routingv1alpha1.FaultPolicySpec
		clusterWide bool
		want        bool
	}{
		{"Topics only, unset", routingv1alpha1.FaultPolicySpec{}, false, false},
		{"a Cluster's, unset", routingv1alpha1.FaultPolicySpec{}, true, true},
		{"a Cluster's, set false", routingv1alpha1.FaultPolicySpec{Probe: routingv1alpha1.ProbePolicy{RoutedBrokers: ptr.To(false)}}, true, false},
		{"Topics only, set true", routingv1alpha1.FaultPolicySpec{Probe: routingv1alpha1.ProbePolicy{RoutedBrokers: ptr.To(true)}}, false, true},
		{"a Cluster's without probing (RocketMQ5)", routingv1alpha1.FaultPolicySpec{Preset: routingv1alpha1.PresetRocketMQ5}, true, false},
		{"a Cluster's, probing off", routingv1alpha1.FaultPolicySpec{Probe: routingv1alpha1.ProbePolicy{Enabled: ptr.To(false)}}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := runtimePolicy("ns/p", &tc.spec, tc.clusterWide)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Probe.Enabled && p.Probe.Routed; got != tc.want {
				t.Errorf("watches routed brokers %v, want %v", got, tc.want)
			}
			if got := effectivePolicy(p).ProbeRoutedBrokers; got != tc.want {
				t.Errorf("status.effective.probeRoutedBrokers %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHedgeReachesTheRuntimeAndStatus proves hedging stays off unless the spec turns it on, and
// that the switch and the budget (2 % unless set) reach the runtime and status.effective.
func TestHedgeReachesTheRuntimeAndStatus(t *testing.T) {
	tests := []struct {
		name  string
		hedge routingv1alpha1.HedgePolicy
		want  *routingv1alpha1.EffectiveHedge
	}{
		{name: "unset: off"},
		{name: "off with a budget", hedge: routingv1alpha1.HedgePolicy{Enabled: ptr.To(false), BudgetPercent: ptr.To[int32](5)}},
		{name: "on, budget unset", hedge: routingv1alpha1.HedgePolicy{Enabled: ptr.To(true)},
			want: &routingv1alpha1.EffectiveHedge{BudgetPercent: producer.DefaultHedgeBudgetPercent}},
		{name: "on, budget 5", hedge: routingv1alpha1.HedgePolicy{Enabled: ptr.To(true), BudgetPercent: ptr.To[int32](5)},
			want: &routingv1alpha1.EffectiveHedge{BudgetPercent: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := runtimePolicy("ns/p", &routingv1alpha1.FaultPolicySpec{Hedge: tc.hedge}, false)
			if err != nil {
				t.Fatal(err)
			}
			if p.Hedge.Enabled != (tc.want != nil) {
				t.Errorf("runtime hedging %+v", p.Hedge)
			}
			if got := effectivePolicy(p).Hedge; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("effective hedge %+v, want %+v", got, tc.want)
			}
		})
	}
}
