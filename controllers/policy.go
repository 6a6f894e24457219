package controllers

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// PolicyKey is the runtime's name for a FaultPolicy: "<namespace>/<name>". FaultPolicies are
// namespaced, the runtime's policies are not.
func PolicyKey(namespace, name string) string { return namespace + "/" + name }

// splitPolicyKey reverses PolicyKey; ok is false for the runtime's default policy ("").
func splitPolicyKey(key string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(key, "/")
	return namespace, name, ok && namespace != "" && name != ""
}

// runtimePolicy translates a FaultPolicy spec into the runtime's policy named key. The schema has
// already refused what it can; the error covers what only the fault table can check.
func runtimePolicy(key string, spec *routingv1alpha1.FaultPolicySpec) (producer.Policy, error) {
	table, err := faultTable(spec)
	if err != nil {
		return producer.Policy{}, err
	}
	retry := spec.Retry
	p := producer.Policy{
		Name:  key,
		Table: table,
		Retry: producer.RetryPolicy{
			Attempts:                         int(retry.Attempts),
			SendTimeout:                      millis(retry.SendTimeoutMillis),
			PerAttemptTimeout:                millis(ptr.Deref(retry.PerAttemptTimeoutMillis, 0)),
			RetryAnotherBrokerWhenNotStoreOK: ptr.Deref(retry.RetryAnotherBrokerWhenNotStoreOK, false),
		},
		Probe: producer.ProbePolicy{
			Enabled:  ptr.Deref(spec.Probe.Enabled, true),
			Interval: millis(spec.Probe.IntervalMillis),
			Timeout:  millis(spec.Probe.TimeoutMillis),
		},
		MaxIsolatedPercent: int(ptr.Deref(spec.MaxIsolatedPercent, 0)),
		RespectPodHealth:   spec.PodHealth != routingv1alpha1.PodHealthIgnore,
		GrowOnRepeat:       spec.IsolationGrowth != routingv1alpha1.IsolationGrowthNone,
	}
	if len(retry.RetryOnCodes) > 0 {
		p.Retry.RetryOnCodes = make([]int16, len(retry.RetryOnCodes))
		for i, c := range retry.RetryOnCodes {
			p.Retry.RetryOnCodes[i] = int16(c)
		}
	}
	return p, nil
}

// faultTable builds the threshold table: the custom rules, else the preset, with the failure
// latency overridden when the spec sets one.
func faultTable(spec *routingv1alpha1.FaultPolicySpec) (*fault.Table, error) {
	preset, err := fault.PresetTable(string(spec.Preset))
	if err != nil {
		return nil, err
	}
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

func millis[T int32 | int64](v T) time.Duration { return time.Duration(v) * time.Millisecond }
