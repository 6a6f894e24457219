package kubeauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI answers TokenReviews from a token table and SubjectAccessReviews from a grant table,
// counting the requests it receives.
type fakeAPI struct {
	mu       sync.Mutex
	users    map[string]authenticationv1.UserInfo // token -> user
	grants   map[string]bool                      // "user ns/name" -> allowed
	reviews  int
	accesses []authorizationv1.SubjectAccessReviewSpec
	fail     error
}

func newFakeAuth(api *fakeAPI, now func() time.Time, opts ...Options) *Reviewer {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		api.mu.Lock()
		defer api.mu.Unlock()
		api.reviews++
		if api.fail != nil {
			return true, nil, api.fail
		}
		out := tr.DeepCopy()
		if u, ok := api.users[tr.Spec.Token]; ok {
			out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		return true, out, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		api.mu.Lock()
		defer api.mu.Unlock()
		api.accesses = append(api.accesses, sar.Spec)
		out := sar.DeepCopy()
		if ra := sar.Spec.ResourceAttributes; ra != nil {
			out.Status.Allowed = api.grants[sar.Spec.User+" "+ra.Namespace+"/"+ra.Name]
		} else {
			out.Status.Allowed = api.grants[sar.Spec.User+" "+sar.Spec.NonResourceAttributes.Path]
		}
		return true, out, nil
	})
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Now = now
	return NewFromClients(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), o)
}

// TestReviewerAsksForCreateOnTopicMessages proves the decisions follow TokenReview and
// SubjectAccessReview, and that the access review asks exactly for create on the Topic's
// messages subresource with the reviewed user's identity.
func TestReviewerAsksForCreateOnTopicMessages(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"devs"},
		Extra: map[string]authenticationv1.ExtraValue{"scope": {"a"}}}
	api := &fakeAPI{
		users:  map[string]authenticationv1.UserInfo{"good-token": alice},
		grants: map[string]bool{"alice shop/orders": true},
	}
	auth := newFakeAuth(api, nil)
	cases := []struct {
		name, token, ns, topic string
		want                   Decision
		wantReason             string
	}{
		{"no token", "", "shop", "orders", Unauthenticated, "a bearer token is required"},
		{"a token the API server rejects", "forged", "shop", "orders", Unauthenticated, "not accepted"},
		{"a granted topic", "good-token", "shop", "orders", Allowed, ""},
		{"a topic without a grant", "good-token", "shop", "refunds", Forbidden, `user "alice" may not create topics/messages "refunds" in namespace "shop"`},
		{"another namespace", "good-token", "bank", "orders", Forbidden, `in namespace "bank"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := auth.Authorize(context.Background(), tc.token, tc.ns, tc.topic)
			if err != nil || got != tc.want || !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("Authorize = %v, %q, %v; want %v with %q", got, reason, err, tc.want, tc.wantReason)
			}
		})
	}
	first := api.accesses[0]
	ra := first.ResourceAttributes
	if first.User != "alice" || first.UID != "u-1" || len(first.Groups) != 1 || first.Extra["scope"][0] != "a" ||
		ra == nil || ra.Verb != "create" || ra.Group != "routing.detour.dev" || ra.Resource != "topics" ||
		ra.Subresource != "messages" || ra.Namespace != "shop" || ra.Name != "orders" {
		t.Fatalf("access review = %+v %+v, want alice's identity asking create topics/messages shop/orders", first, ra)
	}
}

// TestReviewerRemembersAnswersForAWhile proves a repeated request costs the API server nothing
// until the cached answers expire (kube-apiserver's webhook lifetimes by default), that refusals
// expire sooner than grants so a new Role takes effect quickly, and that a rejected token is
// remembered only briefly.
func TestReviewerRemembersAnswersForAWhile(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	api := &fakeAPI{
		users:  map[string]authenticationv1.UserInfo{"t": {Username: "bob"}},
		grants: map[string]bool{},
	}
	auth := newFakeAuth(api, clock)
	ask := func(token string) Decision {
		t.Helper()
		d, _, err := auth.Authorize(context.Background(), token, "ns", "topic")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	counts := func() (int, int) { api.mu.Lock(); defer api.mu.Unlock(); return api.reviews, len(api.accesses) }

	if ask("t") != Forbidden || ask("t") != Forbidden {
		t.Fatal("bob is not forbidden before the grant")
	}
	if r, a := counts(); r != 1 || a != 1 {
		t.Fatalf("%d token reviews, %d access reviews for two requests; want one of each", r, a)
	}
	api.mu.Lock()
	api.grants["bob ns/topic"] = true
	api.mu.Unlock()
	now = now.Add(DefaultDeniedTTL - time.Second)
	if ask("t") != Forbidden {
		t.Fatal("the refusal was not remembered within its lifetime")
	}
	now = now.Add(2 * time.Second)
	if ask("t") != Allowed {
		t.Fatal("the grant did not take effect once the refusal expired")
	}
	if r, a := counts(); r != 1 || a != 2 {
		t.Fatalf("%d token reviews, %d access reviews; want the token remembered for %v", r, a, DefaultTokenTTL)
	}
	now = now.Add(DefaultTokenTTL)
	ask("t")
	if r, a := counts(); r != 2 || a != 2 {
		t.Fatalf("%d token reviews, %d access reviews; want the token reviewed again after %v, the grant remembered for %v",
			r, a, DefaultTokenTTL, DefaultAllowedTTL)
	}

	for range 3 {
		if ask("forged") != Unauthenticated {
			t.Fatal("a forged token was accepted")
		}
	}
	if r, _ := counts(); r != 3 {
		t.Fatalf("%d token reviews; want one for three tries of a forged token", r)
	}
	now = now.Add(DefaultRejectedTokenTTL)
	ask("forged")
	if r, _ := counts(); r != 4 {
		t.Fatalf("%d token reviews; want the rejection forgotten after %v", r, DefaultRejectedTokenTTL)
	}
}

// TestReviewerBoundsTheReviewsOfEachClient proves one client cannot make thousands of reviews a
// second (fresh forged tokens miss every cache): beyond its bucket its decisions fail with
// ErrTooManyReviews, while another client keeps its own, and cached answers cost nothing.
func TestReviewerBoundsTheReviewsOfEachClient(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"t": {Username: "bob"}},
		grants: map[string]bool{"bob ns/topic": true}}
	auth := newFakeAuth(api, func() time.Time { return now }, Options{ClientReviewsPerSecond: 10})
	attacker := WithClient(context.Background(), "10.0.0.66")
	refused := 0
	for i := range 1000 {
		_, _, err := auth.Authorize(attacker, fmt.Sprintf("forged-%d", i), "ns", "topic")
		switch {
		case errors.Is(err, ErrTooManyReviews):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	if reviews := 1000 - refused; reviews != 20 {
		t.Fatalf("%d token reviews for 1000 fresh tokens in one instant; want the burst of 20", reviews)
	}
	bob := WithClient(context.Background(), "10.0.0.7")
	for range 50 {
		if d, _, err := auth.Authorize(bob, "t", "ns", "topic"); err != nil || d != Allowed {
			t.Fatalf("another client: %v, %v", d, err)
		}
	}
	now = now.Add(time.Second)
	if _, _, err := auth.Authorize(attacker, "forged-again", "ns", "topic"); err != nil {
		t.Fatalf("a second later the client has reviews again: %v", err)
	}
}

// TestReviewerKeepsOthersAnswersUnderAFlood proves that neither a caller asking about thousands
// of Topics nor a flood of forged tokens pushes out the cached answers of other users.
func TestReviewerKeepsOthersAnswersUnderAFlood(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"alice-token": {Username: "alice"}, "mallory-token": {Username: "mallory"}},
		grants: map[string]bool{"alice shop/orders": true}}
	auth := newFakeAuth(api, func() time.Time { return now }, Options{ClientReviewsPerSecond: 1e9})
	ctx := context.Background()
	if d, _, err := auth.Authorize(ctx, "alice-token", "shop", "orders"); err != nil || d != Allowed {
		t.Fatalf("alice: %v, %v", d, err)
	}
	for i := range 5000 {
		if _, _, err := auth.Authorize(ctx, "mallory-token", "shop", fmt.Sprintf("t%d", i)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := auth.Authorize(ctx, fmt.Sprintf("forged-%d", i), "shop", "orders"); err != nil {
			t.Fatal(err)
		}
	}
	api.mu.Lock()
	reviews, accesses := api.reviews, len(api.accesses)
	api.mu.Unlock()
	if d, _, err := auth.Authorize(ctx, "alice-token", "shop", "orders"); err != nil || d != Allowed {
		t.Fatalf("alice after the flood: %v, %v", d, err)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.reviews != reviews || len(api.accesses) != accesses {
		t.Fatalf("alice's cached answers were pushed out: %d token and %d access reviews more", api.reviews-reviews, len(api.accesses)-accesses)
	}
}

// TestReviewerReportsAnUnreachableAPIServer proves an API failure is an error, not a refusal,
// so the gateway answers 503 and the caller retries.
func TestReviewerReportsAnUnreachableAPIServer(t *testing.T) {
	api := &fakeAPI{fail: errors.New("connection refused")}
	_, _, err := newFakeAuth(api, nil).Authorize(context.Background(), "t", "ns", "topic")
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want the API failure", err)
	}
}

// TestBearerTokenParsing proves only a Bearer Authorization header yields a token.
func TestBearerTokenParsing(t *testing.T) {
	cases := map[string]string{
		"Bearer abc":   "abc",
		"bearer  abc ": "abc",
		"Basic abc":    "",
		"abc":          "",
		"":             "",
	}
	for header, want := range cases {
		r := httptest.NewRequest("POST", "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if got := BearerToken(r); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}

// TestNonResourceFilterGuardsMetrics proves the metrics filter lets only users allowed "get" on
// the path through, asking with non-resource attributes.
func TestNonResourceFilterGuardsMetrics(t *testing.T) {
	api := &fakeAPI{
		users:  map[string]authenticationv1.UserInfo{"prom": {Username: "prometheus"}, "other": {Username: "mallory"}},
		grants: map[string]bool{},
	}
	auth := newFakeAuth(api, nil)
	filter, err := NonResourceFilter(auth)(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("metrics"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	api.grants["prometheus /metrics"] = true
	cases := []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a user without the grant", "Bearer other", http.StatusForbidden},
		{"the metrics reader", "Bearer prom", http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			filter.ServeHTTP(rec, r)
			if rec.Code != tc.want {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
	last := api.accesses[len(api.accesses)-1]
	if last.NonResourceAttributes == nil || last.NonResourceAttributes.Path != "/metrics" ||
		last.NonResourceAttributes.Verb != "get" || last.ResourceAttributes != nil {
		t.Fatalf("access review %+v, want non-resource get /metrics", last)
	}
}

// counts reports the TokenReviews and SubjectAccessReviews the fake API server received.
func (api *fakeAPI) counts() (int, int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.reviews, len(api.accesses)
}

// serviceAccountUser is the user the API server reports for one of a service account's tokens:
// each token carries its own credential id, as TokenRequest tokens do.
func serviceAccountUser(name string, credential int) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: "system:serviceaccount:shop:" + name, UID: "uid-" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"},
		Extra:  map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {fmt.Sprintf("JTI=%d", credential)}}}
}

// TestReviewerRemembersANewSendersTokenWhateverOthersPresent is the hostile-peer trial: others
// present thousands of tokens first (one service account without the send right minting them,
// or addresses forging them), each from an address of its own so no review bound stops them;
// then a new sender, allowed to send, sends 40 times. Its token and grant must be remembered
// after one review each, so none of its requests is refused for reviews it did not cause.
func TestReviewerRemembersANewSendersTokenWhateverOthersPresent(t *testing.T) {
	const flood, requests = 5000, 40
	cases := []struct {
		name string
		// token and client of the flood's i-th request; minted tokens are accepted as mallory's.
		token, client func(i int) string
	}{
		{"one identity's minted tokens from many addresses",
			func(i int) string { return fmt.Sprintf("minted-%d", i) }, func(i int) string { return fmt.Sprintf("10.1.%d.%d", i/256, i%256) }},
		{"forged tokens from many addresses",
			func(i int) string { return fmt.Sprintf("forged-%d", i) }, func(i int) string { return fmt.Sprintf("10.2.%d.%d", i/256, i%256) }},
		{"forged tokens from one address",
			func(i int) string { return fmt.Sprintf("forged-%d", i) }, func(int) string { return "10.3.0.1" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0) // the clock stands still: no bucket refills
			api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"alice-token": serviceAccountUser("alice", 0)},
				grants: map[string]bool{"system:serviceaccount:shop:alice shop/orders": true}}
			for i := range flood {
				api.users[fmt.Sprintf("minted-%d", i)] = serviceAccountUser("mallory", i)
			}
			auth := newFakeAuth(api, func() time.Time { return now })
			for i := range flood {
				d, _, err := auth.Authorize(WithClient(context.Background(), tc.client(i)), tc.token(i), "shop", "orders")
				if err != nil && !errors.Is(err, ErrTooManyReviews) {
					t.Fatal(err)
				}
				if err == nil && d == Allowed {
					t.Fatalf("flood request %d allowed", i)
				}
			}
			reviews, accesses := api.counts()
			alice := WithClient(context.Background(), "10.9.9.9")
			for i := range requests {
				if d, _, err := auth.Authorize(alice, "alice-token", "shop", "orders"); err != nil || d != Allowed {
					t.Fatalf("the new sender's request %d: %v, %v", i, d, err)
				}
			}
			r, a := api.counts()
			if r-reviews != 1 || a-accesses != 1 {
				t.Fatalf("the new sender's %d requests caused %d token and %d access reviews; want one each", requests, r-reviews, a-accesses)
			}
		})
	}
}

// TestReviewerReviewsOnceForRequestsThatWaitTogether proves that requests presenting the same new
// token at the same time wait for one TokenReview and one SubjectAccessReview and are charged one
// review each, so a new sender's first burst is not refused for reviews it shares.
func TestReviewerReviewsOnceForRequestsThatWaitTogether(t *testing.T) {
	const requests = 40 // twice the burst of reviews
	api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"t": {Username: "bob"}},
		grants: map[string]bool{"bob ns/topic": true}}
	auth := newFakeAuth(api, nil)
	release := make(chan struct{})
	slow := auth.tokens
	auth.tokens = blockingReviews{TokenReviewInterface: slow, release: release}
	ctx := WithClient(context.Background(), "10.0.0.7")
	var started, done sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			d, _, err := auth.Authorize(ctx, "t", "ns", "topic")
			if err == nil && d != Allowed {
				err = fmt.Errorf("decision %v", d)
			}
			errs <- err
		}()
	}
	started.Wait()
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a request of the burst: %v", err)
		}
	}
	if r, a := api.counts(); r != 1 || a != 1 {
		t.Fatalf("%d token and %d access reviews for %d requests at once; want one each", r, a, requests)
	}
}

// blockingReviews holds every TokenReview until release is closed.
type blockingReviews struct {
	authnclient.TokenReviewInterface
	release chan struct{}
}

func (b blockingReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	<-b.release
	return b.TokenReviewInterface.Create(ctx, tr, opts)
}

// TestReviewerSurvivesAPanickingReview proves a panic while reviewing, which runs outside the
// callers' goroutines, becomes their error (the gateway answers 503), is counted, and leaves
// later reviews working.
func TestReviewerSurvivesAPanickingReview(t *testing.T) {
	api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"t": {Username: "bob"}},
		grants: map[string]bool{"bob ns/topic": true}}
	auth := newFakeAuth(api, nil)
	auth.tokens = panickingReviews{TokenReviewInterface: auth.tokens, token: "poison"}
	var panics atomic.Int32
	auth.opts.OnReviewPanic = func() { panics.Add(1) }
	_, _, err := auth.Authorize(context.Background(), "poison", "ns", "topic")
	if pe, ok := errors.AsType[*PanicError](err); !ok || !strings.Contains(string(pe.Stack), "panickingReviews") {
		t.Fatalf("err = %v, want the review's panic with its stack", err)
	}
	if got := panics.Load(); got != 1 {
		t.Fatalf("%v review panics counted, want 1", got)
	}
	if d, _, err := auth.Authorize(context.Background(), "t", "ns", "topic"); err != nil || d != Allowed {
		t.Fatalf("after the panic: %v, %v", d, err)
	}
}

// panickingReviews panics reviewing token, as a bug in a review's client would.
type panickingReviews struct {
	authnclient.TokenReviewInterface
	token string
}

func (p panickingReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	if tr.Spec.Token == p.token {
		panic("review of a poisoned token")
	}
	return p.TokenReviewInterface.Create(ctx, tr, opts)
}
