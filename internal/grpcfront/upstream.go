package grpcfront

import (
	"container/list"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// Bounds of the forwarder's tables, far above what one endpoint serves: every client named by
// x-mq-client-id holds one entry while it is active, every Proxy one connection.
const (
	// DefaultMaxClients bounds the clients whose Proxy the endpoint remembers.
	DefaultMaxClients = 65536
	// DefaultClientIdle forgets a client that made no call for this long. The SDKs heartbeat
	// every 10 s, so an entry this old belongs to a client that has gone.
	DefaultClientIdle = 5 * time.Minute
	// maxUpstreams bounds the Proxies the endpoint holds connections to at once.
	maxUpstreams = 256
)

// upstreamKey identifies the connection an Upstream needs: the same address with other TLS
// settings is another connection.
func upstreamKey(u *front.Upstream) string {
	if u.TLS == nil {
		return "plain|" + u.Addr
	}
	ca := sha256.Sum256(u.TLS.CA)
	return fmt.Sprintf("tls|%s|%s|%t|%s", u.Addr, u.TLS.ServerName, u.TLS.InsecureSkipVerify, hex.EncodeToString(ca[:8]))
}

// validateUpstream says what is wrong with an Upstream, if anything.
func validateUpstream(u *front.Upstream) error {
	host, port, err := net.SplitHostPort(u.Addr)
	if err != nil {
		return fmt.Errorf("address %q must be host:port: %w", u.Addr, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || host == "" {
		return fmt.Errorf("address %q must be host:port with a port from 1 to 65535", u.Addr)
	}
	if u.TLS != nil && len(u.TLS.CA) > 0 && !x509.NewCertPool().AppendCertsFromPEM(u.TLS.CA) {
		return errors.New("the CA bundle holds no PEM certificate")
	}
	return nil
}

// upstreamCredentials are the credentials an Upstream's connection dials with.
func upstreamCredentials(u *front.Upstream) (credentials.TransportCredentials, error) {
	if u.TLS == nil {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.TLS.ServerName, InsecureSkipVerify: u.TLS.InsecureSkipVerify} //nolint:gosec // asked for by name, see front.UpstreamTLS
	if len(u.TLS.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(u.TLS.CA) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return credentials.NewTLS(cfg), nil
}

// upstreamConn is a connection to one Proxy and the calls using it.
type upstreamConn struct {
	conn     *grpc.ClientConn
	client   rmqpb.MessagingServiceClient
	inFlight int
	lastUsed time.Time
}

// upstreams holds a connection per Proxy, made on first use. Connections without calls for the
// client idle time are closed whenever another Proxy is dialled, so the connections held stay
// within maxUpstreams and those to Proxies no longer declared go away.
type upstreams struct {
	mu    sync.Mutex
	conns map[string]*upstreamConn
	idle  time.Duration
	now   func() time.Time
}

func newUpstreams(idle time.Duration, now func() time.Time) *upstreams {
	return &upstreams{conns: map[string]*upstreamConn{}, idle: idle, now: now}
}

// acquire returns the connection to u, counting a call on it until release is called.
func (p *upstreams) acquire(u *front.Upstream) (c *upstreamConn, release func(), err error) {
	key := upstreamKey(u)
	p.mu.Lock()
	defer p.mu.Unlock()
	c = p.conns[key]
	if c == nil {
		if c, err = p.dialLocked(key, u); err != nil {
			return nil, nil, err
		}
	}
	c.inFlight++
	c.lastUsed = p.now()
	var once sync.Once
	return c, func() {
		once.Do(func() {
			p.mu.Lock()
			c.inFlight--
			c.lastUsed = p.now()
			p.mu.Unlock()
		})
	}, nil
}

// dialLocked makes the connection to u, first closing idle ones to stay within maxUpstreams.
func (p *upstreams) dialLocked(key string, u *front.Upstream) (*upstreamConn, error) {
	if err := validateUpstream(u); err != nil {
		return nil, err
	}
	p.sweepLocked()
	if len(p.conns) >= maxUpstreams {
		return nil, fmt.Errorf("the endpoint already forwards to %d Proxies, its limit", maxUpstreams)
	}
	creds, err := upstreamCredentials(u)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(u.Addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxRecvMsgSize), grpc.MaxCallSendMsgSize(MaxRecvMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("connecting to the Proxy at %s: %w", u.Addr, err)
	}
	c := &upstreamConn{conn: conn, client: rmqpb.NewMessagingServiceClient(conn)}
	p.conns[key] = c
	return c, nil
}

// sweepLocked closes the connections without calls for longer than the idle time.
func (p *upstreams) sweepLocked() {
	now := p.now()
	for key, c := range p.conns {
		if c.inFlight == 0 && now.Sub(c.lastUsed) > p.idle {
			_ = c.conn.Close()
			delete(p.conns, key)
		}
	}
}

// size is the number of connections held.
func (p *upstreams) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// close closes every connection.
func (p *upstreams) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, c := range p.conns {
		_ = c.conn.Close()
		delete(p.conns, key)
	}
}

// affinity remembers which Proxy each client's calls go to, so that all of a client's calls
// (its Telemetry stream, heartbeats, receives and acks) reach the same Proxy: the Proxy keeps a
// client's channel and settings in its memory. It holds at most max clients, least recently
// active first out, and forgets a client idle for longer than idle.
type affinity struct {
	mu    sync.Mutex
	max   int
	idle  time.Duration
	now   func() time.Time
	order *list.List // of *affinityEntry, most recently used at the front
	byID  map[string]*list.Element
}

type affinityEntry struct {
	clientID string
	upstream *front.Upstream
	lastUsed time.Time
}

func newAffinity(maxClients int, idle time.Duration, now func() time.Time) *affinity {
	return &affinity{max: maxClients, idle: idle, now: now, order: list.New(), byID: map[string]*list.Element{}}
}

// lookup returns the Proxy a client is bound to, nil when it is bound to none (or was
// forgotten), and marks the client active.
func (a *affinity) lookup(clientID string) *front.Upstream {
	a.mu.Lock()
	defer a.mu.Unlock()
	el := a.byID[clientID]
	if el == nil {
		return nil
	}
	e := el.Value.(*affinityEntry)
	now := a.now()
	if now.Sub(e.lastUsed) > a.idle {
		a.removeLocked(el)
		return nil
	}
	e.lastUsed = now
	a.order.MoveToFront(el)
	return e.upstream
}

// bind remembers that a client's calls go to u, unless it is bound already; it returns the
// Proxy the client is bound to.
func (a *affinity) bind(clientID string, u *front.Upstream) *front.Upstream {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if el := a.byID[clientID]; el != nil {
		e := el.Value.(*affinityEntry)
		if now.Sub(e.lastUsed) <= a.idle {
			e.lastUsed = now
			a.order.MoveToFront(el)
			return e.upstream
		}
		a.removeLocked(el)
	}
	a.expireLocked(now)
	for a.order.Len() >= a.max {
		a.removeLocked(a.order.Back())
	}
	a.byID[clientID] = a.order.PushFront(&affinityEntry{clientID: clientID, upstream: u, lastUsed: now})
	return u
}

// forget drops a client, as when it says it terminates.
func (a *affinity) forget(clientID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if el := a.byID[clientID]; el != nil {
		a.removeLocked(el)
	}
}

// expireLocked drops the clients idle for longer than the idle time (the oldest are at the back).
func (a *affinity) expireLocked(now time.Time) {
	for el := a.order.Back(); el != nil; el = a.order.Back() {
		if now.Sub(el.Value.(*affinityEntry).lastUsed) <= a.idle {
			return
		}
		a.removeLocked(el)
	}
}

func (a *affinity) removeLocked(el *list.Element) {
	delete(a.byID, el.Value.(*affinityEntry).clientID)
	a.order.Remove(el)
}

// size is the number of clients remembered.
func (a *affinity) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.order.Len()
}
