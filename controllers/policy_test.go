package controllers

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

// TestRuntimePolicyTranslatesTheSpec proves every FaultPolicy field reaches the runtime with its
// unit converted, and that the preset and failure latency pick the right table.
func TestRuntimePolicyTranslatesTheSpec(t *testing.T) {
	spec := routingv1alpha1.FaultPolicySpec{
		Preset:               routingv1alpha1.PresetRocketMQ4,
		FailureLatencyMillis: ptr.To[int64](2500),
		Retry: routingv1alpha1.RetryPolicy{Attempts: 4, SendTimeoutMillis: 2000,
			PerAttemptTimeoutMillis: ptr.To[int32](400), RetryOnCodes: []int32{2, 17},
			RetryAnotherBrokerWhenNotStoreOK: ptr.To(true)},
		Probe:              routingv1alpha1.ProbePolicy{Enabled: ptr.To(false), IntervalMillis: 700, TimeoutMillis: 70},
		MaxIsolatedPercent: ptr.To[int32](34),
		PodHealth:          routingv1alpha1.PodHealthIgnore,
		IsolationGrowth:    routingv1alpha1.IsolationGrowthNone,
	}
	p, err := runtimePolicy("ns/p", &spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "ns/p" || p.Retry.Attempts != 4 || p.Retry.SendTimeout != 2*time.Second ||
		p.Retry.PerAttemptTimeout != 400*time.Millisecond || !p.Retry.RetryAnotherBrokerWhenNotStoreOK ||
		len(p.Retry.RetryOnCodes) != 2 || p.Retry.RetryOnCodes[1] != 17 {
		t.Errorf("retry = %+v", p.Retry)
	}
	if p.Probe.Enabled || p.Probe.Interval != 700*time.Millisecond || p.Probe.Timeout != 70*time.Millisecond {
		t.Errorf("probe = %+v", p.Probe)
	}
	if p.MaxIsolatedPercent != 34 || p.RespectPodHealth || p.GrowOnRepeat {
		t.Errorf("caps = %d, %v, %v", p.MaxIsolatedPercent, p.RespectPodHealth, p.GrowOnRepeat)
	}
	// RocketMQ4's table with a failure counted as 2500 ms: 2000 <= 2500 < 3000 isolates for 120 s.
	if got := p.Table.IsolationFor(p.Table.FailureLatency()); got != 120*time.Second {
		t.Errorf("failure isolation = %v, want 120s", got)
	}
}

// TestRuntimePolicyDefaults proves an empty spec (as the schema defaults it) is RocketMQ 5.x's
// table with detour's recovery and pod awareness on.
func TestRuntimePolicyDefaults(t *testing.T) {
	p, err := runtimePolicy("ns/p", &routingv1alpha1.FaultPolicySpec{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Table.IsolationFor(p.Table.FailureLatency()); got != 10*time.Second {
		t.Errorf("failure isolation = %v, want RocketMQ5's 10s", got)
	}
	if !p.Probe.Enabled || !p.RespectPodHealth || !p.GrowOnRepeat || p.Retry.RetryOnCodes != nil {
		t.Errorf("defaults = %+v", p)
	}
}

// TestRuntimePolicyCustomRules proves custom rules replace the preset's thresholds.
func TestRuntimePolicyCustomRules(t *testing.T) {
	spec := routingv1alpha1.FaultPolicySpec{Rules: []routingv1alpha1.FaultRule{
		{LatencyMillis: 100, IsolationMillis: 0}, {LatencyMillis: 200, IsolationMillis: 1000}}}
	p, err := runtimePolicy("ns/p", &spec)
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
	ns, name, ok := splitPolicyKey(PolicyKey("team-a", "strict"))
	if !ok || ns != "team-a" || name != "strict" {
		t.Errorf("split = %q, %q, %v", ns, name, ok)
	}
	if _, _, ok := splitPolicyKey(""); ok {
		t.Error("the default policy split as a resource")
	}
}
