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
// discovery reads (the broker a pod backs comes out the same) and drops the bulk of a typical
// manifest.
func TestSlimPodKeepsWhatBrokerDiscoveryReads(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rmq-broker-a-master-0", Namespace: "shop", UID: "u1", ResourceVersion: "7",
			Labels:            map[string]string{"app": "rmq", LabelBrokerName: "broker-a", LabelBrokerID: "0"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{}},"f:note":"` + strings.Repeat("y", 4096) + `"}`)}}},
			DeletionTimestamp: &now,
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "broker", Image: "apache/rocketmq:5.5.0",
				Ports:     []corev1.ContainerPort{{Name: mainPortName, ContainerPort: 30911}},
				Env:       []corev1.EnvVar{{Name: "NAMESRV_ADDR", Value: "ns:9876"}, {Name: "SECRET", ValueFrom: &corev1.EnvVarSource{}}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}}},
			Volumes: []corev1.Volume{{Name: "store"}, {Name: "logs"}},
		},
		Status: corev1.PodStatus{PodIP: "10.1.2.3", Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Message: "scheduled"},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "ok", Message: "all ready"}}},
	}
	out, err := SlimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Pod)
	a, okA := describeBrokerPod(pod)
	b, okB := describeBrokerPod(slim)
	if a != b || okA != okB || !okA || a.Addr != "10.1.2.3:30911" {
		t.Fatalf("broker from the slim pod %+v, from the full one %+v", b, a)
	}
	pod.Labels = map[string]string{"app": "rmq"} // the name then comes from the env and pod name
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "BROKER_NAME", Value: "broker-e"})
	out, _ = SlimPod(pod)
	if a, b := brokerNameOf(pod), brokerNameOf(out.(*corev1.Pod)); a != b || a != "broker-e" {
		t.Fatalf("broker name from the slim pod %q, from the full one %q", b, a)
	}
	full, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	small, err := json.Marshal(slim)
	if err != nil {
		t.Fatal(err)
	}
	if len(small)*10 > len(full) {
		t.Errorf("slim pod %d bytes of JSON, full %d: want at least ten times smaller", len(small), len(full))
	}
	if len(slim.ManagedFields) != 0 || len(slim.Annotations) != 0 || len(slim.Spec.Volumes) != 0 || len(slim.Status.Conditions) != 1 {
		t.Errorf("slim pod kept %+v", slim)
	}
}
