package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSlimPodKeepsWhatBrokerDiscoveryReads proves the cache transform keeps every field broker
// discovery reads: for each kind of pod the broker it backs (or that it backs none) comes out the
// same from the slim pod as from the whole one.
func TestSlimPodKeepsWhatBrokerDiscoveryReads(t *testing.T) {
	now := metav1.Now()
	ready := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Message: "scheduled"},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "ok", Message: "all ready"}}
	notReady := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	sidecar := corev1.Container{Name: "exporter", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 5557}},
		Env: []corev1.EnvVar{{Name: "NAMESRV_ADDR", Value: "ns:9876"}}}
	broker := func(ports []corev1.ContainerPort, env ...corev1.EnvVar) corev1.Container {
		return corev1.Container{Name: "broker", Image: "apache/rocketmq:5.5.0", Ports: ports,
			Env:       append(env, corev1.EnvVar{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{}}),
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}}
	}
	main := []corev1.ContainerPort{{Name: "vip", ContainerPort: 30909}, {Name: mainPortName, ContainerPort: 30911}}
	cases := []struct {
		name       string
		podName    string
		labels     map[string]string
		containers []corev1.Container
		conditions []corev1.PodCondition
		deleting   bool
		isBroker   bool
	}{
		{name: "labelled master, terminating", podName: "rmq-0", labels: map[string]string{LabelBrokerName: "broker-a", LabelBrokerID: "0"},
			containers: []corev1.Container{broker(main)}, conditions: ready, deleting: true, isBroker: true},
		{name: "replica named by env in the second container", podName: "rmq-1", labels: map[string]string{"app": "rmq"},
			containers: []corev1.Container{sidecar, broker(nil, corev1.EnvVar{Name: envBrokerName, Value: "broker-b"}, corev1.EnvVar{Name: envBrokerID, Value: "1"})},
			conditions: ready, isBroker: true},
		{name: "operator naming, main port in a sidecar, not ready", podName: "shop-broker-c-master-0",
			containers: []corev1.Container{broker(nil), {Name: "proxy", Ports: main}}, conditions: notReady, isBroker: true},
		{name: "labelled id overrides env and naming", podName: "x-master-0", labels: map[string]string{LabelBrokerName: "broker-d", LabelBrokerID: "2"},
			containers: []corev1.Container{broker(nil, corev1.EnvVar{Name: envBrokerID, Value: "0"})}, conditions: ready, isBroker: true},
		{name: "bystander", podName: "shop-frontend-7d9f", labels: map[string]string{"app": "shop"},
			containers: []corev1.Container{sidecar}, conditions: ready},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tc.podName, Namespace: "shop", UID: "u1", ResourceVersion: "7", Labels: tc.labels,
					Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:note":"` + strings.Repeat("y", 4096) + `"}`)}}}},
				Spec:   corev1.PodSpec{Containers: tc.containers, Volumes: []corev1.Volume{{Name: "store"}, {Name: "logs"}}},
				Status: corev1.PodStatus{PodIP: "10.1.2.3", Conditions: tc.conditions},
			}
			if tc.deleting {
				pod.DeletionTimestamp = &now
			}
			out, err := SlimPod(pod)
			if err != nil {
				t.Fatal(err)
			}
			slim := out.(*corev1.Pod)
			whole, isBroker := describeBrokerPod(pod)
			fromSlim, ok := describeBrokerPod(slim)
			if isBroker != tc.isBroker || ok != isBroker || fromSlim != whole {
				t.Fatalf("from the slim pod %+v (broker %v), from the whole one %+v (broker %v); want broker %v", fromSlim, ok, whole, isBroker, tc.isBroker)
			}
			if key := slim.Namespace + "/" + slim.Name; key != "shop/"+tc.podName || slim.UID != pod.UID || slim.ResourceVersion != pod.ResourceVersion {
				t.Errorf("slim pod lost its identity: %s uid %q rv %q", key, slim.UID, slim.ResourceVersion)
			}
			full, _ := json.Marshal(pod)
			small, _ := json.Marshal(slim)
			if len(small)*10 > len(full) {
				t.Errorf("slim pod %d bytes of JSON, whole %d: want at least ten times smaller", len(small), len(full))
			}
			if !tc.isBroker && (len(slim.Labels) != 0 || len(slim.Spec.Containers) != 0 || len(slim.Status.Conditions) != 0) {
				t.Errorf("a bystander kept more than its identity: %s", small)
			}
		})
	}
}
