package kubeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// The resource a sender must be allowed to create. Sending is modelled as creating the
// "messages" subresource of a Topic, so ordinary RBAC Roles grant it per namespace and, with
// resourceNames, per Topic.
const (
	AuthGroup       = "routing.detour.dev"
	AuthResource    = "topics"
	AuthSubresource = "messages"
	AuthVerb        = "create"
)

// Decision is the outcome of authenticating and authorising one request.
type Decision int

const (
	// Allowed: the caller may send to the topic.
	Allowed Decision = iota
	// Unauthenticated: no bearer token, or the API server did not accept it (HTTP 401).
	Unauthenticated
	// Forbidden: the caller is known but may not create topics/messages (or clusters/messages)
	// there (HTTP 403).
	Forbidden
)

// Default cache lifetimes of Reviewer, those of kube-apiserver's webhook authenticator
// (--authentication-token-webhook-cache-ttl) and authorizer (--authorization-webhook-cache-
// authorized-ttl and -unauthorized-ttl), plus a short memory of rejected tokens so that a client
// repeating a bad token does not cost a TokenReview per request.
const (
	DefaultTokenTTL         = 2 * time.Minute
	DefaultRejectedTokenTTL = 10 * time.Second
	DefaultAllowedTTL       = 5 * time.Minute
	DefaultDeniedTTL        = 30 * time.Second
	// DefaultClientReviewsPerSecond bounds the TokenReviews and SubjectAccessReviews one client
	// (one remote address) causes, with bursts of twice as many.
	DefaultClientReviewsPerSecond = 10
	// DefaultReviewTimeout bounds one review, as controller-runtime's metrics filter bounds its
	// TokenReviews.
	DefaultReviewTimeout = 10 * time.Second
)

// Bounds of Reviewer's memory. Accepted tokens are charged to the user they belong to, rejected
// ones to the client address that presented them, and authorisation answers to their user; an
// owner beyond its share pushes out only its own answers, and a full cache makes room at the
// expense of the owner holding the most (see fairCache). So however many tokens one identity
// mints, or one address forges, a new sender's answers are remembered and it pays one review
// per lifetime, not one per request.
const (
	maxTokens                  = 8192
	maxTokensPerUser           = 1024 // a service account's pods each hold a token of their own
	maxRejectedTokensPerClient = 64
	maxDecisions               = 8192
	maxDecisionsPerUser        = 1024
	// maxDecisionKey: longer questions are answered but not remembered, as kube-apiserver's
	// webhook authorizer does not cache requests whose caller-controlled attributes pass 10000
	// bytes.
	maxDecisionKey = 8 << 10
	maxClients     = 16384
)

// ErrTooManyReviews is the error of a decision that would have taken the caller over its bound
// of reviews per second; the gateway answers 429 and the caller retries later.
var ErrTooManyReviews = errors.New("too many authentication and authorization reviews from this client")

// Options configure Reviewer; zero values take the defaults.
type Options struct {
	// TokenTTL is how long an accepted token's user is remembered.
	TokenTTL time.Duration
	// RejectedTokenTTL is how long a token the API server rejected is remembered as rejected.
	RejectedTokenTTL time.Duration
	// AllowedTTL and DeniedTTL are how long an authorisation decision is remembered.
	AllowedTTL, DeniedTTL time.Duration
	// ClientReviewsPerSecond bounds the reviews one client causes (bursts of twice as many).
	ClientReviewsPerSecond float64
	// ReviewTimeout bounds one TokenReview or SubjectAccessReview; 0 means DefaultReviewTimeout.
	ReviewTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnReviewPanic, when set, is called for every panic recovered in a review, so the process
	// can count them.
	OnReviewPanic func()
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TokenTTL, DefaultTokenTTL)
	def(&o.RejectedTokenTTL, DefaultRejectedTokenTTL)
	def(&o.AllowedTTL, DefaultAllowedTTL)
	def(&o.DeniedTTL, DefaultDeniedTTL)
	def(&o.ReviewTimeout, DefaultReviewTimeout)
	if o.ClientReviewsPerSecond <= 0 {
		o.ClientReviewsPerSecond = DefaultClientReviewsPerSecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Reviewer authenticates bearer tokens with the API server's TokenReview and authorises them
// with SubjectAccessReview on topics/messages (or clusters/messages, AuthorizeCluster), remembering answers for a while so a busy
// sender costs the API server a few requests every few minutes, not two per message, and bounding
// the reviews each client can cause.
//
// Why not k8s.io/apiserver's delegating authenticator and authorizer (authenticatorfactory and
// authorizerfactory, on which kube-apiserver extensions and controller-runtime's metrics filter
// build), whose lifetimes, one review per token however many requests wait for it, and detached
// review with its own timeout Reviewer follows:
//   - their token cache (authentication/token/cache) keeps every token it reviewed for its
//     lifetime, with no bound on how many and no notion of whose: no answer is pushed out, but
//     one identity's minted tokens or one address's forged ones grow memory with every review.
//     It reviews on a context detached from the request and does not tell its caller whether it
//     answered from memory, so a per-client bound could only count requests, not reviews, and
//     would refuse busy senders whose answers are remembered;
//   - their authorizer (the webhook authorizer) keeps answers in one least-recently-used list of
//     8192 shared by everyone, so one identity asking about many Topics pushes out the answers
//     of others;
//   - the authorizer brings a CEL interpreter, OpenTelemetry and gRPC into the manager (233
//     packages) for match conditions and tracing the gateway does not use.
//
// What detour adds is bounds per owner: reviews per client address, remembered tokens per user
// and per client address, remembered decisions per user (see the bounds above).
type Reviewer struct {
	tokens authnclient.TokenReviewInterface
	access authzclient.SubjectAccessReviewInterface
	opts   Options

	tokenFlights, accessFlights singleflight.Group

	mu        sync.Mutex
	known     *fairCache[[sha256.Size]byte, tokenAnswer]
	decisions *fairCache[string, bool]
	budgets   *reviewBudgets
}

// tokenAnswer is what a TokenReview said of a token.
type tokenAnswer struct {
	user          authenticationv1.UserInfo
	authenticated bool
}

// ClientKey is the context key under which callers put the identity (e.g. the remote address)
// of the client a decision is for; decisions without one share one bound.
type ClientKey struct{}

// WithClient returns ctx carrying the client's identity for Reviewer's per-client bound.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, ClientKey{}, client)
}

func clientFrom(ctx context.Context) string {
	client, _ := ctx.Value(ClientKey{}).(string)
	return client
}

// New builds a Reviewer that talks to the API server of cfg. The identity of cfg needs
// create on tokenreviews.authentication.k8s.io and subjectaccessreviews.authorization.k8s.io.
func New(cfg *rest.Config, httpClient *http.Client, opts Options) (*Reviewer, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return NewFromClients(authn.TokenReviews(), authz.SubjectAccessReviews(), opts), nil
}

// NewFromClients builds a Reviewer on given clients.
func NewFromClients(tokens authnclient.TokenReviewInterface, access authzclient.SubjectAccessReviewInterface, opts Options) *Reviewer {
	opts = opts.withDefaults()
	return &Reviewer{
		tokens:    tokens,
		access:    access,
		opts:      opts,
		known:     newFairCache[[sha256.Size]byte, tokenAnswer](maxTokens),
		decisions: newFairCache[string, bool](maxDecisions),
		budgets:   newReviewBudgets(opts.ClientReviewsPerSecond, maxClients),
	}
}

// Authorize decides whether the token may send to the Topic namespace/topic: create on its
// messages subresource. The reason is safe to show the caller; an error means the decision
// could not be made (the API server is unreachable, or the client spent its reviews).
func (a *Reviewer) Authorize(ctx context.Context, token, namespace, topic string) (Decision, string, error) {
	return a.authorizeMessages(ctx, token, AuthResource, namespace, topic)
}

// authorizeMessages decides whether the token may create the messages subresource of the object
// namespace/name of resource (a Topic's or a Cluster's).
func (a *Reviewer) authorizeMessages(ctx context.Context, token, resource, namespace, name string) (Decision, string, error) {
	attrs := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace:   namespace,
		Verb:        AuthVerb,
		Group:       AuthGroup,
		Resource:    resource,
		Subresource: AuthSubresource,
		Name:        name,
	}}
	return a.decide(ctx, token, attrs, func(user string) string {
		return fmt.Sprintf("user %q may not %s %s/%s %q in namespace %q",
			user, AuthVerb, resource, AuthSubresource, name, namespace)
	})
}

// AuthorizeNonResource decides whether the token may use verb on a non-resource path, as the
// API server authorises /metrics (verb "get") for Prometheus.
func (a *Reviewer) AuthorizeNonResource(ctx context.Context, token, path, verb string) (Decision, string, error) {
	attrs := authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{
		Path: path, Verb: verb,
	}}
	return a.decide(ctx, token, attrs, func(user string) string {
		return fmt.Sprintf("user %q may not %s %s", user, verb, path)
	})
}

func (a *Reviewer) decide(ctx context.Context, token string, attrs authorizationv1.SubjectAccessReviewSpec, denied func(string) string) (Decision, string, error) {
	if token == "" {
		return Unauthenticated, "a bearer token is required", nil
	}
	user, ok, err := a.authenticate(ctx, token)
	if err != nil {
		return 0, "", err
	}
	if !ok {
		return Unauthenticated, "the token was not accepted", nil
	}
	allowed, err := a.authorize(ctx, user, attrs)
	if err != nil {
		return 0, "", err
	}
	if !allowed {
		return Forbidden, denied(user.Username), nil
	}
	return Allowed, "", nil
}

func (a *Reviewer) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	if ans, hit := a.rememberedToken(key); hit {
		return ans.user, ans.authenticated, nil
	}
	client := clientFrom(ctx)
	v, err := a.shared(ctx, &a.tokenFlights, string(key[:]), func(rctx context.Context) (any, error) {
		// A review that ended since the lookup above may have answered already.
		if ans, hit := a.rememberedToken(key); hit {
			return ans, nil
		}
		if !a.spend(client) {
			return nil, ErrTooManyReviews
		}
		review, err := a.tokens.Create(rctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("token review: %w", err)
		}
		ans := tokenAnswer{user: review.Status.User, authenticated: review.Status.Authenticated}
		a.rememberToken(key, client, ans)
		return ans, nil
	})
	if err != nil {
		return authenticationv1.UserInfo{}, false, err
	}
	ans := v.(tokenAnswer)
	return ans.user, ans.authenticated, nil
}

func (a *Reviewer) rememberedToken(key [sha256.Size]byte) (tokenAnswer, bool) {
	now := a.opts.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.known.get(key, now)
}

// rememberToken charges an accepted token to its user and a rejected one to the client that
// presented it: only they can have many.
func (a *Reviewer) rememberToken(key [sha256.Size]byte, client string, ans tokenAnswer) {
	now := a.opts.Now()
	owner, ownerCap, ttl := "client\x00"+client, maxRejectedTokensPerClient, a.opts.RejectedTokenTTL
	if ans.authenticated {
		owner, ownerCap, ttl = "user\x00"+userKey(ans.user), maxTokensPerUser, a.opts.TokenTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.known.put(key, owner, ownerCap, ans, now.Add(ttl), now)
}

func (a *Reviewer) authorize(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	who, question := userKey(user), accessKey(user, attrs)
	if allowed, hit := a.rememberedDecision(question); hit {
		return allowed, nil
	}
	client := clientFrom(ctx)
	v, err := a.shared(ctx, &a.accessFlights, question, func(rctx context.Context) (any, error) {
		if allowed, hit := a.rememberedDecision(question); hit {
			return allowed, nil
		}
		if !a.spend(client) {
			return nil, ErrTooManyReviews
		}
		spec := attrs
		spec.User, spec.UID, spec.Groups = user.Username, user.UID, user.Groups
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
		review, err := a.access.Create(rctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("subject access review: %w", err)
		}
		allowed := review.Status.Allowed && !review.Status.Denied
		a.rememberDecision(who, question, allowed)
		return allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

func (a *Reviewer) rememberedDecision(question string) (bool, bool) {
	now := a.opts.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.decisions.get(question, now)
}

func (a *Reviewer) rememberDecision(who, question string, allowed bool) {
	if len(question) > maxDecisionKey {
		return
	}
	now := a.opts.Now()
	ttl := a.opts.DeniedTTL
	if allowed {
		ttl = a.opts.AllowedTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decisions.put(question, who, maxDecisionsPerUser, allowed, now.Add(ttl), now)
}

// shared runs review once for every caller asking the same question at the same time, on a
// context of its own (the first caller may leave while others still wait) bounded by
// ReviewTimeout, and waits for it until ctx ends. Only the first caller's budget pays for the
// review, and the callers who join share its outcome, a refusal for that budget included: they
// present the same token, or ask the same user's question, so they are the same sender. A panic
// in review is the callers' error: the review runs outside their goroutines, where nothing else
// would catch it (singleflight would end the process).
func (a *Reviewer) shared(ctx context.Context, g *singleflight.Group, key string, review func(context.Context) (any, error)) (any, error) {
	ch := g.DoChan(key, func() (v any, err error) {
		defer func() {
			if p := recover(); p != nil {
				if a.opts.OnReviewPanic != nil {
					a.opts.OnReviewPanic()
				}
				v, err = nil, &PanicError{Value: p, Stack: debug.Stack()}
			}
		}()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.ReviewTimeout)
		defer cancel()
		return review(rctx)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// spend takes one review from the client's budget, and reports whether there was one.
func (a *Reviewer) spend(client string) bool {
	now := a.opts.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.budgets.spend(client, now)
}

// userKey identifies a user for the decision cache.
func userKey(user authenticationv1.UserInfo) string { return user.Username + "\x00" + user.UID }

// accessKey identifies one authorisation question. Every part that the authorizer may look at
// is in it, each followed by a separator byte that cannot occur in names.
func accessKey(user authenticationv1.UserInfo, attrs authorizationv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	if ra := attrs.ResourceAttributes; ra != nil {
		for _, s := range []string{"r", ra.Namespace, ra.Verb, ra.Group, ra.Resource, ra.Subresource, ra.Name} {
			field(s)
		}
	}
	if nra := attrs.NonResourceAttributes; nra != nil {
		for _, s := range []string{"n", nra.Path, nra.Verb} {
			field(s)
		}
	}
	field(user.Username)
	field(user.UID)
	groups := slices.Clone(user.Groups)
	slices.Sort(groups)
	for _, g := range groups {
		b.WriteString(g)
		b.WriteByte(1)
	}
	keys := make([]string, 0, len(user.Extra))
	for k := range user.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(2)
		for _, v := range user.Extra[k] {
			b.WriteString(v)
			b.WriteByte(3)
		}
	}
	return b.String()
}

// BearerToken extracts the token of an "Authorization: Bearer <token>" header.
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// ErrUnavailable marks a request whose authorisation could not be decided.
var ErrUnavailable = errors.New("authorization is unavailable")

// NonResourceFilter protects a handler the way the API server protects its own non-resource
// paths: the bearer token must be valid and its user allowed the request's lowercased method on
// the request's path (e.g. "get" on /metrics). Its signature is controller-runtime's
// metrics server Filter.
func NonResourceFilter(a *Reviewer) func(logr.Logger, http.Handler) (http.Handler, error) {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			decision, reason, err := a.AuthorizeNonResource(WithClient(r.Context(), ClientOf(r)), BearerToken(r), r.URL.Path, strings.ToLower(r.Method))
			switch {
			case errors.Is(err, ErrTooManyReviews):
				w.Header().Set("Retry-After", "1")
				http.Error(w, err.Error(), http.StatusTooManyRequests)
			case err != nil:
				log.Error(err, "Authorizing a metrics request failed", PanicStack(err)...)
				http.Error(w, ErrUnavailable.Error(), http.StatusServiceUnavailable)
			case decision == Unauthenticated:
				w.Header().Set("WWW-Authenticate", `Bearer realm="detour"`)
				http.Error(w, reason, http.StatusUnauthorized)
			case decision == Forbidden:
				http.Error(w, reason, http.StatusForbidden)
			default:
				next.ServeHTTP(w, r)
			}
		}), nil
	}
}
