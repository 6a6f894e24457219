package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/detourmq/detour/internal/gateway"
)

// TestGatewayAuthServesANewSenderAmidAnotherIdentitysTokens is the hostile-peer trial against
// the gateway's memory of tokens: a service account without the send right mints 4,400 tokens
// with the TokenRequest API and presents each from an address of its own (so no per-client bound
// of reviews stops it), and at least 4,200 of them are reviewed and refused 403 (a loaded API
// server may time a few out); then a new service account that may send sends 40 requests at once.
// None of them may be refused 429: its token is remembered after one review, whatever the other
// identity's tokens fill.
func TestGatewayAuthServesANewSenderAmidAnotherIdentitysTokens(t *testing.T) {
	needsEnvtest(t)
	// Before the fix 4,096 tokens filled the gateway's memory of tokens for everyone.
	const minted, refused, burst = 4400, 4200, 40
	ns := newNamespace(t)
	b := startBroker(t, ns, "flood-a", map[string]string{"app": "flood"})
	createTopic(t, ns, "orders", "FloodOrders", "flood")
	aliceToken := serviceAccountToken(t, ns, "alice")
	grantSend(t, ns, "alice", "orders")
	op := startOperator(t, adminConfig, testOptions(t, ns, "--gateway-auth=true"))
	op.waitForRoute(t, "FloodOrders", 1)
	url := messagesURL(op.gw.URL(), ns, "orders")

	start := time.Now()
	tokens := mintTokens(t, ns, "mallory", minted)
	t.Logf("minted %d tokens in %v", minted, time.Since(start))
	start = time.Now()
	flood := onWorkers(len(tokens), func(i int) (int, error) { return sendFrom(floodAddr(i), url, tokens[i], "flood") })
	if flood.statuses[http.StatusForbidden] < refused || flood.statuses[http.StatusOK] != 0 {
		t.Fatalf("the other identity's %d requests were answered %v (%v); want at least %d refused 403, none sent",
			minted, flood.statuses, flood.firstErr, refused)
	}

	t.Logf("flood answered in %v: %v", time.Since(start), flood.statuses)
	alice := "127.0.0.7"
	if status, err := sendFrom(alice, url, aliceToken, "first"); err != nil || status != http.StatusOK {
		t.Fatalf("the new sender's first request: %d %v", status, err)
	}
	sent := allAtOnce(burst, func(int) (int, error) { return sendFrom(alice, url, aliceToken, "order") })
	if sent.statuses[http.StatusOK] != burst {
		t.Fatalf("the new sender's %d requests at once were answered %v (%v); want every one 200", burst, sent.statuses, sent.firstErr)
	}
	if got := b.Stats().MessagesStored; got != burst+1 {
		t.Fatalf("%d messages stored, want the new sender's %d", got, burst+1)
	}
}

// mintTokens creates service account name in ns and n tokens of it with the TokenRequest API.
func mintTokens(t *testing.T, ns, name string, n int) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, n)
	minted := onWorkers(n, func(i int) (int, error) {
		tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			return 0, err
		}
		tokens[i] = tr.Status.Token // each worker writes its own elements
		return http.StatusCreated, nil
	})
	if minted.firstErr != nil {
		t.Fatalf("minting tokens of %s: %v", name, minted.firstErr)
	}
	return tokens
}

// floodAddr is the i-th of the flood's loopback source addresses (127.1.0.1, 127.1.0.2, ...).
func floodAddr(i int) string { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }

// tally counts the statuses of requests answered concurrently; a request that got no answer
// counts as status -1 and keeps its error for the log.
type tally struct {
	mu       sync.Mutex
	statuses map[int]int
	firstErr error
}

func (t *tally) add(status int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		status = -1
		if t.firstErr == nil {
			t.firstErr = err
		}
	}
	t.statuses[status]++
}

// onWorkers runs do for 0..n-1 on a few workers, as a flood from one attacker's pods would.
func onWorkers(n int, do func(i int) (int, error)) *tally {
	const workers = 8
	t := &tally{statuses: map[int]int{}}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t.add(do(i))
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return t
}

// allAtOnce runs do for 0..n-1 each in its own goroutine, as a sender's burst.
func allAtOnce(n int, do func(i int) (int, error)) *tally {
	t := &tally{statuses: map[int]int{}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.add(do(i))
		}()
	}
	wg.Wait()
	return t
}

// sendFrom posts body with token on a connection of its own from the loopback address src, and
// returns the answer's status; a refusal must carry the gateway's JSON error.
func sendFrom(src, url, token, body string) (int, error) {
	dialer := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode == http.StatusOK {
		return res.StatusCode, err
	}
	var er gateway.ErrorResponse
	if err := json.Unmarshal(data, &er); err != nil || er.Code == "" {
		return res.StatusCode, fmt.Errorf("status %d, body %q is not the gateway's error", res.StatusCode, data)
	}
	return res.StatusCode, nil
}
