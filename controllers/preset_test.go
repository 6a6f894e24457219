package controllers

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// TestKubectlShowsTheBehaviourEachPolicyRuns proves that a policy applied with kubectl runs its
// preset exactly (the policy the runtime holds is the preset's, which the differential tests prove
// step by step against RocketMQ's classes), that every field set beside the preset shows in the
// Behavior column, and that status spells out the resolved settings.
func TestKubectlShowsTheBehaviourEachPolicyRuns(t *testing.T) {
	needsEnvtest(t)
	rt := startManager(t)
	ns := newNamespace(t)
	manifest := `apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata: {name: rmq5}
spec: {preset: RocketMQ5}
---
apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata: {name: rmq4}
spec: {preset: RocketMQ4}
---
apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata: {name: disabled}
spec: {preset: Disabled}
---
apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata: {name: empty}
spec: {}
---
apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata: {name: probed}
spec:
  preset: RocketMQ5
  probe: {enabled: true}
---
apiVersion: routing.detour.dev/v1alpha1
kind: FaultPolicy
metadata: {name: tuned}
spec:
  isolationGrowth: None
  maxIsolatedPercent: 30
  rules:
  - {latencyMillis: 100, isolationMillis: 1000}
`
	if out, err := kubectl(t, manifest, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	want := map[string]string{
		"rmq5": "RocketMQ5", "rmq4": "RocketMQ4", "disabled": "Disabled", "empty": "Detour",
		"probed": "RocketMQ5+probing", "tuned": "Detour~table-growth~isolationCap",
	}
	eventually(t, "kubectl get faultpolicies to show every behaviour", func() error {
		out, err := kubectl(t, "", "get", "faultpolicies", "-n", ns)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if header := strings.Join(strings.Fields(firstLine(out)), " "); header != "NAME BEHAVIOR BROKERS ISOLATED READY AGE" {
			return fmt.Errorf("header %q", header)
		}
		got := map[string]string{}
		for _, row := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(row); len(f) > 1 {
				got[f[0]] = f[1]
			}
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("behaviours %v, want %v\n%s", got, want, out)
		}
		return nil
	})
	for name, preset := range map[string]producer.Preset{"rmq5": producer.PresetRocketMQ5, "rmq4": producer.PresetRocketMQ4,
		"disabled": producer.PresetDisabled, "empty": producer.PresetDetour} {
		got, ok := rt.Policy(scope.PolicyKey(ns, name))
		wantPolicy, err := producer.PresetPolicy(scope.PolicyKey(ns, name), preset)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !reflect.DeepEqual(got, wantPolicy) {
			t.Errorf("%s runs %+v, want the %s preset's policy %+v", name, got, preset, wantPolicy)
		}
	}
	fp := getPolicy(t, ns, "rmq5")
	e := fp.Status.Effective
	if e == nil || e.Preset != routingv1alpha1.PresetRocketMQ5 || e.Probe || e.PodHealth != routingv1alpha1.PodHealthIgnore ||
		e.IsolationGrowth != routingv1alpha1.IsolationGrowthNone || e.MaxIsolatedPercent != nil ||
		e.PerAttemptTimeoutMillis != nil || e.FailureIsolationMillis != 10000 || e.OnewayAttempts != 1 {
		t.Errorf("status.effective of preset RocketMQ5 = %+v", e)
	}
}

// TestTopicWithoutAPolicyGetsDetoursDefaults proves what the Topic documentation says: a Topic
// whose FaultPolicy does not exist routes with the runtime's default policy, the Detour preset's,
// and says so.
func TestTopicWithoutAPolicyGetsDetoursDefaults(t *testing.T) {
	needsEnvtest(t)
	rt := startManager(t)
	if p, ok := rt.Policy(""); !ok || p.Behavior() != "Detour" {
		t.Fatalf("the runtime's default policy runs %q", p.Behavior())
	}
	ns := newNamespace(t)
	c := startCluster(t, ns, 2)
	topic := c.createTopic(t, "orders", "missing")
	eventually(t, "the Topic to name the default policy", func() error {
		var got routingv1alpha1.Topic
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(topic), &got); err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if strings.Contains(cond.Message, "the Detour preset's") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	if info, ok := rt.RouteInfo(routeOf(topic)); !ok || info.Policy != "" {
		t.Fatalf("route %+v, want the default policy", info)
	}
}
