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

// Cache lifetimes of the decisions KubeAuth remembers. A granted permission is remembered
// longer than a refusal so that a freshly granted Role takes effect quickly, as the API
// server's own webhook authorizer does. Tokens the API server rejected are not remembered at
// all, so random tokens cannot fill the cache.
const (
	tokenTTL   = time.Minute
	allowTTL   = time.Minute
	denyTTL    = 10 * time.Second
	maxEntries = 4096
)

// KubeAuth authenticates bearer tokens with the API server's TokenReview and authorises them
// with SubjectAccessReview on topics/messages, remembering answers for a short time so a busy
// sender costs the API server two requests a minute, not two per message.
type KubeAuth struct {
	tokens authnclient.TokenReviewInterface
	access authzclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu      sync.Mutex
	users   map[[sha256.Size]byte]cached[authenticationv1.UserInfo]
	results map[string]cached[bool]
}

type cached[T any] struct {
	value   T
	expires time.Time
}

// NewKubeAuth builds a KubeAuth that talks to the API server of cfg. The identity of cfg needs
// create on tokenreviews.authentication.k8s.io and subjectaccessreviews.authorization.k8s.io.
func NewKubeAuth(cfg *rest.Config, httpClient *http.Client) (*KubeAuth, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return NewKubeAuthFromClients(authn.TokenReviews(), authz.SubjectAccessReviews(), time.Now), nil
}

// NewKubeAuthFromClients builds a KubeAuth on given clients and clock (now may be nil).
func NewKubeAuthFromClients(tokens authnclient.TokenReviewInterface, access authzclient.SubjectAccessReviewInterface, now func() time.Time) *KubeAuth {
	if now == nil {
		now = time.Now
	}
	return &KubeAuth{
		tokens:  tokens,
		access:  access,
		now:     now,
		users:   make(map[[sha256.Size]byte]cached[authenticationv1.UserInfo]),
		results: make(map[string]cached[bool]),
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
	now := a.now()
	a.mu.Lock()
	c, hit := a.users[key]
	a.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.value, true, nil
	}
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("token review: %w", err)
	}
	if !review.Status.Authenticated {
		return authenticationv1.UserInfo{}, false, nil
	}
	a.mu.Lock()
	makeRoom(a.users, now)
	a.users[key] = cached[authenticationv1.UserInfo]{value: review.Status.User, expires: now.Add(tokenTTL)}
	a.mu.Unlock()
	return review.Status.User, true, nil
}

func (a *KubeAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	key := accessKey(user, attrs)
	now := a.now()
	a.mu.Lock()
	c, hit := a.results[key]
	a.mu.Unlock()
	if hit && now.Before(c.expires) {
		return c.value, nil
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
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	a.mu.Lock()
	makeRoom(a.results, now)
	a.results[key] = cached[bool]{value: allowed, expires: now.Add(ttl)}
	a.mu.Unlock()
	return allowed, nil
}

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

// makeRoom keeps a cache map bounded: when it is full, expired entries go, and if that is not
// enough the whole map is dropped (the next requests simply ask the API server again).
func makeRoom[K comparable, V any](m map[K]cached[V], now time.Time) {
	if len(m) < maxEntries {
		return
	}
	for k, c := range m {
		if !now.Before(c.expires) {
			delete(m, k)
		}
	}
	if len(m) >= maxEntries {
		clear(m)
	}
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
			decision, reason, err := a.AuthorizeNonResource(r.Context(), bearerToken(r), r.URL.Path, strings.ToLower(r.Method))
			switch {
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
