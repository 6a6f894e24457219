package controllers

import (
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels and environment variables that identify a broker pod. The env names are the ones the
// RocketMQ operator and the official broker images set.
const (
	LabelBrokerName = "routing.detour.dev/broker-name"
	LabelBrokerID   = "routing.detour.dev/broker-id"
	envBrokerName   = "BROKER_NAME"
	envBrokerID     = "BROKER_ID"
	mainPortName    = "main"
	// DefaultBrokerPort is RocketMQ's listenPort when a pod names no "main" port.
	DefaultBrokerPort = 10911
)

// brokerPod is what the operator knows of one broker pod.
type brokerPod struct {
	// Name is the RocketMQ broker name.
	Name string
	// Master is true for the pod that receives sends (brokerId 0).
	Master bool
	// Addr is host:port, empty until the pod has an IP.
	Addr string
	// Ready mirrors the pod's Ready condition.
	Ready bool
	// Terminating is set once the pod has a deletion timestamp.
	Terminating bool
}

// describeBrokerPod reads a pod's broker identity, role, address and state. ok is false when the
// pod does not say which broker it is.
func describeBrokerPod(pod *corev1.Pod) (b brokerPod, ok bool) {
	b.Name = brokerNameOf(pod)
	if b.Name == "" {
		return b, false
	}
	b.Master = isMaster(pod)
	if pod.Status.PodIP != "" {
		b.Addr = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(mainPort(pod))))
	}
	b.Terminating = pod.DeletionTimestamp != nil
	b.Ready = podReady(pod) && !b.Terminating
	return b, true
}

// brokerNameOf is the label, else the BROKER_NAME env of a container, else the RocketMQ
// operator's pod naming <cluster>-<group>-master-<n> or -replica-<m>-<n>.
func brokerNameOf(pod *corev1.Pod) string {
	if name := pod.Labels[LabelBrokerName]; name != "" {
		return name
	}
	if name := containerEnv(pod, envBrokerName); name != "" {
		return name
	}
	for _, role := range []string{"-master-", "-replica-"} {
		if i := strings.LastIndex(pod.Name, role); i > 0 {
			return pod.Name[:i]
		}
	}
	return ""
}

// isMaster is true for brokerId 0 by label or env, else for the operator's "-master-" pod names.
func isMaster(pod *corev1.Pod) bool {
	if id, ok := pod.Labels[LabelBrokerID]; ok {
		return id == "0"
	}
	if id := containerEnv(pod, envBrokerID); id != "" {
		return id == "0"
	}
	return strings.Contains(pod.Name, "-master-")
}

// mainPort is the container port named "main", else RocketMQ's default listen port.
func mainPort(pod *corev1.Pod) int32 {
	if port, ok := namedMainPort(pod); ok {
		return port
	}
	return DefaultBrokerPort
}

func namedMainPort(pod *corev1.Pod) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == mainPortName {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

func containerEnv(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name && e.Value != "" {
				return e.Value
			}
		}
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
