package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
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
	// Forbidden: the caller is known but may not create topics/messages there (HTTP 403).
	Forbidden
)

// Authorizer decides whether the bearer token may send to a Topic.
type Authorizer interface {
	// Authorize returns the decision and, for Unauthenticated and Forbidden, a reason safe to show
	// the caller. An error means the decision could not be made (the API server is unreachable).
	Authorize(ctx context.Context, token, namespace, topic string) (Decision, string, error)
}

// Default cache lifetimes of KubeAuth, those of kube-apiserver's webhook authenticator
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
)

// Bounds of KubeAuth's memory. A full cache keeps what it holds and stops remembering new
// answers (they are asked again), so no caller can push out the answers of others; one user's
// many decisions only ever push out that user's own.
const (
	maxTokens          = 4096
	maxUsers           = 4096
	maxDecisionsByUser = 256
	maxClients         = 16384
)

// ErrTooManyReviews is the error of a decision that would have taken the caller over its bound
// of reviews per second; the gateway answers 429 and the caller retries later.
var ErrTooManyReviews = errors.New("too many authentication and authorization reviews from this client")

// AuthOptions configure KubeAuth; zero values take the defaults.
type AuthOptions struct {
	// TokenTTL is how long an accepted token's user is remembered.
	TokenTTL time.Duration
	// RejectedTokenTTL is how long a token the API server rejected is remembered as rejected.
	RejectedTokenTTL time.Duration
	// AllowedTTL and DeniedTTL are how long an authorisation decision is remembered.
	AllowedTTL, DeniedTTL time.Duration
	// ClientReviewsPerSecond bounds the reviews one client causes (bursts of twice as many).
	ClientReviewsPerSecond float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o AuthOptions) withDefaults() AuthOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TokenTTL, DefaultTokenTTL)
	def(&o.RejectedTokenTTL, DefaultRejectedTokenTTL)
	def(&o.AllowedTTL, DefaultAllowedTTL)
	def(&o.DeniedTTL, DefaultDeniedTTL)
	if o.ClientReviewsPerSecond <= 0 {
		o.ClientReviewsPerSecond = DefaultClientReviewsPerSecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// KubeAuth authenticates bearer tokens with the API server's TokenReview and authorises them
// with SubjectAccessReview on topics/messages, remembering answers for a while so a busy
// sender costs the API server a few requests every few minutes, not two per message, and bounding
// the reviews each client can cause.
type KubeAuth struct {
	tokens authnclient.TokenReviewInterface
	access authzclient.SubjectAccessReviewInterface
	opts   AuthOptions

	mu        sync.Mutex
	users     map[[sha256.Size]byte]cached[authenticationv1.UserInfo]
	rejected  map[[sha256.Size]byte]time.Time
	decisions map[string]map[string]cached[bool] // user -> question -> answer
	clients   map[string]*bucket
}

type cached[T any] struct {
	value   T
	expires time.Time
}

// bucket is a token bucket of reviews for one client.
type bucket struct {
	tokens float64
	at     time.Time
}

// ClientKey is the context key under which callers put the identity (e.g. the remote address)
// of the client a decision is for; decisions without one share one bound.
type ClientKey struct{}

// WithClient returns ctx carrying the client's identity for KubeAuth's per-client bound.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, ClientKey{}, client)
}

// NewKubeAuth builds a KubeAuth that talks to the API server of cfg. The identity of cfg needs
// create on tokenreviews.authentication.k8s.io and subjectaccessreviews.authorization.k8s.io.
func NewKubeAuth(cfg *rest.Config, httpClient *http.Client, opts AuthOptions) (*KubeAuth, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return NewKubeAuthFromClients(authn.TokenReviews(), authz.SubjectAccessReviews(), opts), nil
}

// NewKubeAuthFromClients builds a KubeAuth on given clients.
func NewKubeAuthFromClients(tokens authnclient.TokenReviewInterface, access authzclient.SubjectAccessReviewInterface, opts AuthOptions) *KubeAuth {
	return &KubeAuth{
		tokens:    tokens,
		access:    access,
		opts:      opts.withDefaults(),
		users:     make(map[[sha256.Size]byte]cached[authenticationv1.UserInfo]),
		rejected:  make(map[[sha256.Size]byte]time.Time),
		decisions: make(map[string]map[string]cached[bool]),
		clients:   make(map[string]*bucket),
	}
}

// Authorize implements Authorizer.
func (a *KubeAuth) Authorize(ctx context.Context, token, namespace, topic string) (Decision, string, error) {
	attrs := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace:   namespace,
		Verb:        AuthVerb,
		Group:       AuthGroup,
		Resource:    AuthResource,
		Subresource: AuthSubresource,
		Name:        topic,
	}}
	return a.decide(ctx, token, attrs, func(user string) string {
		return fmt.Sprintf("user %q may not %s %s/%s %q in namespace %q",
			user, AuthVerb, AuthResource, AuthSubresource, topic, namespace)
	})
}

// AuthorizeNonResource decides whether the token may use verb on a non-resource path, as the
// API server authorises /metrics (verb "get") for Prometheus.
func (a *KubeAuth) AuthorizeNonResource(ctx context.Context, token, path, verb string) (Decision, string, error) {
	attrs := authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{
		Path: path, Verb: verb,
	}}
	return a.decide(ctx, token, attrs, func(user string) string {
		return fmt.Sprintf("user %q may not %s %s", user, verb, path)
	})
}

func (a *KubeAuth) decide(ctx context.Context, token string, attrs authorizationv1.SubjectAccessReviewSpec, denied func(string) string) (Decision, string, error) {
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

func (a *KubeAuth) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := a.opts.Now()
	a.mu.Lock()
	c, hit := a.users[key]
	until, rejected := a.rejected[key]
	a.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.value, true, nil
	}
	if rejected && now.Before(until) {
		return authenticationv1.UserInfo{}, false, nil
	}
	if !a.spend(ctx, now) {
		return authenticationv1.UserInfo{}, false, ErrTooManyReviews
	}
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("token review: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !review.Status.Authenticated {
		if roomFor(a.rejected, func(t time.Time) bool { return !now.Before(t) }, maxTokens) {
			a.rejected[key] = now.Add(a.opts.RejectedTokenTTL)
		}
		return authenticationv1.UserInfo{}, false, nil
	}
	if roomFor(a.users, func(c cached[authenticationv1.UserInfo]) bool { return !now.Before(c.expires) }, maxTokens) {
		a.users[key] = cached[authenticationv1.UserInfo]{value: review.Status.User, expires: now.Add(a.opts.TokenTTL)}
	}
	return review.Status.User, true, nil
}

func (a *KubeAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	who, question := userKey(user), accessKey(user, attrs)
	now := a.opts.Now()
	a.mu.Lock()
	c, hit := a.decisions[who][question]
	a.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.value, nil
	}
	if !a.spend(ctx, now) {
		return false, ErrTooManyReviews
	}
	spec := attrs
	spec.User, spec.UID, spec.Groups = user.Username, user.UID, user.Groups
	spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		spec.Extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := a.opts.DeniedTTL
	if allowed {
		ttl = a.opts.AllowedTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	mine := a.decisions[who]
	if mine == nil {
		allExpired := func(m map[string]cached[bool]) bool {
			for _, c := range m {
				if now.Before(c.expires) {
					return false
				}
			}
			return true
		}
		if !roomFor(a.decisions, allExpired, maxUsers) {
			return allowed, nil
		}
		mine = make(map[string]cached[bool])
		a.decisions[who] = mine
	}
	if !roomFor(mine, func(c cached[bool]) bool { return !now.Before(c.expires) }, maxDecisionsByUser) {
		clear(mine) // the user's own answers make room for the user's new ones
	}
	mine[question] = cached[bool]{value: allowed, expires: now.Add(ttl)}
	return allowed, nil
}

// spend takes one review from the bucket of ctx's client, and reports whether there was one.
func (a *KubeAuth) spend(ctx context.Context, now time.Time) bool {
	client, _ := ctx.Value(ClientKey{}).(string)
	rate := a.opts.ClientReviewsPerSecond
	burst := 2 * rate
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.clients[client]
	if b == nil {
		// An idle client's bucket is full again: forgetting it loses nothing.
		full := func(b *bucket) bool { return now.Sub(b.at).Seconds()*rate+b.tokens >= burst }
		if !roomFor(a.clients, full, maxClients) {
			client = "" // beyond the bound, unknown clients share one bucket
			b = a.clients[client]
		}
		if b == nil {
			b = &bucket{tokens: burst, at: now}
			a.clients[client] = b
		}
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
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

// roomFor reports whether m may take one more entry, first deleting the entries that gone says
// are expired when it is full. It never deletes live entries.
func roomFor[K comparable, V any](m map[K]V, gone func(V) bool, limit int) bool {
	if len(m) < limit {
		return true
	}
	for k, v := range m {
		if gone(v) {
			delete(m, k)
		}
	}
	return len(m) < limit
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// errAuthUnavailable marks a request whose authorisation could not be decided.
var errAuthUnavailable = errors.New("authorization is unavailable")

// NonResourceFilter protects a handler the way the API server protects its own non-resource
// paths: the bearer token must be valid and its user allowed the request's lowercased method on
// the request's path (e.g. "get" on /metrics). Its signature is controller-runtime's
// metrics server Filter.
func NonResourceFilter(a *KubeAuth) func(logr.Logger, http.Handler) (http.Handler, error) {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			decision, reason, err := a.AuthorizeNonResource(WithClient(r.Context(), clientOf(r)), bearerToken(r), r.URL.Path, strings.ToLower(r.Method))
			switch {
			case errors.Is(err, ErrTooManyReviews):
				w.Header().Set("Retry-After", "1")
				http.Error(w, err.Error(), http.StatusTooManyRequests)
			case err != nil:
				log.Error(err, "Authorizing a metrics request failed")
				http.Error(w, errAuthUnavailable.Error(), http.StatusServiceUnavailable)
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
