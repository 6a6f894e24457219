package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// SlimPod is a cache transform (cache.ByObject Transform) for Pods: it keeps only what
// describeBrokerPod reads, so the manager's memory follows its broker pods, not the size of the
// namespace. A pod that names no broker (by label, BROKER_NAME or the RocketMQ operator's
// naming) keeps its identity alone: nothing reads more of it, and if it later becomes a broker
// pod its update passes through here again whole. A broker pod keeps its labels, deletion, IP,
// Ready condition, the BROKER_NAME and BROKER_ID values and the "main" port, gathered into one
// container. Objects read from the cache are therefore partial: the operator never writes pods.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            pod.Name,
			Namespace:       pod.Namespace,
			UID:             pod.UID,
			ResourceVersion: pod.ResourceVersion,
		},
	}
	if brokerNameOf(pod) == "" {
		return slim, nil
	}
	slim.Labels = pod.Labels
	slim.DeletionTimestamp = pod.DeletionTimestamp
	slim.Status.PodIP = pod.Status.PodIP
	if podReady(pod) {
		slim.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	var broker corev1.Container
	for _, name := range []string{envBrokerName, envBrokerID} {
		if v := containerEnv(pod, name); v != "" {
			broker.Env = append(broker.Env, corev1.EnvVar{Name: name, Value: v})
		}
	}
	if port, ok := namedMainPort(pod); ok {
		broker.Ports = []corev1.ContainerPort{{Name: mainPortName, ContainerPort: port}}
	}
	slim.Spec.Containers = []corev1.Container{broker}
	return slim, nil
}

// PodCache is how the manager's cache should hold Pods: slimmed by SlimPod and, with a non-nil
// selector, only those it matches (every Topic's and Cluster's brokerSelector then sees only
// pods within it).
func PodCache(selector labels.Selector) cache.ByObject {
	return cache.ByObject{Label: selector, Transform: SlimPod}
}
