package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// SlimPod is a cache transform (cache.ByObject Transform) for Pods: it keeps what the operator
// reads of a pod (name, namespace, labels, deletion, container ports and literal environment
// values, the pod IP and the Ready condition) and drops the rest, so every pod the manager
// watches, broker or not, costs a few hundred bytes instead of its whole manifest and managed
// fields. Objects read from the cache are therefore partial: the operator never writes pods.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			Labels:            pod.Labels,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{PodIP: pod.Status.PodIP},
	}
	for _, c := range pod.Spec.Containers {
		sc := corev1.Container{Name: c.Name, Ports: c.Ports}
		for _, e := range c.Env {
			if e.Value != "" {
				sc.Env = append(sc.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
			}
		}
		slim.Spec.Containers = append(slim.Spec.Containers, sc)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			slim.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return slim, nil
}

// PodCache is how the manager's cache should hold Pods: slimmed by SlimPod and, with a non-nil
// selector, only those it matches (every Topic's and Cluster's brokerSelector then sees only
// pods within it).
func PodCache(selector labels.Selector) cache.ByObject {
	return cache.ByObject{Label: selector, Transform: SlimPod}
}
