package grpcfront

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/detourmq/detour/pkg/rmqpb"
)

// Consumers' calls are forwarded to the RocketMQ Proxy of their topic's cluster
// (Target.Upstream): the request as it came, with the call's metadata (authorization and the
// x-mq-* headers among it), the client's deadline and cancellation; the Proxy's answer, gRPC
// status, headers and trailers come back unchanged. The one change is to QueryAssignment
// answers, whose endpoints are set to this endpoint's, as a route's are (see QueryAssignment).
//
// All of a client's calls go to one Proxy, the first its calls resolved to (affinity), as the
// Proxy keeps each client's settings and channel in its own memory.

// defaultUpstreamHint is the setting a missing Proxy is declared with, when Options name none.
const defaultUpstreamHint = "declare the RocketMQ Proxy of the topic's cluster"

// isConsumer reports whether a client type is one of the consumers'.
func isConsumer(t rmqpb.ClientType) bool {
	switch t {
	case rmqpb.ClientType_PUSH_CONSUMER, rmqpb.ClientType_SIMPLE_CONSUMER, rmqpb.ClientType_PULL_CONSUMER,
		rmqpb.ClientType_LITE_PUSH_CONSUMER, rmqpb.ClientType_LITE_SIMPLE_CONSUMER:
		return true
	}
	return false
}

// isConsumerSettings reports whether a client's Settings are a consumer's: its type says so, or
// it names no type but a subscription.
func isConsumerSettings(s *rmqpb.Settings) bool {
	if s.ClientType != nil {
		return isConsumer(s.GetClientType())
	}
	return s.GetSubscription() != nil
}

// subscribedTopic is the first topic a consumer's Settings subscribe to, nil when none.
func subscribedTopic(s *rmqpb.Settings) *rmqpb.Resource {
	for _, e := range s.GetSubscription().GetSubscriptions() {
		if e.GetTopic().GetName() != "" {
			return e.GetTopic()
		}
	}
	return nil
}

// callerID is the call's x-mq-client-id (admit has checked there is one).
func callerID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(clientIDHeader) {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// upstreamFor finds the Proxy a client's call goes to, the one the client is bound to, else the
// one serving topic (binding the client to it), and counts the call on its connection until
// release. A refusal is a status: the call's checks, or UNSUPPORTED naming what to declare.
func (s *Server) upstreamFor(ctx context.Context, topic *rmqpb.Resource) (c *upstreamConn, release func(), st *rmqpb.Status) {
	if _, st := s.admit(ctx); st != nil {
		return nil, nil, st
	}
	id := callerID(ctx)
	u := s.affinity.lookup(id)
	if u == nil {
		if topic.GetName() == "" {
			return nil, nil, newStatus(rmqpb.Code_UNSUPPORTED,
				"no RocketMQ Proxy is known for client %s yet: a consumer's calls are forwarded to the Proxy of the topic its first call (Telemetry settings, QueryAssignment, ReceiveMessage) names", id)
		}
		target, st := s.resolve(ctx, topic)
		if st != nil {
			return nil, nil, st
		}
		if target.Upstream == nil {
			return nil, nil, newStatus(rmqpb.Code_UNSUPPORTED,
				"detour serves producers only and has no RocketMQ Proxy to forward this consumer's call on topic %s to: %s", topic.GetName(), s.upstreamHint)
		}
		u = s.affinity.bind(id, target.Upstream)
	}
	c, release, err := s.upstreams.acquire(u)
	if err != nil {
		s.log.Error(err, "Connecting to a RocketMQ Proxy failed", "proxy", u.Addr, "clientID", id)
		return nil, nil, newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "forwarding to the RocketMQ Proxy at %s: %v", u.Addr, err)
	}
	return c, release, nil
}

// isHopHeader reports whether a metadata key belongs to one gRPC hop only: pseudo-headers, the
// transport's own and gRPC's reserved ones, which the upstream call sets itself.
func isHopHeader(k string) bool {
	return strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" || k == "te"
}

// endToEnd is md without its hop-by-hop keys.
func endToEnd(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if !isHopHeader(k) {
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

// forwardContext is the upstream call's context: ctx's deadline and cancellation, and the
// incoming call's metadata as outgoing.
func forwardContext(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	return metadata.NewOutgoingContext(ctx, endToEnd(in))
}

// relayUnaryMetadata sets the upstream's header and trailer on the incoming call.
func relayUnaryMetadata(ctx context.Context, header, trailer metadata.MD) {
	if h := endToEnd(header); len(h) > 0 {
		_ = grpc.SetHeader(ctx, h)
	}
	if t := endToEnd(trailer); len(t) > 0 {
		_ = grpc.SetTrailer(ctx, t)
	}
}

// unaryCall is a MessagingService client method, as a method expression.
type unaryCall[Req, Resp any] func(rmqpb.MessagingServiceClient, context.Context, *Req, ...grpc.CallOption) (*Resp, error)

// forwardUnary forwards a unary call to the Proxy upstreamFor finds, or answers refused(status).
func forwardUnary[Req, Resp any](s *Server, ctx context.Context, topic *rmqpb.Resource, req *Req,
	call unaryCall[Req, Resp], refused func(*rmqpb.Status) *Resp) (*Resp, error) {
	c, release, st := s.upstreamFor(ctx, topic)
	if st != nil {
		return refused(st), nil
	}
	defer release()
	var header, trailer metadata.MD
	resp, err := call(c.client, forwardContext(ctx), req, grpc.Header(&header), grpc.Trailer(&trailer))
	relayUnaryMetadata(ctx, header, trailer)
	return resp, err
}

// streamOpener is a server-streaming MessagingService client method, as a method expression.
type streamOpener[Req, Resp any] func(rmqpb.MessagingServiceClient, context.Context, *Req, ...grpc.CallOption) (grpc.ServerStreamingClient[Resp], error)

// forwardServerStream forwards a server-streaming call, relaying every answer until the
// upstream ends; the client's cancellation cancels the upstream call.
func forwardServerStream[Req, Resp any](s *Server, stream grpc.ServerStreamingServer[Resp], topic *rmqpb.Resource, req *Req,
	open streamOpener[Req, Resp], refused func(*rmqpb.Status) *Resp) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	c, release, st := s.upstreamFor(ctx, topic)
	if st != nil {
		return stream.Send(refused(st))
	}
	defer release()
	up, err := open(c.client, forwardContext(ctx), req)
	if err != nil {
		return err
	}
	return relayAnswers[Resp](stream, up)
}

// answerStream is the downstream side of a forwarded stream.
type answerStream[Resp any] interface {
	SetTrailer(metadata.MD)
	SendHeader(metadata.MD) error
	Send(*Resp) error
}

// upstreamAnswers is the upstream side of a forwarded stream.
type upstreamAnswers[Resp any] interface {
	Header() (metadata.MD, error)
	Trailer() metadata.MD
	Recv() (*Resp, error)
}

// relayAnswers sends the upstream's header, answers and trailer down until the upstream ends,
// and returns the upstream's status (nil for OK).
func relayAnswers[Resp any](down answerStream[Resp], up upstreamAnswers[Resp]) error {
	// Header waits for the upstream's first answer or its end; an error there is reported by
	// Recv below with the upstream's status.
	if h, err := up.Header(); err == nil {
		if h = endToEnd(h); len(h) > 0 {
			if err := down.SendHeader(h); err != nil {
				return err
			}
		}
	}
	for {
		m, err := up.Recv()
		if err != nil {
			if t := endToEnd(up.Trailer()); len(t) > 0 {
				down.SetTrailer(t)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := down.Send(m); err != nil {
			return err
		}
	}
}

// forwardTelemetry forwards a consumer's Telemetry stream, starting with the command already
// read: client commands go up, Proxy commands come down; the client's half-close half-closes
// the upstream, and either side's end ends the other.
func (s *Server) forwardTelemetry(stream grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand],
	first *rmqpb.TelemetryCommand, topic *rmqpb.Resource) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	c, release, st := s.upstreamFor(ctx, topic)
	if st != nil {
		return stream.Send(&rmqpb.TelemetryCommand{Status: st})
	}
	defer release()
	up, err := c.client.Telemetry(forwardContext(ctx))
	if err != nil {
		return err
	}
	// An upstream that has ended fails Send with io.EOF; its status comes from Recv.
	if err := up.Send(first); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	go relayClientCommands(stream, up, cancel)
	return relayAnswers[rmqpb.TelemetryCommand](stream, up)
}

// relayClientCommands sends the client's commands up until the client half-closes (then it
// half-closes the upstream) or goes away (then it cancels the upstream call). It is the only
// sender on up.
func relayClientCommands(down grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand],
	up grpc.BidiStreamingClient[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand], cancel context.CancelFunc) {
	for {
		cmd, err := down.Recv()
		if errors.Is(err, io.EOF) {
			_ = up.CloseSend()
			return
		}
		if err != nil {
			cancel()
			return
		}
		if err := up.Send(cmd); err != nil {
			return // the upstream ended; relayAnswers reports how
		}
	}
}
