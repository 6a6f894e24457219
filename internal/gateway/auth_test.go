package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
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

func newFakeAuth(api *fakeAPI, now func() time.Time, opts ...AuthOptions) *KubeAuth {
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
	var o AuthOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Now = now
	return NewKubeAuthFromClients(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), o)
}

// TestKubeAuthAsksForCreateOnTopicMessages proves the decisions follow TokenReview and
// SubjectAccessReview, and that the access review asks exactly for create on the Topic's
// messages subresource with the reviewed user's identity.
func TestKubeAuthAsksForCreateOnTopicMessages(t *testing.T) {
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

// TestKubeAuthRemembersAnswersForAWhile proves a repeated request costs the API server nothing
// until the cached answers expire (kube-apiserver's webhook lifetimes by default), that refusals
// expire sooner than grants so a new Role takes effect quickly, and that a rejected token is
// remembered only briefly.
func TestKubeAuthRemembersAnswersForAWhile(t *testing.T) {
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

// TestKubeAuthBoundsTheReviewsOfEachClient proves one client cannot make thousands of reviews a
// second (fresh forged tokens miss every cache): beyond its bucket its decisions fail with
// ErrTooManyReviews, while another client keeps its own, and cached answers cost nothing.
func TestKubeAuthBoundsTheReviewsOfEachClient(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"t": {Username: "bob"}},
		grants: map[string]bool{"bob ns/topic": true}}
	auth := newFakeAuth(api, func() time.Time { return now }, AuthOptions{ClientReviewsPerSecond: 10})
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

// TestKubeAuthKeepsOthersAnswersUnderAFlood proves that neither a caller asking about thousands
// of Topics nor a flood of forged tokens pushes out the cached answers of other users.
func TestKubeAuthKeepsOthersAnswersUnderAFlood(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	api := &fakeAPI{users: map[string]authenticationv1.UserInfo{"alice-token": {Username: "alice"}, "mallory-token": {Username: "mallory"}},
		grants: map[string]bool{"alice shop/orders": true}}
	auth := newFakeAuth(api, func() time.Time { return now }, AuthOptions{ClientReviewsPerSecond: 1e9})
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

// TestKubeAuthReportsAnUnreachableAPIServer proves an API failure is an error, not a refusal,
// so the gateway answers 503 and the caller retries.
func TestKubeAuthReportsAnUnreachableAPIServer(t *testing.T) {
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
		if got := bearerToken(r); got != want {
			t.Errorf("bearerToken(%q) = %q, want %q", header, got, want)
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
