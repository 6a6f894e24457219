package producer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/scope"
)

// Credentials and their refusals.
//
// One runtime sends to brokers of many clusters over one remoting client, and each cluster has
// users of its own, so credentials are set per scope: the part of a broker identity up to and
// including its last "/" (a Cluster's "namespace/cluster/", a namespace's "namespace/", or "" for
// identities without "/"). Every request to an address one of the scope's brokers has is signed
// with them (remoting.Client.SetCredentials): sends, heartbeats, probes, pressure polls and topic
// creation alike.
//
// A broker that refuses the credentials (remoting.ClassifyACLRefusal) says something about the
// caller, not about its health. Each refusal is kept per broker address and topic, with the
// broker's remark, until a request of the same kind is accepted or the scope's credentials
// change, so controllers can show it (CredentialRefusals). Under PresetDetour a send refused so
// ends at once without isolating the broker, and a probe refused so is no proof either way; the
// RocketMQ presets keep RocketMQ's handling (NO_PERMISSION is a retry code, and the refusal
// isolates the broker as any other).

// maxCredentialRefusals bounds the refusals kept; beyond it new ones are counted, not kept.
const maxCredentialRefusals = 4096

// CredentialRefusal is a broker's last refusal of the runtime's credentials for one topic (or,
// with Topic "", for a request about no topic: a heartbeat, a runtime-info or config poll).
type CredentialRefusal struct {
	// Broker is the runtime's identity of the broker ("" when no route or pod names its address).
	Broker string
	// Scope is the credential scope the refusal belongs to (see CredentialScope): the broker's,
	// or the scope a request to an address no route names was signed for (CreateTopicIn).
	Scope string
	Addr  string
	Topic string
	// Request names the refused request (e.g. SEND_MESSAGE_V2, HEART_BEAT).
	Request string
	// Reason is remoting.AuthenticationRefused or remoting.AuthorizationRefused.
	Reason remoting.ACLRefusal
	// Remark is the broker's own words, e.g. "check signature failed.".
	Remark string
	// Since is when the broker first refused, At when it refused last; Count counts refusals.
	Since, At time.Time
	Count     int64
}

// CredentialRefusalMetrics is implemented by Metrics that count credential refusals; the runtime
// calls CredentialsRefused once per refused request when Options.Metrics implements it.
type CredentialRefusalMetrics interface {
	CredentialsRefused(broker string, reason remoting.ACLRefusal)
}

type refusalKey struct{ addr, topic string }

// aclState is the runtime's credentials and what brokers said of them.
type aclState struct {
	mu     sync.Mutex
	scopes map[string]remoting.Credentials
	// byAddr is read by the remoting client on every request; rebuilt under the runtime's mu.
	byAddr   atomic.Pointer[map[string]*remoting.Credentials]
	refusals map[refusalKey]*CredentialRefusal
	// kept mirrors len(refusals), so the send path skips the lock while nothing is refused.
	kept atomic.Int32
}

// ErrBadCredentials is wrapped by SetCredentials' error for credentials no broker accepts.
var ErrBadCredentials = errors.New("bad credentials")

// CredentialScope returns the scope a broker identity's credentials are set for: the identity up
// to and including its last "/".
func CredentialScope(broker string) string {
	prefix, _ := scope.SplitBrokerID(broker)
	return prefix
}

// SetCredentials signs every later request to the brokers of scope (see CredentialScope) with c;
// nil stops signing them. Refusals kept for the scope's brokers are forgotten, since they were
// answers to other credentials.
func (r *Runtime) SetCredentials(scope string, c *remoting.Credentials) error {
	if c != nil {
		if err := c.Check(); err != nil {
			return fmt.Errorf("%w for %q: %w", ErrBadCredentials, scope, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &r.acl
	a.mu.Lock()
	old, had := a.scopes[scope]
	switch {
	case c == nil && !had, c != nil && had && old == *c:
		a.mu.Unlock()
		return nil
	case c == nil:
		delete(a.scopes, scope)
	default:
		if a.scopes == nil {
			a.scopes = make(map[string]remoting.Credentials)
		}
		a.scopes[scope] = *c
	}
	for k, rf := range a.refusals {
		if rf.Scope == scope {
			delete(a.refusals, k)
		}
	}
	a.kept.Store(int32(len(a.refusals)))
	a.mu.Unlock()
	r.rebuildCredentials(r.state.Load())
	return nil
}

// rebuildCredentials maps every address of s's brokers and routes to its scope's credentials.
// Callers hold r.mu.
func (r *Runtime) rebuildCredentials(s *snapshot) {
	a := &r.acl
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.scopes) == 0 {
		a.byAddr.Store(nil)
		return
	}
	m := make(map[string]*remoting.Credentials)
	add := func(broker, addr string) {
		if addr == "" {
			return
		}
		if _, dup := m[addr]; dup {
			return
		}
		if c, ok := a.scopes[CredentialScope(broker)]; ok {
			m[addr] = &c
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.brokers)) {
		add(name, s.brokers[name].Addr)
	}
	for _, spec := range s.specs.All() {
		for _, bq := range spec.Brokers {
			add(bq.Broker, bq.Addr)
		}
	}
	a.byAddr.Store(&m)
}

// credentialsFor is the remoting client's CredentialLookup.
func (r *Runtime) credentialsFor(addr string) (*remoting.Credentials, bool) {
	m := r.acl.byAddr.Load()
	if m == nil {
		return nil, false
	}
	c, ok := (*m)[addr]
	return c, ok
}

// scopeCredentials returns the credentials set for scope, if any.
func (r *Runtime) scopeCredentials(scope string) (remoting.Credentials, bool) {
	r.acl.mu.Lock()
	defer r.acl.mu.Unlock()
	c, ok := r.acl.scopes[scope]
	return c, ok
}

// noteACL records resp when it refuses the credentials and returns what kind of refusal it is.
// broker may be "" when the caller knows only the address.
// scope is "" to take the broker's.
func (r *Runtime) noteACL(scope, addr, broker, topic string, req int16, resp *remoting.Command) remoting.ACLRefusal {
	kind := remoting.ClassifyACLRefusal(resp.Code, resp.Remark)
	if kind == remoting.NotACLRefusal {
		return kind
	}
	if broker == "" {
		broker = r.state.Load().brokerAt(addr)
	}
	if broker != "" {
		scope = CredentialScope(broker)
	}
	if m, ok := r.metrics.(CredentialRefusalMetrics); ok {
		m.CredentialsRefused(broker, kind)
	}
	now := time.Now()
	a := &r.acl
	a.mu.Lock()
	defer a.mu.Unlock()
	k := refusalKey{addr, topic}
	rf, ok := a.refusals[k]
	if !ok {
		if len(a.refusals) >= maxCredentialRefusals {
			return kind
		}
		if a.refusals == nil {
			a.refusals = make(map[refusalKey]*CredentialRefusal)
		}
		rf = &CredentialRefusal{Broker: broker, Scope: scope, Addr: addr, Topic: topic, Since: now}
		a.refusals[k] = rf
		a.kept.Store(int32(len(a.refusals)))
		r.log.Info("broker refused the credentials", "broker", broker, "addr", addr, "topic", topic,
			"request", remoting.RequestCodeName(req), "reason", kind.String(), "remark", resp.Remark)
	}
	rf.Request, rf.Reason, rf.Remark, rf.At = remoting.RequestCodeName(req), kind, resp.Remark, now
	rf.Count++
	return kind
}

// noteAnswer records a broker's answer to a request about topic: a refusal of the credentials
// is kept (noteACL), a success forgets the last one.
func (r *Runtime) noteAnswer(scope, addr, broker, topic string, req int16, resp *remoting.Command) remoting.ACLRefusal {
	if resp.Code == remoting.Success {
		r.noteAccepted(addr, topic)
		return remoting.NotACLRefusal
	}
	return r.noteACL(scope, addr, broker, topic, req, resp)
}

// noteAccepted forgets the refusal of requests about topic at addr: the broker accepted one.
func (r *Runtime) noteAccepted(addr, topic string) {
	a := &r.acl
	if a.kept.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := refusalKey{addr, topic}
	if _, ok := a.refusals[k]; ok {
		delete(a.refusals, k)
		a.kept.Store(int32(len(a.refusals)))
	}
}

// CredentialRefusals returns the refusals of the runtime's credentials in force (see
// CredentialRefusal), sorted by broker, address and topic.
func (r *Runtime) CredentialRefusals() []CredentialRefusal {
	a := &r.acl
	a.mu.Lock()
	out := make([]CredentialRefusal, 0, len(a.refusals))
	for _, rf := range a.refusals {
		out = append(out, *rf)
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y CredentialRefusal) int {
		return strings.Compare(x.Broker+"\x00"+x.Addr+"\x00"+x.Topic, y.Broker+"\x00"+y.Addr+"\x00"+y.Topic)
	})
	return out
}

// brokerAt returns the identity of a broker at addr, "" when none is known.
func (s *snapshot) brokerAt(addr string) string {
	for _, rt := range s.routes.All() {
		for i := range rt.queues {
			if b := rt.queues[i].b; b.addr == addr {
				return b.name
			}
		}
	}
	for name, b := range s.brokers {
		if b.Addr == addr {
			return name
		}
	}
	return ""
}

// CredentialRefusalOf reports whether err is, or wraps, a broker's refusal of the credentials a
// request was sent with, and which.
func CredentialRefusalOf(err error) (*BrokerError, remoting.ACLRefusal, bool) {
	var be *BrokerError
	if !errors.As(err, &be) {
		return nil, remoting.NotACLRefusal, false
	}
	kind := remoting.ClassifyACLRefusal(be.Code, be.Remark)
	return be, kind, kind != remoting.NotACLRefusal
}
