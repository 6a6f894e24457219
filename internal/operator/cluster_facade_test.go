package operator

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/controllers"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// routeVia asks the name server (or facade) at addr for topic's route and returns its brokers'
// names, or the answer's code when it is not a route.
func routeVia(addr, topic string) ([]string, int16, error) {
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, remoting.NewGetRouteInfoRequest(topic))
	if err != nil {
		return nil, 0, err
	}
	if resp.Code != remoting.Success {
		return nil, resp.Code, nil
	}
	route, err := remoting.DecodeTopicRouteData(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	var names []string
	for _, b := range route.BrokerDatas {
		names = append(names, b.BrokerName)
	}
	slices.Sort(names)
	return names, resp.Code, nil
}

// TestTwoClustersBehindTwoFacadesPublishOnlyTheirOwnBrokers puts two RocketMQ clusters (brokersim
// name servers and brokers) behind one replica, each Cluster asking for a facade of its own: each
// facade publishes the routes of its own cluster only, a topic of one cluster is unknown to the
// other's facade, the operator keeps a Service per facade, and a facade whose Cluster stops
// asking closes and loses its Service.
func TestTwoClustersBehindTwoFacadesPublishOnlyTheirOwnBrokers(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	ctx := context.Background()
	ports := map[string]int32{}
	brokers := map[string][]string{}
	for _, side := range []string{"left", "right"} {
		var sims []*brokersim.Broker
		for _, suffix := range []string{"a", "b"} {
			b, err := brokersim.StartBroker(side+"-broker-"+suffix, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			sims = append(sims, b)
			brokers[side] = append(brokers[side], b.Name())
		}
		nsrv, err := brokersim.StartNameServer("127.0.0.1:0", sims...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nsrv.Close() })
		_, port, _ := net.SplitHostPort(freeAddr(t))
		p, _ := strconv.Atoi(port)
		ports[side] = int32(p)
		cl := &routingv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: side},
			Spec: routingv1alpha1.ClusterSpec{NameServers: []string{nsrv.Addr()}, RouteRefreshSeconds: 1,
				Facade: &routingv1alpha1.ClusterFacade{Port: ports[side]}}}
		if err := k8sClient.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		// The same RocketMQ topic on both clusters, and one of each cluster's own.
		for _, topic := range []struct{ name, topicName string }{{side + "-shared", "Shared"}, {side + "-own", "Own-" + side}} {
			tp := &routingv1alpha1.Topic{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: topic.name},
				Spec: routingv1alpha1.TopicSpec{TopicName: topic.topicName, ClusterRef: &routingv1alpha1.ClusterReference{Name: side},
					Create: ptr.To(true), WriteQueueNums: 2, ReadQueueNums: 2, Perm: 6}}
			if err := k8sClient.Create(ctx, tp); err != nil {
				t.Fatal(err)
			}
		}
	}
	op := startOperator(t, adminConfig, testOptions(t, ns, "--cluster-facade-bind-host=127.0.0.1",
		"--cluster-facade-service-selector=app.kubernetes.io/name=detour,app.kubernetes.io/component=manager"))
	addr := func(side string) string {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[side])))
	}
	for side, other := range map[string]string{"left": "right", "right": "left"} {
		eventually(t, "the "+side+" facade to publish its own brokers only", func() error {
			if _, ok := op.ctrls.ClusterFacadeAddr(types.NamespacedName{Namespace: ns, Name: side}); !ok {
				return fmt.Errorf("not serving")
			}
			got, code, err := routeVia(addr(side), "Shared")
			if err != nil || !slices.Equal(got, brokers[side]) {
				return fmt.Errorf("Shared routed over %v (code %d, err %v), want %v", got, code, err, brokers[side])
			}
			if got, code, err := routeVia(addr(side), "Own-"+side); err != nil || !slices.Equal(got, brokers[side]) {
				return fmt.Errorf("its own topic routed over %v (code %d, err %v)", got, code, err)
			}
			if got, code, err := routeVia(addr(side), "Own-"+other); err != nil || code != remoting.TopicNotExist {
				return fmt.Errorf("the other cluster's topic answered %v, code %d, err %v; want TOPIC_NOT_EXIST", got, code, err)
			}
			return nil
		})
	}

	// The operator keeps a Service per facade, on the facade's port of the manager's pods.
	for side := range ports {
		eventually(t, "the Service of the "+side+" facade", func() error {
			var svc corev1.Service
			key := types.NamespacedName{Namespace: ns, Name: controllers.FacadeServiceName(types.NamespacedName{Namespace: ns, Name: side})}
			if err := k8sClient.Get(ctx, key, &svc); err != nil {
				return err
			}
			want := map[string]string{"app.kubernetes.io/name": "detour", "app.kubernetes.io/component": "manager"}
			if !maps.Equal(svc.Spec.Selector, want) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != ports[side] ||
				svc.Spec.Ports[0].TargetPort.IntValue() != int(ports[side]) {
				return fmt.Errorf("service selector %v ports %+v", svc.Spec.Selector, svc.Spec.Ports)
			}
			return nil
		})
	}

	// A Cluster that stops asking loses its facade and its Service.
	cl := &routingv1alpha1.Cluster{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "left"}, cl); err != nil {
		t.Fatal(err)
	}
	cl.Spec.Facade = nil
	if err := k8sClient.Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the left facade to close and its Service to go", func() error {
		if _, _, err := routeVia(addr("left"), "Shared"); err == nil {
			return fmt.Errorf("still answering")
		}
		key := types.NamespacedName{Namespace: ns, Name: controllers.FacadeServiceName(types.NamespacedName{Namespace: ns, Name: "left"})}
		if err := k8sClient.Get(ctx, key, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Service stays (err %v)", err)
		}
		return nil
	})
}
