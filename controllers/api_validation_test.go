package controllers

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
)

func validFaultPolicySpec() routingv1alpha1.FaultPolicySpec {
	return routingv1alpha1.FaultPolicySpec{
		Rules: []routingv1alpha1.FaultRule{
			{LatencyMillis: 100, IsolationMillis: 0},
			{LatencyMillis: 500, IsolationMillis: 1000},
			{LatencyMillis: 2000, IsolationMillis: 5000},
		},
	}
}

func validTopicSpec() routingv1alpha1.TopicSpec {
	return routingv1alpha1.TopicSpec{
		TopicName:      "TopicTest",
		BrokerSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "broker"}},
	}
}

// TestFaultPolicyValidation proves that the API server refuses every FaultPolicy that breaks a
// schema rule, with a message that says what must hold, and accepts the valid ones.
func TestFaultPolicyValidation(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	tooMany := make([]routingv1alpha1.FaultRule, 33)
	for i := range tooMany {
		tooMany[i] = routingv1alpha1.FaultRule{LatencyMillis: int64(i * 10), IsolationMillis: int64(i)}
	}
	cases := []struct {
		name    string
		mutate  func(*routingv1alpha1.FaultPolicySpec)
		wantErr string // empty: accepted
	}{
		{"a custom table is accepted", func(*routingv1alpha1.FaultPolicySpec) {}, ""},
		{"an empty spec is accepted and means the Detour preset",
			func(s *routingv1alpha1.FaultPolicySpec) { *s = routingv1alpha1.FaultPolicySpec{} }, ""},
		{"decreasing latency thresholds are refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules[1].LatencyMillis = 50
		}, "rules must be strictly increasing in latencyMillis"},
		{"repeated latency thresholds are refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules[1].LatencyMillis = 100
		}, "rules must be strictly increasing in latencyMillis"},
		{"decreasing isolation is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules[2].IsolationMillis = 500
		}, "rules must be non-decreasing in isolationMillis"},
		{"more than 32 rules are refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules = tooMany
		}, "must have at most 32 items"},
		{"a latency above one hour is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules[2].LatencyMillis = 3600001
		}, "should be less than or equal to 3600000"},
		{"a negative isolation is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules[0].IsolationMillis = -1
		}, "should be greater than or equal to 0"},
		{"rules override a preset's table", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset = routingv1alpha1.PresetRocketMQ4
		}, ""},
		{"rules with the Disabled preset are refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset = routingv1alpha1.PresetDisabled
		}, "rules and failureLatencyMillis must not be set with preset Disabled, which isolates nothing"},
		{"a failure latency with the Disabled preset is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules, s.Preset, s.FailureLatencyMillis = nil, routingv1alpha1.PresetDisabled, ptr.To[int64](100)
		}, "rules and failureLatencyMillis must not be set with preset Disabled, which isolates nothing"},
		{"the Disabled preset alone is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules, s.Preset = nil, routingv1alpha1.PresetDisabled
		}, ""},
		{"watching routed brokers under Detour's probing is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.RoutedBrokers = ptr.To(true)
		}, ""},
		{"watching routed brokers with probing turned on in a RocketMQ preset is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Probe.Enabled, s.Probe.RoutedBrokers = routingv1alpha1.PresetRocketMQ5, ptr.To(true), ptr.To(true)
		}, ""},
		{"watching routed brokers under a preset without probing is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Probe.RoutedBrokers = routingv1alpha1.PresetRocketMQ5, ptr.To(true)
		}, "probe.routedBrokers needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"},
		{"watching routed brokers with probing turned off is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.Enabled, s.Probe.RoutedBrokers = ptr.To(false), ptr.To(true)
		}, "probe.routedBrokers needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"},
		{"a probation under Detour's probing is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.ProbationProbes = ptr.To[int32](5)
		}, ""},
		{"a probation of one good probe under a preset without probing is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Probe.ProbationProbes = routingv1alpha1.PresetRocketMQ5, ptr.To[int32](1)
		}, ""},
		{"a probation under a preset without probing is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Probe.ProbationProbes = routingv1alpha1.PresetRocketMQ5, ptr.To[int32](3)
		}, "probe.probationProbes above 1 needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"},
		{"a probation of no probe is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.ProbationProbes = ptr.To[int32](0)
		}, "should be greater than or equal to 1"},
		{"a probation of more than 100 probes is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.ProbationProbes = ptr.To[int32](101)
		}, "should be less than or equal to 100"},
		{"pressure thresholds under Detour are accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Pressure = routingv1alpha1.PressurePolicy{SendQueueFillPercent: ptr.To[int32](80), SendQueueHeadWaitMillis: ptr.To[int32](0)}
		}, ""},
		{"pressure polling under a preset without probing is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Pressure.Enabled = routingv1alpha1.PresetRocketMQ4, ptr.To(true)
		}, "pressure.enabled needs probing: probe.enabled true, or the Detour preset with probe.enabled unset"},
		{"pressure polling with probing turned on in a RocketMQ preset is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Probe.Enabled, s.Pressure.Enabled = routingv1alpha1.PresetRocketMQ5, ptr.To(true), ptr.To(true)
		}, ""},
		{"hedging under the Detour preset is accepted", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Hedge.Enabled, s.Hedge.BudgetPercent = ptr.To(true), ptr.To[int32](5)
		}, ""},
		{"hedging under a RocketMQ preset is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Preset, s.Hedge.Enabled = routingv1alpha1.PresetRocketMQ5, ptr.To(true)
		}, "hedge.enabled needs the Detour preset"},
		{"a hedge budget above 50 percent is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Hedge.BudgetPercent = ptr.To[int32](51)
		}, "should be less than or equal to 50"},
		{"a send-queue fill above 100 percent is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Pressure.SendQueueFillPercent = ptr.To[int32](101)
		}, "should be less than or equal to 100"},
		{"a negative page-cache lock threshold is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Pressure.PageCacheLockMillis = ptr.To[int32](-1)
		}, "should be greater than or equal to 0"},
		{"Off is not a preset", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules, s.Preset = nil, "Off"
		}, `Unsupported value: "Off"`},
		{"an unknown preset is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Rules, s.Preset = nil, "RocketMQ3"
		}, `Unsupported value: "RocketMQ3"`},
		{"a zero failure latency is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.FailureLatencyMillis = ptr.To[int64](0)
		}, "spec.failureLatencyMillis: Invalid value: 0: spec.failureLatencyMillis in body should be greater than or equal to 1"},
		{"attempts below one are refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Retry.Attempts = -1
		}, "spec.retry.attempts in body should be greater than or equal to 1"},
		{"more than 16 attempts are refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Retry.Attempts = 17
		}, "spec.retry.attempts in body should be less than or equal to 16"},
		{"a per-attempt timeout above the send timeout is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Retry.SendTimeoutMillis = 1000
			s.Retry.PerAttemptTimeoutMillis = ptr.To[int32](1500)
		}, "perAttemptTimeoutMillis must not exceed sendTimeoutMillis"},
		{"a per-attempt timeout above the default send timeout is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Retry.PerAttemptTimeoutMillis = ptr.To[int32](3001)
		}, "perAttemptTimeoutMillis must not exceed sendTimeoutMillis"},
		{"a retry code out of range is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Retry.RetryOnCodes = []int32{17, 0}
		}, "should be greater than or equal to 1"},
		{"a probe timeout not below its interval is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.IntervalMillis, s.Probe.TimeoutMillis = 500, 500
		}, "timeoutMillis must be less than intervalMillis"},
		{"a probe interval below 100 ms is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.Probe.IntervalMillis = 50
		}, "spec.probe.intervalMillis in body should be greater than or equal to 100"},
		{"a zero isolated share is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.MaxIsolatedPercent = ptr.To[int32](0)
		}, "spec.maxIsolatedPercent in body should be greater than or equal to 1"},
		{"an isolated share above 100 percent is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.MaxIsolatedPercent = ptr.To[int32](101)
		}, "spec.maxIsolatedPercent in body should be less than or equal to 100"},
		{"an unknown pod health mode is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.PodHealth = "Sometimes"
		}, `Unsupported value: "Sometimes"`},
		{"an unknown isolation growth is refused", func(s *routingv1alpha1.FaultPolicySpec) {
			s.IsolationGrowth = "Linear"
		}, `Unsupported value: "Linear"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fp-" + itoa(i)}}
			fp.Spec = validFaultPolicySpec()
			tc.mutate(&fp.Spec)
			expectCreate(t, fp, tc.wantErr)
		})
	}
}

// TestFaultPolicyDefaults proves the schema fills the documented defaults: the Detour preset and
// RocketMQ's retry and probe numbers, which every preset shares; whatever differs between presets
// (probing, pod health, growth, caps) stays unset, so the preset decides it.
func TestFaultPolicyDefaults(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	fp := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minimal"}}
	if err := k8sClient.Create(context.Background(), fp); err != nil {
		t.Fatalf("creating a minimal FaultPolicy: %v", err)
	}
	s := fp.Spec
	if s.Retry.Attempts != 3 || s.Retry.SendTimeoutMillis != 3000 {
		t.Errorf("retry defaults = %+v, want 3 attempts and 3000 ms", s.Retry)
	}
	if s.Probe.Enabled != nil || s.Probe.IntervalMillis != 2000 || s.Probe.TimeoutMillis != 200 {
		t.Errorf("probe defaults = %+v, want enabled unset, 2000 ms interval, 200 ms timeout", s.Probe)
	}
	if s.Preset != routingv1alpha1.PresetDetour || s.PodHealth != "" || s.IsolationGrowth != "" ||
		s.MaxIsolatedPercent != nil || s.Retry.PerAttemptTimeoutMillis != nil {
		t.Errorf("spec = %+v, want preset Detour and the preset's own fields unset", s)
	}
	if s.Hedge.Enabled != nil || s.Hedge.BudgetPercent == nil || *s.Hedge.BudgetPercent != 2 {
		t.Errorf("hedge defaults = %+v, want hedging off and a budget of 2 percent", s.Hedge)
	}
}

// TestTopicValidation proves that the API server refuses every Topic that breaks RocketMQ's topic
// rules or the schema's bounds, with the rule's message.
func TestTopicValidation(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	cases := []struct {
		name    string
		mutate  func(*routingv1alpha1.TopicSpec)
		wantErr string
	}{
		{"a valid topic is accepted", func(*routingv1alpha1.TopicSpec) {}, ""},
		{"percent and pipe are legal topic characters", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = "%RETRY%group|a-b_c"
		}, ""},
		{"a dot is an illegal topic character", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = "orders.eu"
		}, "spec.topicName in body should match '^[%|a-zA-Z0-9_-]+$'"},
		{"a topic longer than 127 characters is refused", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = strings.Repeat("t", 128)
		}, "may not be more than 127 bytes"},
		{"an empty topic is refused", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = ""
		}, "spec.topicName in body should be at least 1 chars long"},
		{"TBW102 is a system topic", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = "TBW102"
		}, "topicName must not be a RocketMQ system topic"},
		{"SCHEDULE_TOPIC_XXXX is a system topic", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = "SCHEDULE_TOPIC_XXXX"
		}, "topicName must not be a RocketMQ system topic"},
		{"the rmq_sys_ prefix is reserved", func(s *routingv1alpha1.TopicSpec) {
			s.TopicName = "rmq_sys_wheel"
		}, "topicName must not be a RocketMQ system topic"},
		{"write queues below one are refused", func(s *routingv1alpha1.TopicSpec) {
			s.WriteQueueNums = -1
		}, "spec.writeQueueNums in body should be greater than or equal to 1"},
		{"more than 1024 write queues are refused", func(s *routingv1alpha1.TopicSpec) {
			s.WriteQueueNums = 1025
		}, "spec.writeQueueNums in body should be less than or equal to 1024"},
		{"more than 1024 read queues are refused", func(s *routingv1alpha1.TopicSpec) {
			s.ReadQueueNums = 1025
		}, "spec.readQueueNums in body should be less than or equal to 1024"},
		{"a perm outside 2, 4, 6 is refused", func(s *routingv1alpha1.TopicSpec) {
			s.Perm = 3
		}, "Unsupported value: 3"},
		{"a faultPolicyRef that is not a resource name is refused", func(s *routingv1alpha1.TopicSpec) {
			s.FaultPolicyRef = &routingv1alpha1.FaultPolicyReference{Name: "Not_A_Name"}
		}, "spec.faultPolicyRef.name in body should match"},
		{"an empty faultPolicyRef name is refused", func(s *routingv1alpha1.TopicSpec) {
			s.FaultPolicyRef = &routingv1alpha1.FaultPolicyReference{}
		}, "spec.faultPolicyRef.name in body should be at least 1 chars long"},
		{"a topic on a cluster is accepted", func(s *routingv1alpha1.TopicSpec) {
			s.BrokerSelector, s.ClusterRef = nil, &routingv1alpha1.ClusterReference{Name: "prod"}
		}, ""},
		{"both clusterRef and brokerSelector are refused", func(s *routingv1alpha1.TopicSpec) {
			s.ClusterRef = &routingv1alpha1.ClusterReference{Name: "prod"}
		}, "set exactly one of clusterRef and brokerSelector"},
		{"neither clusterRef nor brokerSelector is refused", func(s *routingv1alpha1.TopicSpec) {
			s.BrokerSelector = nil
		}, "set exactly one of clusterRef and brokerSelector"},
		{"a clusterRef that is not a resource name is refused", func(s *routingv1alpha1.TopicSpec) {
			s.BrokerSelector, s.ClusterRef = nil, &routingv1alpha1.ClusterReference{Name: "Prod_1"}
		}, "spec.clusterRef.name in body should match"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "topic-" + itoa(i)}}
			topic.Spec = validTopicSpec()
			tc.mutate(&topic.Spec)
			expectCreate(t, topic, tc.wantErr)
		})
	}
}

// TestClusterValidation proves that the API server refuses every Cluster that breaks a schema
// rule, with a message that says what must hold, and defaults the refresh interval.
func TestClusterValidation(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	cases := []struct {
		name    string
		ns      []string
		refresh int32
		wantErr string
	}{
		{"host:port name servers are accepted", []string{"namesrv-0.namesrv:9876", "10.0.0.7:9876"}, 0, ""},
		{"no name server is refused", nil, 0, "spec.nameServers: Required value"},
		{"a name server without a port is refused", []string{"namesrv"}, 0, "spec.nameServers[0] in body should match"},
		{"a port beyond 65535 is refused", []string{"namesrv:70000"}, 0, "nameServers must be host:port with a port from 1 to 65535"},
		{"a port of zero is refused", []string{"namesrv:0"}, 0, "nameServers must be host:port with a port from 1 to 65535"},
		{"a repeated name server is refused", []string{"namesrv:9876", "namesrv:9876"}, 0, `spec.nameServers[1]: Duplicate value: "namesrv:9876"`},
		{"more than 16 name servers are refused", func() (out []string) {
			for i := range 17 {
				out = append(out, "ns-"+itoa(i)+":9876")
			}
			return out
		}(), 0, "must have at most 16 items"},
		{"a refresh below one second is refused", []string{"namesrv:9876"}, -1, "spec.routeRefreshSeconds in body should be greater than or equal to 1"},
		{"a refresh over an hour is refused", []string{"namesrv:9876"}, 3601, "spec.routeRefreshSeconds in body should be less than or equal to 3600"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-" + itoa(i)},
				Spec: routingv1alpha1.ClusterSpec{NameServers: tc.ns, RouteRefreshSeconds: tc.refresh}}
			expectCreate(t, cl, tc.wantErr)
			if tc.wantErr == "" && cl.Spec.RouteRefreshSeconds != 30 {
				t.Errorf("routeRefreshSeconds defaulted to %d, want 30", cl.Spec.RouteRefreshSeconds)
			}
		})
	}
}

// TestClusterProxyValidation proves that the API server refuses a Cluster's spec.proxy that
// breaks a rule, saying what must hold, and accepts the ways of reaching a Proxy.
func TestClusterProxyValidation(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	cases := []struct {
		name    string
		proxy   routingv1alpha1.ClusterProxy
		wantErr string
	}{
		{"a plaintext Proxy is accepted", routingv1alpha1.ClusterProxy{Address: "rocketmq-proxy.rocketmq.svc:8081"}, ""},
		{"a TLS Proxy with its CA is accepted", routingv1alpha1.ClusterProxy{Address: "10.0.0.9:8081",
			TLS: &routingv1alpha1.ClusterProxyTLS{CABundle: ca, ServerName: "rocketmq-proxy"}}, ""},
		{"a TLS Proxy without verification is accepted", routingv1alpha1.ClusterProxy{Address: "proxy:8081",
			TLS: &routingv1alpha1.ClusterProxyTLS{InsecureSkipVerify: ptr.To(true)}}, ""},
		{"an address without a port is refused", routingv1alpha1.ClusterProxy{Address: "proxy"}, "spec.proxy.address in body should match"},
		{"a port beyond 65535 is refused", routingv1alpha1.ClusterProxy{Address: "proxy:70000"}, "address must be host:port with a port from 1 to 65535"},
		{"a port of zero is refused", routingv1alpha1.ClusterProxy{Address: "proxy:0"}, "address must be host:port with a port from 1 to 65535"},
		{"no address is refused", routingv1alpha1.ClusterProxy{}, "spec.proxy.address"},
		{"a CA with verification off is refused", routingv1alpha1.ClusterProxy{Address: "proxy:8081",
			TLS: &routingv1alpha1.ClusterProxyTLS{CABundle: ca, InsecureSkipVerify: ptr.To(true)}}, "caBundle and insecureSkipVerify: true must not both be set"},
		{"a server name that is no host name is refused", routingv1alpha1.ClusterProxy{Address: "proxy:8081",
			TLS: &routingv1alpha1.ClusterProxyTLS{ServerName: "proxy:8081"}}, "spec.proxy.tls.serverName in body should match"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxied-" + itoa(i)},
				Spec: routingv1alpha1.ClusterSpec{NameServers: []string{"namesrv:9876"}, Proxy: &tc.proxy}}
			expectCreate(t, cl, tc.wantErr)
		})
	}
}

// TestTopicCannotMoveBetweenClusterAndSelector proves a Topic keeps the kind of route it was
// created with.
func TestTopicCannotMoveBetweenClusterAndSelector(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	ctx := context.Background()
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moving"}, Spec: validTopicSpec()}
	if err := k8sClient.Create(ctx, topic); err != nil {
		t.Fatalf("creating the topic: %v", err)
	}
	topic.Spec.BrokerSelector, topic.Spec.ClusterRef = nil, &routingv1alpha1.ClusterReference{Name: "prod"}
	err := k8sClient.Update(ctx, topic)
	if err == nil || !strings.Contains(err.Error(), "a Topic cannot move between clusterRef and brokerSelector") {
		t.Fatalf("moving the topic to a cluster: err = %v, want the rule's message", err)
	}
}

// TestTopicNameIsImmutable proves a Topic cannot be re-pointed at another RocketMQ topic, which
// would orphan the one created on the brokers.
func TestTopicNameIsImmutable(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	ctx := context.Background()
	topic := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "immutable"}, Spec: validTopicSpec()}
	if err := k8sClient.Create(ctx, topic); err != nil {
		t.Fatalf("creating the topic: %v", err)
	}
	topic.Spec.TopicName = "OtherTopic"
	err := k8sClient.Update(ctx, topic)
	if err == nil || !strings.Contains(err.Error(), "topicName is immutable") {
		t.Fatalf("renaming the topic: err = %v, want the immutability message", err)
	}
}

// TestSamplesAreAccepted proves every object in config/samples is valid.
func TestSamplesAreAccepted(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	for _, obj := range readSamples(t) {
		obj.SetNamespace(ns)
		if err := k8sClient.Create(context.Background(), obj); err != nil {
			t.Errorf("creating sample %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
}

// expectCreate creates obj and checks the outcome: accepted when wantErr is empty, else refused
// with wantErr in the message and nothing stored.
func expectCreate(t *testing.T, obj client.Object, wantErr string) {
	t.Helper()
	ctx := context.Background()
	err := k8sClient.Create(ctx, obj)
	if wantErr == "" {
		if err != nil {
			t.Fatalf("create refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("create accepted, want refusal with %q", wantErr)
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("create refused with %q, want the message %q", err.Error(), wantErr)
	}
	if getErr := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); getErr == nil {
		t.Fatalf("a refused object was stored")
	}
}

func readSamples(t *testing.T) []client.Object {
	t.Helper()
	var out []client.Object
	for _, name := range []string{
		"routing_v1alpha1_faultpolicy.yaml",
		"routing_v1alpha1_faultpolicy_custom.yaml",
		"routing_v1alpha1_topic.yaml",
		"existing-cluster/cluster.yaml",
		"existing-cluster/faultpolicy.yaml",
		"existing-cluster/topic.yaml",
	} {
		data, err := os.ReadFile(filepath.Join("..", "config", "samples", name))
		if err != nil {
			t.Fatalf("reading sample: %v", err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(data, &meta); err != nil {
			t.Fatalf("decoding %s: %v", name, err)
		}
		var obj client.Object
		switch meta.Kind {
		case "FaultPolicy":
			obj = &routingv1alpha1.FaultPolicy{}
		case "Topic":
			obj = &routingv1alpha1.Topic{}
		case "Cluster":
			obj = &routingv1alpha1.Cluster{}
		default:
			t.Fatalf("sample %s has unexpected kind %q", name, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(data, obj); err != nil {
			t.Fatalf("decoding %s: %v", name, err)
		}
		out = append(out, obj)
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
