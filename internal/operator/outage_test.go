package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/controllers"
)

// apiProxy stands between managers and the API server. Cut, it closes every open connection and
// every new one at once, as a partition that the kernel reports does; restored, it forwards again.
type apiProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startAPIProxy(t *testing.T, cfg *rest.Config) *apiProxy {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

// config is cfg reaching the API server through the proxy (the serving certificate is valid for
// 127.0.0.1 whatever the port).
func (p *apiProxy) config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + p.ln.Addr().String()
	return c
}

func (p *apiProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

// track registers c unless the proxy is cut.
func (p *apiProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *apiProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(up) {
		_ = c.Close()
		if up != nil {
			_ = up.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// setCut cuts (closing every connection) or restores the proxy.
func (p *apiProxy) setCut(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = v
	if v {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// cutFor is how long the API server is cut off.
const cutFor = 30 * time.Second

// sendThrough sends one message through op's gateway and fails unless it is acknowledged.
func sendThrough(op *runningOperator, ns, name string) error {
	res, err := probeClient.Post(messagesURL(op.gw.URL(), ns, name), "text/plain", strings.NewReader("m"))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("send through %s: %d %s", op.gw.URL(), res.StatusCode, body)
	}
	return nil
}

// running reports whether op's run has not returned.
func running(op *runningOperator) bool {
	select {
	case err := <-op.done:
		op.done <- err
		return false
	default:
		return true
	}
}

// TestAPIServerOutageStopsOnlyTheLeadersWrites cuts two leader-electing replicas off the API
// server for 30 s: both keep answering sends and stay ready, the leader loses its lease and
// stops writing, nothing exits; a third replica started during the cut waits, not ready, and
// becomes ready after it without a restart; once the API server is back, a leader writes status
// again.
func TestAPIServerOutageStopsOnlyTheLeadersWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts the API server for 30 s")
	}
	ns := newNamespace(t)
	startBroker(t, ns, "cut", map[string]string{"app": "cut"})
	createTopic(t, ns, "orders", "CutOrders", "cut")
	px := startAPIProxy(t, adminConfig)
	cfg := px.config(adminConfig)
	// Short leases, so the cut outlasts the renew deadline several times over.
	timings := controllers.LeaseTimings{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
	start := func() (*runningOperator, string) {
		health := freeAddr(t)
		o := testOptions(t, ns, "--leader-elect", "--health-probe-bind-address="+health)
		return startOperator(t, cfg, o, operatorHooks{leaseTimings: timings}), health
	}
	ready := func(addr string) error {
		code, body, err := probe(addr, "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("readyz %d: %s", code, body)
		}
		return nil
	}
	a, aHealth := start()
	b, bHealth := start()
	a.waitForRoute(t, "CutOrders", 1)
	b.waitForRoute(t, "CutOrders", 1)
	eventually(t, "a leader", func() error {
		if !isElected(a) && !isElected(b) {
			return errors.New("no replica leads")
		}
		return nil
	})
	for _, h := range []string{aHealth, bHealth} {
		eventually(t, "both replicas ready", func() error { return ready(h) })
	}

	px.setCut(true)
	cutAt := time.Now()
	// Traffic and readiness of the two running replicas, for the whole cut, from a goroutine of
	// its own: starting the third replica below takes a while.
	type outcome struct {
		sends int
		err   error
	}
	traffic := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() { traffic <- o }()
		for time.Since(cutAt) < cutFor {
			for _, op := range []*runningOperator{a, b} {
				if err := sendThrough(op, ns, "orders"); err != nil {
					o.err = fmt.Errorf("%.1fs into the cut: %w", time.Since(cutAt).Seconds(), err)
					return
				}
				o.sends++
			}
			for _, h := range []string{aHealth, bHealth} {
				if err := ready(h); err != nil {
					o.err = fmt.Errorf("%.1fs into the cut: %w", time.Since(cutAt).Seconds(), err)
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c, cHealth := start()
	t.Logf("a replica started %v into the cut", time.Since(cutAt).Round(time.Millisecond))
	for time.Since(cutAt) < cutFor {
		if ready(cHealth) == nil {
			t.Fatalf("%.1fs into the cut the replica started during it is ready", time.Since(cutAt).Seconds())
		}
		time.Sleep(250 * time.Millisecond)
	}
	o := <-traffic
	if o.err != nil {
		t.Fatal(o.err)
	}
	for name, op := range map[string]*runningOperator{"a": a, "b": b, "c": c} {
		if !running(op) {
			t.Fatalf("replica %s exited during the cut: %v", name, op.stop())
		}
		if isElected(op) {
			t.Errorf("replica %s still leads after %v without the API server", name, cutFor)
		}
	}
	t.Logf("%v cut: %d sends through two replicas, all 200; both stayed ready; the leader stepped down", cutFor, o.sends)

	px.setCut(false)
	restoredAt := time.Now()
	eventuallyWithin(t, 2*time.Minute, "the replica started during the cut ready", func() error { return ready(cHealth) })
	t.Logf("the replica started during the cut was ready %v after the API server came back", time.Since(restoredAt).Round(time.Second))
	c.waitForRoute(t, "CutOrders", 1)
	sendOK(t, c, ns, "orders")
	eventuallyWithin(t, time.Minute, "a leader again", func() error {
		if !isElected(a) && !isElected(b) && !isElected(c) {
			return errors.New("no replica leads")
		}
		return nil
	})
	fp := &routingv1alpha1.FaultPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after-cut"}}
	if err := k8sClient.Create(context.Background(), fp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "status written again", func() error {
		var got routingv1alpha1.FaultPolicy
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(fp), &got); err != nil {
			return err
		}
		if cond := apimeta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady); cond == nil {
			return errors.New("no Ready condition")
		}
		return nil
	})
}
