package controllers

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// runtimePolicy translates a FaultPolicy spec into the runtime's policy named key: the preset's
// policy, with every field the spec sets overriding it. The schema has already refused what it
// can; the error covers what only the fault table can check. clusterWide says a Cluster's
// faultPolicyRef names the policy: then, with probing, it watches the brokers it routes to unless
// the spec says otherwise (probe.routedBrokers false).
func runtimePolicy(key string, spec *routingv1alpha1.FaultPolicySpec, clusterWide bool) (producer.Policy, error) {
	p, err := producer.PresetPolicy(key, producer.Preset(spec.Preset))
	if err != nil {
		return producer.Policy{}, err
	}
	if len(spec.Rules) > 0 || spec.FailureLatencyMillis != nil {
		if p.Table, err = faultTable(spec, p.Table); err != nil {
			return producer.Policy{}, err
		}
	}
	retry := spec.Retry
	if retry.Attempts > 0 {
		p.Retry.Attempts = int(retry.Attempts)
	}
	if retry.SendTimeoutMillis > 0 {
		p.Retry.SendTimeout = millis(retry.SendTimeoutMillis)
	}
	if retry.PerAttemptTimeoutMillis != nil {
		p.Retry.PerAttemptTimeout = millis(*retry.PerAttemptTimeoutMillis)
	}
	if retry.AdaptivePerAttempt != nil {
		p.Retry.AdaptivePerAttempt = *retry.AdaptivePerAttempt
	}
	if len(retry.RetryOnCodes) > 0 {
		p.Retry.RetryOnCodes = make([]int16, len(retry.RetryOnCodes))
		for i, c := range retry.RetryOnCodes {
			p.Retry.RetryOnCodes[i] = int16(c)
		}
	}
	if retry.RetryAnotherBrokerWhenNotStoreOK != nil {
		p.Retry.RetryAnotherBrokerWhenNotStoreOK = *retry.RetryAnotherBrokerWhenNotStoreOK
	}
	if spec.Probe.Enabled != nil {
		p.Probe.Enabled = *spec.Probe.Enabled
	}
	if spec.Probe.IntervalMillis > 0 {
		p.Probe.Interval = millis(spec.Probe.IntervalMillis)
	}
	if spec.Probe.TimeoutMillis > 0 {
		p.Probe.Timeout = millis(spec.Probe.TimeoutMillis)
	}
	if spec.Probe.RoutedBrokers != nil {
		p.Probe.Routed = *spec.Probe.RoutedBrokers
	} else if clusterWide {
		p.Probe.Routed = p.Probe.Enabled
	}
	if spec.Probe.ProbationProbes != nil {
		p.Probe.ProbationProbes = int(*spec.Probe.ProbationProbes)
	}
	pressureFromSpec(&p.Pressure, &spec.Pressure)
	if h := spec.Hedge; h.Enabled != nil {
		p.Hedge.Enabled = *h.Enabled
	}
	if h := spec.Hedge; h.BudgetPercent != nil {
		p.Hedge.BudgetPercent = int(*h.BudgetPercent)
	}
	if spec.MaxIsolatedPercent != nil {
		p.MaxIsolatedPercent = int(*spec.MaxIsolatedPercent)
	}
	if spec.StallAfterMillis != nil {
		p.StallAfter = millis(*spec.StallAfterMillis)
	}
	if spec.PodHealth != "" {
		p.RespectPodHealth = spec.PodHealth == routingv1alpha1.PodHealthRespect
	}
	if spec.IsolationGrowth != "" {
		p.GrowOnRepeat = spec.IsolationGrowth == routingv1alpha1.IsolationGrowthExponential
	}
	return p, nil
}

// pressureFromSpec overrides the preset's pressure polling with what the spec sets.
func pressureFromSpec(p *producer.PressurePolicy, spec *routingv1alpha1.PressurePolicy) {
	if spec.Enabled != nil {
		p.Enabled = *spec.Enabled
	}
	if spec.SendQueueFillPercent != nil {
		p.SendQueueFillPercent = int(*spec.SendQueueFillPercent)
	}
	if spec.SendQueueHeadWaitMillis != nil {
		p.SendQueueHeadWait = millis(*spec.SendQueueHeadWaitMillis)
	}
	if spec.PageCacheLockMillis != nil {
		p.PageCacheLock = millis(*spec.PageCacheLockMillis)
	}
	if spec.PutLatency99Millis != nil {
		p.PutLatency99 = millis(*spec.PutLatency99Millis)
	}
}

// faultTable builds the threshold table from the custom rules, else the preset's, with the
// failure latency overridden when the spec sets one.
func faultTable(spec *routingv1alpha1.FaultPolicySpec, preset *fault.Table) (*fault.Table, error) {
	rules := preset.Rules()
	if len(spec.Rules) > 0 {
		rules = make([]fault.Rule, len(spec.Rules))
		for i, r := range spec.Rules {
			rules[i] = fault.Rule{LatencyMillis: r.LatencyMillis, IsolationMillis: r.IsolationMillis}
		}
	}
	failure := preset.FailureLatency().Milliseconds()
	if spec.FailureLatencyMillis != nil {
		failure = *spec.FailureLatencyMillis
	}
	table, err := fault.NewTable(rules, failure)
	if err != nil {
		return nil, fmt.Errorf("fault table: %w", err)
	}
	return table, nil
}

// effectivePolicy renders a runtime policy for status, every default resolved.
func effectivePolicy(p producer.Policy) *routingv1alpha1.EffectiveFaultPolicy {
	e := &routingv1alpha1.EffectiveFaultPolicy{
		Preset:               routingv1alpha1.FaultPreset(p.Preset),
		FailureLatencyMillis: p.Table.FailureLatencyMillis(),
		Attempts:             int32(p.Retry.Attempts),
		OnewayAttempts:       int32(p.Retry.Attempts),
		SendTimeoutMillis:    int32(p.Retry.SendTimeout.Milliseconds()),
		Probe:                p.Probe.Enabled,
		ProbeRoutedBrokers:   p.Probe.Enabled && p.Probe.Routed,
		ProbationProbes:      1,
		IsolationGrowth:      routingv1alpha1.IsolationGrowthNone,
		PodHealth:            routingv1alpha1.PodHealthIgnore,
	}
	if e.Preset == "" {
		e.Preset = routingv1alpha1.PresetDetour
	}
	if p.Probe.Enabled && p.Probe.ProbationProbes > 1 {
		e.ProbationProbes = int32(p.Probe.ProbationProbes)
	}
	if pp := p.Pressure; p.Probe.Enabled && pp.Enabled {
		e.Pressure = &routingv1alpha1.EffectivePressure{SendQueueFillPercent: int32(pp.SendQueueFillPercent),
			SendQueueHeadWaitMillis: int32(pp.SendQueueHeadWait.Milliseconds()),
			PageCacheLockMillis:     int32(pp.PageCacheLock.Milliseconds()), PutLatency99Millis: int32(pp.PutLatency99.Milliseconds())}
	}
	if e.Preset != routingv1alpha1.PresetDisabled {
		e.FailureIsolationMillis = p.Table.FailureIsolation().Milliseconds()
	}
	if e.Preset != routingv1alpha1.PresetDetour {
		e.OnewayAttempts = 1 // RocketMQ makes one attempt for a oneway send
	}
	if p.Retry.PerAttemptTimeout > 0 {
		e.PerAttemptTimeoutMillis = ptr.To(int32(p.Retry.PerAttemptTimeout.Milliseconds()))
		e.AdaptivePerAttempt = p.Retry.AdaptivePerAttempt
	}
	if p.StallAfter > 0 && e.Preset != routingv1alpha1.PresetDisabled {
		e.StallAfterMillis = ptr.To(int32(p.StallAfter.Milliseconds()))
	}
	if p.Hedge.Enabled {
		budget := p.Hedge.BudgetPercent
		if budget == 0 {
			budget = producer.DefaultHedgeBudgetPercent
		}
		e.Hedge = &routingv1alpha1.EffectiveHedge{BudgetPercent: int32(budget)}
	}
	for _, c := range p.Retry.RetryOnCodes {
		e.RetryOnCodes = append(e.RetryOnCodes, int32(c))
	}
	slices.Sort(e.RetryOnCodes)
	if p.GrowOnRepeat {
		e.IsolationGrowth = routingv1alpha1.IsolationGrowthExponential
	}
	if p.RespectPodHealth {
		e.PodHealth = routingv1alpha1.PodHealthRespect
	}
	if p.MaxIsolatedPercent > 0 && p.MaxIsolatedPercent < 100 {
		e.MaxIsolatedPercent = ptr.To(int32(p.MaxIsolatedPercent))
	}
	return e
}

func millis[T int32 | int64](v T) time.Duration { return time.Duration(v) * time.Millisecond }
