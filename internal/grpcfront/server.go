// Package grpcfront serves RocketMQ 5's gRPC protocol (apache.rocketmq.v2.MessagingService) to
// the 5.x SDKs' producers from detour's producer runtime, in the seat of RocketMQ's Proxy: routes
// point the clients at this endpoint, and detour picks the broker for every message, whichever
// queue the client chose; transactional messages go as half messages to the broker detour picks,
// and EndTransaction ends them there. Consumers' calls are forwarded to the RocketMQ Proxy their
// topic's Target (front.Target) names (see forward.go); without one they are answered
// UNSUPPORTED, naming what is missing. Given access keys (Options.Credentials), it checks every
// call's signature as the Proxy does, and each key's topics.
//
// Every answer's outcome is a RocketMQ status inside the response, as the Proxy answers; the
// gRPC status is OK unless the call itself is broken.
package grpcfront

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// Limits of the endpoint. A peer can make it hold no more than MaxConnections connections of
// MaxConcurrentStreams calls each, every call's message at most MaxRecvMsgSize.
const (
	// MaxRecvMsgSize bounds one request: a batch of messages at the body limit plus headroom
	// for properties (grpc-go's default of 4 MiB would refuse a message at RocketMQ's limit).
	MaxRecvMsgSize = 16 << 20
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	MaxConcurrentStreams = 256
	// MaxConnections bounds the connections the endpoint holds at once.
	MaxConnections = 4096
	// maxHeaderListSize bounds a call's metadata.
	maxHeaderListSize = 64 << 10
	// streamWorkers are goroutines kept to run calls on: a call on a fresh goroutine grows its
	// stack to a send's depth, copying it a few times (a twentieth of the endpoint's CPU in the
	// profile of 64 senders), while a worker's stack has grown already. Calls beyond them get
	// fresh goroutines, as without workers.
	streamWorkers = 64
	// keepaliveMinTime is the shortest ping interval a client may use; the Java client pings every
	// 300 s, with or without calls.
	keepaliveMinTime = 60 * time.Second
	// idleTimeout closes connections without calls for this long, as the Proxy does (120 s).
	idleTimeout = 120 * time.Second
	// handshakeTimeout bounds a connection's TLS (or sniffing) handshake.
	handshakeTimeout = 10 * time.Second
	// DefaultShutdownTimeout bounds how long shutdown waits for calls in flight; Telemetry
	// streams never end on their own, so they are cut after it.
	DefaultShutdownTimeout = 10 * time.Second
)

// Options configure a Server.
type Options struct {
	// Addr is the host:port to listen on.
	Addr string
	// Runtime sends the messages and knows the routes; required.
	Runtime *producer.Runtime
	// Topics resolves the clients' topics; required.
	Topics front.TopicResolver
	// Credentials, when set, are the access keys calls must be signed with (RocketMQ's
	// MQv2-HMAC-SHA1 signature, see auth.go): an unsigned or wrongly signed call is answered
	// UNAUTHORIZED, a send or route query on a topic its key may not send to FORBIDDEN.
	Credentials AccessKeys
	// TLS, when set, is served to clients that start with a TLS handshake (the SDKs' default).
	TLS *tls.Config
	// AllowPlaintext also serves clients without TLS on the same port. Without TLS the endpoint
	// serves plaintext only, whatever this says.
	AllowPlaintext bool
	// Advertise, "host:port", is put into routes as every broker's endpoint; empty means the
	// access point the client queried the route with, as the Proxy answers.
	Advertise string
	// MaxBodySize is the largest message body accepted, pushed to clients in their Settings;
	// 0 means producer.MaxMessageSize (RocketMQ's 4 MiB). It cannot exceed that.
	MaxBodySize int
	// SkipMessageTypeCheck sends a message whatever its topic's message.type attribute says, as
	// the Proxy does with enableTopicMessageTypeCheck off; by default a FIFO, DELAY or
	// TRANSACTION message is refused (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) on a topic of
	// another type than its own or MIXED, and a NORMAL one on a topic of another type, as the
	// Proxy refuses them.
	SkipMessageTypeCheck bool
	// ShutdownTimeout bounds the wait for calls in flight on shutdown; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Metrics are the process's gRPC endpoint collectors; nil counts into an unregistered set.
	Metrics *metrics.GRPC
	// UpstreamHint says where a topic's Proxy is declared, in the UNSUPPORTED answer to a
	// consumer's call on a topic without one; empty means a generic hint.
	UpstreamHint string
	// MaxClients bounds the clients whose Proxy is remembered (affinity); 0 means
	// DefaultMaxClients.
	MaxClients int
	// ClientIdle forgets a client's Proxy after this long without a call, and closes a Proxy
	// connection without calls for as long; 0 means DefaultClientIdle.
	ClientIdle time.Duration
	// Logger receives failures that are the endpoint's fault.
	Logger logr.Logger

	// now is the clock of the forwarder's tables; nil means time.Now.
	now func() time.Time
}

// Server is the RocketMQ gRPC endpoint. It is a controller-runtime Runnable that runs on every
// replica (NeedLeaderElection is false).
type Server struct {
	rmqpb.UnimplementedMessagingServiceServer

	opts     Options
	listener net.Listener
	grpc     *grpc.Server
	log      logr.Logger
	metrics  *metrics.GRPC
	adv      *rmqpb.Endpoints // nil: echo the client's access point
	close    sync.Once

	upstreamHint string
	affinity     *affinity
	upstreams    *upstreams
	orphans      *orphanRegistry
	facts        *topicFacts
}

// New validates opts and binds the listener at once, so a taken port fails start-up.
func New(opts Options) (*Server, error) {
	if opts.Runtime == nil || opts.Topics == nil {
		return nil, errors.New("grpcfront: Runtime and Topics are required")
	}
	if opts.MaxBodySize == 0 {
		opts.MaxBodySize = producer.MaxMessageSize
	}
	if opts.MaxBodySize < 1 || opts.MaxBodySize > producer.MaxMessageSize {
		return nil, fmt.Errorf("grpcfront: MaxBodySize %d is outside 1..%d", opts.MaxBodySize, producer.MaxMessageSize)
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.MaxClients < 0 || opts.ClientIdle < 0 {
		return nil, errors.New("grpcfront: MaxClients and ClientIdle must not be negative")
	}
	if opts.MaxClients == 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.ClientIdle == 0 {
		opts.ClientIdle = DefaultClientIdle
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.UpstreamHint == "" {
		opts.UpstreamHint = defaultUpstreamHint
	}
	s := &Server{opts: opts, log: opts.Logger, metrics: opts.Metrics, upstreamHint: opts.UpstreamHint,
		affinity: newAffinity(opts.MaxClients, opts.ClientIdle, opts.now), upstreams: newUpstreams(opts.ClientIdle, opts.now)}
	if s.metrics == nil {
		s.metrics = metrics.NewGRPC()
	}
	s.orphans = &orphanRegistry{byTopic: map[string][]registered{}}
	s.facts = newTopicFacts(opts.Runtime.TopicFacts, time.Now)
	if opts.Advertise != "" {
		ep, err := parseEndpoints(opts.Advertise)
		if err != nil {
			return nil, fmt.Errorf("grpcfront: advertised address: %w", err)
		}
		s.adv = ep
	}
	creds := &sniffingCreds{allowPlain: opts.AllowPlaintext || opts.TLS == nil}
	if opts.TLS != nil {
		cfg := opts.TLS.Clone()
		cfg.NextProtos = []string{"h2"}
		creds.tls = credentials.NewTLS(cfg)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("grpcfront: listening on %s: %w", opts.Addr, err)
	}
	s.listener = netutil.LimitListener(ln, MaxConnections)
	s.grpc = grpc.NewServer(
		grpc.Creds(creds),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxHeaderListSize(maxHeaderListSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleTimeout, Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(s.countUnary, s.recoverUnary),
		grpc.ChainStreamInterceptor(s.countStream, s.recoverStream),
		grpc.NumStreamWorkers(streamWorkers),
	)
	rmqpb.RegisterMessagingServiceServer(s.grpc, s)
	s.orphans.checker = opts.Runtime.AddTransactionChecker(s.recoverOrphan)
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// NeedLeaderElection is false: every replica serves clients from its own runtime.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops accepting and waits up to the shutdown timeout for the
// calls in flight before cutting the rest (Telemetry streams last as long as their clients).
func (s *Server) Start(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(s.listener) }()
	select {
	case err := <-served:
		s.orphans.checker.Remove()
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	timer := time.NewTimer(s.opts.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.log.Info("Calls still in flight when the RocketMQ endpoint's shutdown timeout ran out; cutting them", "timeout", s.opts.ShutdownTimeout)
		s.grpc.Stop()
	}
	s.upstreams.close()
	s.orphans.checker.Remove()
	return nil
}

// Close stops the endpoint at once and releases its port (for a manager that failed before
// Start).
func (s *Server) Close() error {
	s.close.Do(func() {
		s.grpc.Stop()
		_ = s.listener.Close()
		s.upstreams.close()
		s.orphans.checker.Remove()
	})
	return nil
}

// recoverUnary turns a handler's panic into an INTERNAL gRPC error for that call only.
func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer s.recovered(info.FullMethod, &err)
	return handler(ctx, req)
}

// recoverStream is recoverUnary for streams.
func (s *Server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer s.recovered(info.FullMethod, &err)
	return handler(srv, ss)
}

func (s *Server) recovered(method string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	s.log.Error(fmt.Errorf("panic: %v", v), "A RocketMQ endpoint handler panicked; the call fails, the endpoint goes on",
		"method", method, "stack", string(debug.Stack()))
	s.metrics.Panicked()
	*err = status.Error(codes.Internal, "the endpoint failed while serving this call")
}
