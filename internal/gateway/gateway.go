// Package gateway serves detour's HTTP send gateway: applications POST a message to
// /v1/namespaces/{namespace}/topics/{name}/messages (a Topic by its name), or to
// /v1/namespaces/{namespace}/clusters/{cluster}/topics/{topic}/messages (a RocketMQ topic sent
// through a Cluster), and the operator sends it through its health-aware producer runtime,
// answering with where the message was stored.
//
// Requests are authenticated with the API server's TokenReview and authorised with
// SubjectAccessReview on the "messages" subresource of the Topic, or of the Cluster (verb
// create), unless the gateway runs without an Authorizer. On shutdown the gateway stops accepting requests and
// waits for the sends in flight, so every message acknowledged with 200 is stored.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
)

// Sender sends one message by a route (producer.Route.Key) as the request asks (plainly, to its
// message group's queue or for later); *producer.Runtime is the Sender the operator uses, and
// tells the kinds apart itself (producer.Runtime.SendRouteAs).
type Sender interface {
	SendRouteAs(ctx context.Context, route string, m *producer.Message, how producer.Delivery) (*producer.SendResult, error)
}

// DefaultShutdownTimeout bounds how long shutdown waits for sends in flight.
const DefaultShutdownTimeout = 30 * time.Second

// Options configure a Server.
type Options struct {
	// Addr is the host:port to listen on (":0" or "127.0.0.1:0" picks a free port).
	Addr string
	// Sender sends the messages; required.
	Sender Sender
	// Topics resolves a request's Topic resource by its namespace and name (front.Resolver in
	// the operator); required.
	Topics front.NameResolver
	// Clusters resolves a request naming a RocketMQ topic through a Cluster (front.Resolver in
	// the operator); nil serves no such path (ClusterMessagesPath is then not found).
	Clusters ClusterTopicResolver
	// Authorizer decides who may send; nil serves everyone (for local use only).
	Authorizer Authorizer
	// TLS, when not nil, makes the gateway serve HTTPS with this configuration.
	TLS *tls.Config
	// ShutdownTimeout bounds the wait for sends in flight on shutdown; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Metrics are the process's gateway collectors; nil counts into an unregistered set.
	Metrics *metrics.Gateway
	// Logger receives request failures that are the gateway's fault and shutdown progress.
	Logger logr.Logger
}

// Authorizer decides whether the bearer token may send to a Topic, or through a Cluster
// (kubeauth.Reviewer does).
type Authorizer interface {
	// Authorize returns the decision and, for Unauthenticated and Forbidden, a reason safe to show
	// the caller. An error means the decision could not be made (the API server is unreachable).
	Authorize(ctx context.Context, token, namespace, topic string) (kubeauth.Decision, string, error)
	// AuthorizeCluster is Authorize for a send to any topic through the Cluster namespace/cluster.
	AuthorizeCluster(ctx context.Context, token, namespace, cluster string) (kubeauth.Decision, string, error)
}

// Server states, in the order they occur.
const (
	stateNew int32 = iota
	stateServing
	stateDraining
	stateStopped
)

// Server is the send gateway. It is a controller-runtime Runnable that runs on every replica
// (NeedLeaderElection is false): each replica's runtime is kept current by the controllers.
type Server struct {
	opts     Options
	listener net.Listener
	srv      *http.Server
	log      logr.Logger
	metrics  *metrics.Gateway

	state    atomic.Int32
	retiring atomic.Bool
	inFlight atomic.Int64
	done     chan struct{}
	close    sync.Once
}

// New validates opts and binds the listener at once, so a taken port fails start-up instead
// of a later runnable.
func New(opts Options) (*Server, error) {
	if opts.Sender == nil || opts.Topics == nil {
		return nil, errors.New("gateway: Sender and Topics are required")
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	l, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: listening on %s: %w", opts.Addr, err)
	}
	if opts.TLS != nil {
		l = tls.NewListener(l, opts.TLS)
	}
	s := &Server{opts: opts, listener: l, log: opts.Logger, metrics: opts.Metrics, done: make(chan struct{})}
	if s.metrics == nil {
		s.metrics = metrics.NewGateway()
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A maximal message takes a while to upload on a slow link; headers may not.
		ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute,
	}
	return s, nil
}

// Addr is the address the gateway listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// URL is the gateway's base URL, with the scheme it serves.
func (s *Server) URL() string {
	scheme := "http"
	if s.opts.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + s.Addr()
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then drains: it stops accepting connections, closes idle ones
// and waits (at most ShutdownTimeout) for requests in flight to be answered.
func (s *Server) Start(ctx context.Context) error {
	if !s.state.CompareAndSwap(stateNew, stateServing) {
		return errors.New("gateway: started twice or after Close")
	}
	defer s.finish()
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.listener) }()
	s.log.Info("Serving the send gateway", "url", s.URL(), "authorization", s.opts.Authorizer != nil)
	select {
	case err := <-errc:
		s.state.Store(stateStopped)
		return fmt.Errorf("gateway: serving: %w", err)
	case <-ctx.Done():
	}
	s.state.Store(stateDraining)
	s.log.Info("Draining the send gateway", "inFlight", s.InFlight())
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if err != nil {
		s.log.Error(err, "Send gateway requests still in flight at the shutdown deadline were cut off", "inFlight", s.InFlight())
		_ = s.srv.Close()
	}
	<-errc
	s.state.Store(stateStopped)
	s.log.Info("Send gateway stopped")
	return nil
}

// Retire asks every client to reconnect while the gateway still serves: from now on each
// answer closes its connection once written (Connection: close on HTTP/1.1, a GOAWAY on
// HTTP/2). A replica retires its gateway when its shutdown delay begins, so clients that reach
// it through a Service move to the replicas that stay while this one still answers. Without
// it, a kept-alive connection lasts until Start's context ends the gateway, and a request sent
// on it just as it closes is lost to the client: HTTP clients do not send a POST again.
func (s *Server) Retire() {
	if s.retiring.CompareAndSwap(false, true) {
		s.log.Info("Retiring the send gateway: every answer now closes its connection")
	}
}

func (s *Server) finish() { s.close.Do(func() { close(s.done) }) }

// Close releases the listener of a gateway that was never started; after Start it does
// nothing (Start's context ends the gateway).
func (s *Server) Close() error {
	if !s.state.CompareAndSwap(stateNew, stateStopped) {
		return nil
	}
	s.finish()
	return s.listener.Close()
}

// Done is closed when the gateway has stopped: every request it accepted has been answered
// (or cut off at the shutdown deadline), or it was closed without starting.
func (s *Server) Done() <-chan struct{} { return s.done }

// Serving returns nil while the gateway accepts requests, else why not; it backs the
// manager's readiness check.
func (s *Server) Serving() error {
	switch s.state.Load() {
	case stateServing:
		return nil
	case stateNew:
		return errors.New("send gateway not started yet")
	case stateDraining:
		return errors.New("send gateway is draining")
	default:
		return errors.New("send gateway stopped")
	}
}

// InFlight counts requests being handled now.
func (s *Server) InFlight() int64 { return s.inFlight.Load() }
