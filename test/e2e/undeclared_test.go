//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// undeclaredTopic is a topic created on the brokers by hand, as `mqadmin updateTopic -b` creates
// one, and declared by no Topic: the gRPC endpoint serves it while the Cluster serves undeclared
// topics.
const undeclaredTopic = "E2EUndeclared"

// serveUndeclared creates undeclaredTopic on every broker and has the Cluster prod serve the
// topics no Topic declares, under the FaultPolicy default, until the test ends.
func (k *cluster) serveUndeclared(t *testing.T) {
	t.Helper()
	rt := producer.New(producer.Options{HeartbeatInterval: -1})
	defer rt.Close()
	for _, b := range brokers {
		addr := net.JoinHostPort(k.brokerPod(t, b).Status.PodIP, "10911")
		eventually(t, time.Minute, "the topic "+undeclaredTopic+" created on "+b, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return rt.CreateTopic(ctx, addr, undeclaredTopic, 4, 4, int(remoting.PermReadWrite))
		})
	}
	patch := func(spec string) {
		if _, err := k.kubectl(nil, "-n", namespace, "patch", "clusters.routing.detour.dev", "prod", "--type", "merge",
			"-p", fmt.Sprintf(`{"spec":%s}`, spec)); err != nil {
			t.Fatalf("patching the Cluster: %v", err)
		}
	}
	patch(`{"undeclaredTopics":"Serve","faultPolicyRef":{"name":"default"}}`)
	t.Cleanup(func() { patch(`{"undeclaredTopics":null,"faultPolicyRef":null}`) })
	// Every replica serves it before a client starts: the SDK asks for its topic's route as it
	// starts and does not start without one.
	for _, p := range k.managerPods(t) {
		addr := net.JoinHostPort(p.Status.PodIP, "8082")
		eventually(t, time.Minute, "the gRPC endpoint of "+p.Name+" to serve "+undeclaredTopic, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			route, err := rmqtest.QueryRouteTLS(ctx, addr, undeclaredTopic)
			if err != nil {
				return err
			}
			if route.GetStatus().GetCode() != rmqpb.Code_OK {
				return fmt.Errorf("route: %v", route.GetStatus())
			}
			return nil
		})
	}
}
