package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/scope"
)

func isElected(op *runningOperator) bool { return op.lead.Leading() }

func lease(t *testing.T, ns, name string) (*coordinationv1.Lease, error) {
	t.Helper()
	var l coordinationv1.Lease
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &l)
	return &l, err
}

func sendOK(t *testing.T, op *runningOperator, ns, name string) {
	t.Helper()
	a := postMessage(t, &http.Client{}, messagesURL(op.gw.URL(), ns, name), "text/plain", "", []byte("m"), nil)
	if a.status != http.StatusOK {
		t.Fatalf("send through %s: status %d %+v", op.gw.URL(), a.status, a.err)
	}
}

// TestLeaderElection proves the manager starts and serves with leader election off (no Lease
// is taken) and on: two replicas share one Lease, both serve the gateway, and when the leader
// stops the other takes over.
func TestLeaderElection(t *testing.T) {
	needsEnvtest(t)
	t.Run("off", func(t *testing.T) {
		ns := newNamespace(t)
		startBroker(t, ns, "le-off", map[string]string{"app": "le-off"})
		createTopic(t, ns, "orders", "LeaderOff", "le-off")
		op := startOperator(t, adminConfig, testOptions(t, ns))
		op.waitForRoute(t, "LeaderOff", 1)
		sendOK(t, op, ns, "orders")
		if !isElected(op) {
			t.Error("without leader election the manager does not consider itself elected")
		}
		if _, err := lease(t, ns, leaseName); !apierrors.IsNotFound(err) {
			t.Errorf("a Lease exists without leader election (err %v)", err)
		}
	})

	t.Run("on", func(t *testing.T) {
		ns := newNamespace(t)
		startBroker(t, ns, "le-on", map[string]string{"app": "le-on"})
		createTopic(t, ns, "orders", "LeaderOn", "le-on")
		first := startOperator(t, adminConfig, testOptions(t, ns, "--leader-elect"))
		eventually(t, "the first replica to lead", func() error {
			if !isElected(first) {
				return errors.New("not elected")
			}
			return nil
		})
		second := startOperator(t, adminConfig, testOptions(t, ns, "--leader-elect"))
		first.waitForRoute(t, "LeaderOn", 1)
		second.waitForRoute(t, "LeaderOn", 1)
		sendOK(t, first, ns, "orders")
		sendOK(t, second, ns, "orders") // a replica that does not lead still serves
		if isElected(second) {
			t.Fatal("two replicas lead at once")
		}
		l, err := lease(t, ns, leaseName)
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Fatalf("Lease %v, err %v; want one held by the leader", l, err)
		}
		firstHolder := *l.Spec.HolderIdentity

		if err := first.stop(); err != nil {
			t.Fatalf("stopping the leader: %v", err)
		}
		eventually(t, "the second replica to take over", func() error {
			if !isElected(second) {
				return errors.New("not elected")
			}
			l, err := lease(t, ns, leaseName)
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == firstHolder {
				return fmt.Errorf("Lease still held by %v", l.Spec.HolderIdentity)
			}
			return nil
		})
		sendOK(t, second, ns, "orders")
	})
}

// leaseName is the Lease the default --leader-election-id names.
const leaseName = "detour-manager.routing.detour.dev"

// probeClient gives up as a kubelet probe does.
var probeClient = &http.Client{Timeout: 5 * time.Second}

// probe GETs a health endpoint and returns its status and body.
func probe(addr, path string) (int, string, error) {
	res, err := probeClient.Get("http://" + addr + path + "?verbose")
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// TestHealthFollowsTheRuntime proves /readyz reports the runtime, the cache and the gateway,
// and that liveness and readiness fail once the runtime is closed.
func TestHealthFollowsTheRuntime(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	addr := freeAddr(t)
	op := startOperator(t, adminConfig, testOptions(t, ns, "--health-probe-bind-address="+addr))
	eventually(t, "readiness", func() error {
		code, body, err := probe(addr, "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		for _, check := range []string{"[+]runtime ok", "[+]shutdown ok", "[+]cache-sync ok", "[+]gateway ok", "[+]topics-routed ok"} {
			if !strings.Contains(body, check) {
				return fmt.Errorf("readyz lacks %q: %s", check, body)
			}
		}
		return nil
	})
	op.closeRuntime()
	for _, path := range []string{"/readyz", "/healthz"} {
		code, body, err := probe(addr, path)
		if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, "[-]runtime failed") {
			t.Errorf("%s with the runtime closed: %d %q %v; want 500 naming the runtime", path, code, body, err)
		}
	}
}

// result is one gateway request of the shutdown test.
type result struct {
	status   int
	msgID    string
	attempts int
	latency  time.Duration // the send's, as the gateway measured it
	body     string        // the whole answer, so a failure says why (attempts, brokers, error)
	at       time.Time
	err      error
}

// TestGracefulShutdownLosesNoAcknowledgedMessage proves that stopping the manager while clients
// send finishes the sends in flight: readiness drops first, requests already accepted are
// answered after the stop began, and every message answered 200 is stored exactly once.
func TestGracefulShutdownLosesNoAcknowledgedMessage(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	brokers := []*brokersim.Broker{
		startBroker(t, ns, "gs-a", map[string]string{"app": "gs"}),
		startBroker(t, ns, "gs-b", map[string]string{"app": "gs"}),
	}
	// No attempt may time out: a send retried after its first attempt timed out is stored twice
	// (the first broker stores it when its answer comes, as a real broker does), and one whose
	// attempts all time out is answered 503, neither of which says anything about shutdown. On a
	// loaded machine sends were seen to take over a second longer than the broker's delay, past
	// the fast retries' 1 s cap, so the budgets here leave many seconds of room.
	createTopicRetrying(t, ns, "orders", "ShutdownOrders", "gs", routingv1alpha1.RetryPolicy{
		Attempts: 2, SendTimeoutMillis: 30000, PerAttemptTimeoutMillis: ptr.To[int32](20000)})
	addr := freeAddr(t)
	op := startOperator(t, adminConfig, testOptions(t, ns, "--health-probe-bind-address="+addr))
	op.waitForRoute(t, "ShutdownOrders", 2)
	// Slow enough that requests are in flight when the stop comes, yet a healthy broker to the
	// preset's table (under its first isolating latency, 550 ms): the test is about shutdown, not
	// about routing around slow brokers.
	for _, b := range brokers {
		b.SetFault(brokersim.Fault{Delay: 200 * time.Millisecond, DelayMax: 400 * time.Millisecond})
	}

	url := messagesURL(op.gw.URL(), ns, "orders")
	stopClients := make(chan struct{})
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	httpClient := &http.Client{Timeout: 30 * time.Second}
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopClients:
					return
				default:
				}
				res, err := httpClient.Post(url, "text/plain", strings.NewReader(fmt.Sprintf("m-%d-%d", g, i)))
				r := result{err: err, at: time.Now()}
				if err == nil {
					a, body := decodeAnswer(res)
					r.status, r.msgID, r.attempts, r.body = res.StatusCode, a.MsgID, a.Attempts, body
					r.latency = time.Duration(a.LatencyMillis) * time.Millisecond
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if err != nil {
					return // the gateway no longer accepts connections
				}
			}
		})
	}
	eventually(t, "acknowledged traffic with requests in flight", func() error {
		mu.Lock()
		n := len(results)
		mu.Unlock()
		if n < 16 || op.gw.InFlight() < 4 {
			return fmt.Errorf("%d answers, %d in flight", n, op.gw.InFlight())
		}
		return nil
	})

	stopAt := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- op.stop() }()
	eventually(t, "readiness to drop while draining", func() error {
		code, body, err := probe(addr, "/readyz")
		if err != nil {
			return err
		}
		if code == http.StatusOK || !strings.Contains(body, "[-]gateway failed") {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if err := <-stopped; err != nil {
		t.Fatalf("the manager stopped with %v", err)
	}
	close(stopClients)
	wg.Wait()
	if !op.rtClosed.Load() {
		t.Error("the runtime is still open after the manager stopped")
	}

	stored := storedCounts(brokers...)
	acked, ackedAfterStop, retried := 0, 0, 0
	var slowest result
	for _, r := range results {
		if r.err != nil {
			continue
		}
		if r.status != http.StatusOK {
			t.Errorf("a request was answered %d, %s from the stop: %s; accepted requests must finish",
				r.status, r.at.Sub(stopAt).Round(time.Millisecond), strings.TrimSpace(r.body))
			continue
		}
		acked++
		if r.latency > slowest.latency {
			slowest = r
		}
		fromStop := r.at.Sub(stopAt).Round(time.Millisecond)
		if r.attempts > 1 {
			retried++
			t.Logf("answered after a retry, %s from the stop: %s", fromStop, strings.TrimSpace(r.body))
		}
		if r.at.After(stopAt) {
			ackedAfterStop++
		}
		if n := stored[r.msgID]; n != 1 {
			t.Errorf("acknowledged message %s is stored %d times, want exactly once; answered %s from the stop: %s",
				r.msgID, n, fromStop, strings.TrimSpace(r.body))
		}
	}
	if ackedAfterStop == 0 {
		t.Errorf("no request was answered after the stop began; %d acknowledged in all", acked)
	}
	t.Logf("%d messages acknowledged, %d of them after the stop began, %d after a retry; the slowest send took %s, answered %s from the stop",
		acked, ackedAfterStop, retried, slowest.latency, slowest.at.Sub(stopAt).Round(time.Millisecond))
}

// decodeAnswer reads a gateway answer: its msgId and its whole body.
func decodeAnswer(res *http.Response) (a struct {
	MsgID         string `json:"msgId"`
	Attempts      int    `json:"attempts"`
	LatencyMillis int64  `json:"latencyMillis"`
}, body string) {
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &a)
	return a, string(b)
}

// TestShutdownDelayKeepsServingWhileNotReady proves that with --shutdown-delay a stopping
// replica reports not ready at once but still accepts sends until the delay is over, so a
// Service can stop routing to it before it stops listening, and that each answer in the delay
// closes its connection, so a client with a kept-alive one moves too.
func TestShutdownDelayKeepsServingWhileNotReady(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	b := startBroker(t, ns, "sd-a", map[string]string{"app": "sd"})
	createTopic(t, ns, "orders", "DelayOrders", "sd")
	addr := freeAddr(t)
	op := startOperator(t, adminConfig, testOptions(t, ns, "--health-probe-bind-address="+addr, "--shutdown-delay=5s"))
	op.waitForRoute(t, "DelayOrders", 1)

	stopped := make(chan error, 1)
	go func() { stopped <- op.stop() }()
	eventually(t, "readiness to drop", func() error {
		code, body, err := probe(addr, "/readyz")
		if err != nil {
			return err
		}
		if code == http.StatusOK || !strings.Contains(body, "[-]shutdown failed") {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if err := op.gw.Serving(); err != nil {
		t.Fatalf("the gateway stopped serving during the shutdown delay: %v", err)
	}
	keepAlive := &http.Transport{}
	defer keepAlive.CloseIdleConnections()
	a := postMessage(t, &http.Client{Transport: keepAlive},
		messagesURL(op.gw.URL(), ns, "orders"), "text/plain", "", []byte("late"), nil)
	if a.status != http.StatusOK || storedCounts(b)[a.ok.MsgID] != 1 {
		t.Fatalf("a send during the shutdown delay: %d %+v; want 200 and stored", a.status, a.err)
	}
	if !a.closes {
		t.Errorf("a send during the shutdown delay left its connection open: the client would keep it to a stopping replica")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stopping: %v", err)
	}
}

// TestReadyMeansRoutable proves /readyz turns 200 only once every Topic present at start is
// routed: the first ready answer already finds a route for each of 20 Topics, and a send through
// the gateway to each succeeds.
func TestReadyMeansRoutable(t *testing.T) {
	needsEnvtest(t)
	ns := newNamespace(t)
	startBroker(t, ns, "ready-a", map[string]string{"app": "ready"})
	const n = 20
	for i := range n {
		createTopic(t, ns, fmt.Sprintf("t%d", i), fmt.Sprintf("Ready%d", i), "ready")
	}
	addr := freeAddr(t)
	op := startOperator(t, adminConfig, testOptions(t, ns, "--health-probe-bind-address="+addr))
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := probe(addr, "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %d %s %v", code, body, err)
		}
		time.Sleep(5 * time.Millisecond) // the poll interval; readiness is the synchronisation
	}
	for i := range n {
		if _, ok := op.rt.RouteInfo(scope.TopicRoute(ns, fmt.Sprintf("t%d", i))); !ok {
			t.Errorf("ready, but Topic t%d has no route", i)
		}
	}
	for i := range n {
		sendOK(t, op, ns, fmt.Sprintf("t%d", i))
	}
}
