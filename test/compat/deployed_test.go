package compat_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/testsupport/managertest"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// deployedNamespace and deployedTopic are where the deployed manager's benchmarks declare their
// Topic: Kubernetes name doors, RocketMQ name doorsBenchTopic.
const (
	deployedNamespace = "bench"
	deployedTopic     = "doors"
	doorsBenchTopic   = "DetourDoorsBench"
	doorsBenchQueues  = 8
)

// deployedManager is detour as users run it in front of a real cluster: the cmd/manager binary
// against an API server (envtest) holding a Cluster whose name servers are the real cluster's and
// a Topic on it, which the manager creates on the brokers and resolves on every request.
type deployedManager struct {
	cp *managertest.ControlPlane
	*managertest.Manager
}

// deployManager builds and starts the manager with args beside c, declares the Cluster and the
// Topic, and waits until the Topic is Ready. Everything stops when b ends.
func deployManager(b *testing.B, c *rmqtest.Cluster, args ...string) *deployedManager {
	b.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("KUBEBUILDER_ASSETS is not set: this benchmark runs the manager against envtest")
	}
	dir := b.TempDir()
	root := filepath.Join("..", "..")
	bin := filepath.Join(dir, "manager")
	if err := managertest.Build(root, bin); err != nil {
		b.Fatal(err)
	}
	cp, err := managertest.StartControlPlane(root, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			b.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := true
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployedNamespace}},
		&routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: deployedNamespace, Name: "rocketmq"},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{c.NameServer()}}},
		&routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: deployedNamespace, Name: deployedTopic},
			Spec: routingv1alpha1.TopicSpec{TopicName: doorsBenchTopic, ClusterRef: &routingv1alpha1.ClusterReference{Name: "rocketmq"},
				Create: &create, WriteQueueNums: doorsBenchQueues, ReadQueueNums: doorsBenchQueues, Perm: 6}},
	} {
		if err := cp.Client.Create(ctx, o); err != nil {
			b.Fatalf("creating %s: %v", client.ObjectKeyFromObject(o), err)
		}
	}
	m, err := managertest.Start(bin, cp.Kubeconfig, args...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Stop)
	d := &deployedManager{cp: cp, Manager: m}
	poll.Until(b, 2*time.Minute, 200*time.Millisecond, "the Topic Ready", d.topicReady)
	b.Logf("the manager (pid %d) has the Topic Ready %v after its start", m.Pid(), time.Since(m.Started).Round(10*time.Millisecond))
	return d
}

// topicReady is nil once the Topic's Ready condition is True; an error says why not, or that the
// manager exited.
func (d *deployedManager) topicReady() error {
	if err := d.Exited(); err != nil {
		return err
	}
	var t routingv1alpha1.Topic
	if err := d.cp.Client.Get(context.Background(), client.ObjectKey{Namespace: deployedNamespace, Name: deployedTopic}, &t); err != nil {
		return err
	}
	if !apimeta.IsStatusConditionTrue(t.Status.Conditions, routingv1alpha1.ConditionReady) {
		return fmt.Errorf("conditions %+v (manager log %s)", t.Status.Conditions, d.LogPath)
	}
	return nil
}
