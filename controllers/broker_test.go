package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDescribeBrokerPod proves the broker name, role and address rules: explicit labels first,
// then the broker image's env, then the RocketMQ operator's pod naming.
func TestDescribeBrokerPod(t *testing.T) {
	now := metav1.Now()
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	notReady := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	withEnv := func(env ...corev1.EnvVar) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Env: env,
			Ports: []corev1.ContainerPort{{Name: "main", ContainerPort: 30911}}}}}
	}
	cases := []struct {
		name   string
		pod    corev1.Pod
		want   brokerPod
		wantOK bool
	}{
		{
			name: "labels name the broker and its id",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "anything", Labels: map[string]string{LabelBrokerName: "broker-a", LabelBrokerID: "0"}},
				Status:     corev1.PodStatus{PodIP: "10.0.0.7", Conditions: ready},
			},
			want: brokerPod{Name: "broker-a", Master: true, Addr: "10.0.0.7:10911", Ready: true}, wantOK: true,
		},
		{
			name: "a label id other than 0 is a slave",
			pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x-master-0",
				Labels: map[string]string{LabelBrokerName: "broker-a", LabelBrokerID: "1"}}},
			want: brokerPod{Name: "broker-a"}, wantOK: true,
		},
		{
			name: "env BROKER_NAME and BROKER_ID and the main port",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "rmq-0"},
				Spec:       withEnv(corev1.EnvVar{Name: "BROKER_NAME", Value: "broker-b"}, corev1.EnvVar{Name: "BROKER_ID", Value: "0"}),
				Status:     corev1.PodStatus{PodIP: "10.0.0.8", Conditions: notReady},
			},
			want: brokerPod{Name: "broker-b", Master: true, Addr: "10.0.0.8:30911"}, wantOK: true,
		},
		{
			name: "the RocketMQ operator's master pod name",
			pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rocketmq-broker-0-master-0"},
				Status: corev1.PodStatus{PodIP: "fd00::5", Conditions: ready}},
			want: brokerPod{Name: "rocketmq-broker-0", Master: true, Addr: "[fd00::5]:10911", Ready: true}, wantOK: true,
		},
		{
			name: "the RocketMQ operator's replica pod name is not a master",
			pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rocketmq-broker-0-replica-1-0"}},
			want: brokerPod{Name: "rocketmq-broker-0"}, wantOK: true,
		},
		{
			name: "a terminating pod is not ready",
			pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-g-master-0", DeletionTimestamp: &now, Finalizers: []string{"x"}},
				Status: corev1.PodStatus{PodIP: "10.0.0.9", Conditions: ready}},
			want: brokerPod{Name: "c-g", Master: true, Addr: "10.0.0.9:10911", Terminating: true}, wantOK: true,
		},
		{
			name: "a pod that names no broker is not one",
			pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nginx-0"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := describeBrokerPod(&tc.pod)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if ok && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
