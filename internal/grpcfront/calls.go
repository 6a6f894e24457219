package grpcfront

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/detourmq/detour/pkg/rmqpb"
)

// clientIDHeader names the client in every call; the Proxy refuses calls without it.
const clientIDHeader = "x-mq-client-id"

// unsupportedMessage is the reason given for the calls detour neither serves nor forwards.
const unsupportedMessage = "detour serves producers only: this call needs a RocketMQ Proxy to forward to, and none is configured"

// okStatus is the status of a call that did what it was asked.
func okStatus() *rmqpb.Status { return &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"} }

// newStatus is a status with a formatted message.
func newStatus(code rmqpb.Code, format string, args ...any) *rmqpb.Status {
	return &rmqpb.Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

// requireClientID is nil when the call names its client, else the CLIENT_ID_REQUIRED status.
func requireClientID(ctx context.Context) *rmqpb.Status {
	// ValueFromIncomingContext reads the one header; FromIncomingContext would copy them all on
	// every call.
	for _, v := range metadata.ValueFromIncomingContext(ctx, clientIDHeader) {
		if strings.TrimSpace(v) != "" {
			return nil
		}
	}
	return newStatus(rmqpb.Code_CLIENT_ID_REQUIRED, "missing %s header: every call must name its client", clientIDHeader)
}

// unsupported is the status of a call detour does not serve, after the signature and client-id
// checks.
func (s *Server) unsupported(ctx context.Context) *rmqpb.Status {
	if _, st := s.admit(ctx); st != nil {
		return st
	}
	return &rmqpb.Status{Code: rmqpb.Code_UNSUPPORTED, Message: unsupportedMessage}
}

// parseEndpoints turns "host:port" into Endpoints with the scheme the host's form implies.
func parseEndpoints(hostport string) (*rmqpb.Endpoints, error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("port %q is not a TCP port", portText)
	}
	if host == "" {
		return nil, fmt.Errorf("%q names no host", hostport)
	}
	return &rmqpb.Endpoints{Scheme: addressScheme(host), Addresses: []*rmqpb.Address{{Host: host, Port: int32(port)}}}, nil
}

// addressScheme is the scheme of a host: IPv4, IPv6 or a domain name.
func addressScheme(host string) rmqpb.AddressScheme {
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return rmqpb.AddressScheme_DOMAIN_NAME
	case ip.To4() != nil:
		return rmqpb.AddressScheme_IPv4
	}
	return rmqpb.AddressScheme_IPv6
}

// Heartbeat answers a producer's heartbeat OK (the runtime keeps its own heartbeats to the
// brokers, and a producer's carries nothing detour needs) and forwards a consumer's, which
// registers its group with the Proxy.
func (s *Server) Heartbeat(ctx context.Context, req *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	if isConsumer(req.GetClientType()) {
		return forwardUnary(s, ctx, nil, req, rmqpb.MessagingServiceClient.Heartbeat,
			func(st *rmqpb.Status) *rmqpb.HeartbeatResponse { return &rmqpb.HeartbeatResponse{Status: st} })
	}
	if _, st := s.admit(ctx); st != nil {
		return &rmqpb.HeartbeatResponse{Status: st}, nil
	}
	return &rmqpb.HeartbeatResponse{Status: okStatus()}, nil
}

// NotifyClientTermination answers a producer OK (detour keeps no state per producer); a
// consumer's (it names its group) is forwarded to its Proxy, and the client forgotten.
func (s *Server) NotifyClientTermination(ctx context.Context, req *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	if _, st := s.admit(ctx); st != nil {
		return &rmqpb.NotifyClientTerminationResponse{Status: st}, nil
	}
	id := callerID(ctx)
	if req.Group == nil || s.affinity.lookup(id) == nil {
		return &rmqpb.NotifyClientTerminationResponse{Status: okStatus()}, nil
	}
	defer s.affinity.forget(id)
	return forwardUnary(s, ctx, nil, req, rmqpb.MessagingServiceClient.NotifyClientTermination,
		func(st *rmqpb.Status) *rmqpb.NotifyClientTerminationResponse {
			return &rmqpb.NotifyClientTerminationResponse{Status: st}
		})
}

// QueryAssignment is forwarded to the Proxy. The Proxy answers the endpoints the client sent
// with its own gRPC port in place of the client's (useEndpointPortFromRequest is off by
// default), so the assignments are given this endpoint's address, as routes are: a push
// consumer then receives here too.
func (s *Server) QueryAssignment(ctx context.Context, req *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	resp, err := forwardUnary(s, ctx, req.GetTopic(), req, rmqpb.MessagingServiceClient.QueryAssignment,
		func(st *rmqpb.Status) *rmqpb.QueryAssignmentResponse {
			return &rmqpb.QueryAssignmentResponse{Status: st}
		})
	if err != nil || resp == nil {
		return resp, err
	}
	ep := s.accessPoint(ctx, req.GetEndpoints())
	for _, a := range resp.GetAssignments() {
		if b := a.GetMessageQueue().GetBroker(); b != nil {
			b.Endpoints = ep
		}
	}
	return resp, nil
}

// ReceiveMessage is forwarded to the Proxy, its long poll included: the client's deadline is
// the upstream call's.
func (s *Server) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream grpc.ServerStreamingServer[rmqpb.ReceiveMessageResponse]) error {
	return forwardServerStream(s, stream, req.GetMessageQueue().GetTopic(), req, rmqpb.MessagingServiceClient.ReceiveMessage,
		func(st *rmqpb.Status) *rmqpb.ReceiveMessageResponse {
			return &rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}}
		})
}

// AckMessage is forwarded to the Proxy.
func (s *Server) AckMessage(ctx context.Context, req *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	return forwardUnary(s, ctx, req.GetTopic(), req, rmqpb.MessagingServiceClient.AckMessage,
		func(st *rmqpb.Status) *rmqpb.AckMessageResponse { return &rmqpb.AckMessageResponse{Status: st} })
}

// ForwardMessageToDeadLetterQueue is forwarded to the Proxy.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	return forwardUnary(s, ctx, req.GetTopic(), req, rmqpb.MessagingServiceClient.ForwardMessageToDeadLetterQueue,
		func(st *rmqpb.Status) *rmqpb.ForwardMessageToDeadLetterQueueResponse {
			return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st}
		})
}

// PullMessage is forwarded to the Proxy.
func (s *Server) PullMessage(req *rmqpb.PullMessageRequest, stream grpc.ServerStreamingServer[rmqpb.PullMessageResponse]) error {
	return forwardServerStream(s, stream, req.GetMessageQueue().GetTopic(), req, rmqpb.MessagingServiceClient.PullMessage,
		func(st *rmqpb.Status) *rmqpb.PullMessageResponse {
			return &rmqpb.PullMessageResponse{Content: &rmqpb.PullMessageResponse_Status{Status: st}}
		})
}

// UpdateOffset is forwarded to the Proxy.
func (s *Server) UpdateOffset(ctx context.Context, req *rmqpb.UpdateOffsetRequest) (*rmqpb.UpdateOffsetResponse, error) {
	return forwardUnary(s, ctx, req.GetMessageQueue().GetTopic(), req, rmqpb.MessagingServiceClient.UpdateOffset,
		func(st *rmqpb.Status) *rmqpb.UpdateOffsetResponse { return &rmqpb.UpdateOffsetResponse{Status: st} })
}

// GetOffset is forwarded to the Proxy.
func (s *Server) GetOffset(ctx context.Context, req *rmqpb.GetOffsetRequest) (*rmqpb.GetOffsetResponse, error) {
	return forwardUnary(s, ctx, req.GetMessageQueue().GetTopic(), req, rmqpb.MessagingServiceClient.GetOffset,
		func(st *rmqpb.Status) *rmqpb.GetOffsetResponse { return &rmqpb.GetOffsetResponse{Status: st} })
}

// QueryOffset is forwarded to the Proxy.
func (s *Server) QueryOffset(ctx context.Context, req *rmqpb.QueryOffsetRequest) (*rmqpb.QueryOffsetResponse, error) {
	return forwardUnary(s, ctx, req.GetMessageQueue().GetTopic(), req, rmqpb.MessagingServiceClient.QueryOffset,
		func(st *rmqpb.Status) *rmqpb.QueryOffsetResponse { return &rmqpb.QueryOffsetResponse{Status: st} })
}

// ChangeInvisibleDuration is forwarded to the Proxy.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	return forwardUnary(s, ctx, req.GetTopic(), req, rmqpb.MessagingServiceClient.ChangeInvisibleDuration,
		func(st *rmqpb.Status) *rmqpb.ChangeInvisibleDurationResponse {
			return &rmqpb.ChangeInvisibleDurationResponse{Status: st}
		})
}

// RecallMessage is forwarded to the Proxy: the recall handle names the broker that stored the
// message, which the Proxy reaches.
func (s *Server) RecallMessage(ctx context.Context, req *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	return forwardUnary(s, ctx, req.GetTopic(), req, rmqpb.MessagingServiceClient.RecallMessage,
		func(st *rmqpb.Status) *rmqpb.RecallMessageResponse { return &rmqpb.RecallMessageResponse{Status: st} })
}

// SyncLiteSubscription is forwarded to the Proxy.
func (s *Server) SyncLiteSubscription(ctx context.Context, req *rmqpb.SyncLiteSubscriptionRequest) (*rmqpb.SyncLiteSubscriptionResponse, error) {
	return forwardUnary(s, ctx, req.GetTopic(), req, rmqpb.MessagingServiceClient.SyncLiteSubscription,
		func(st *rmqpb.Status) *rmqpb.SyncLiteSubscriptionResponse {
			return &rmqpb.SyncLiteSubscriptionResponse{Status: st}
		})
}

// accessPoint is the endpoint routes name: the advertised one, else the access point the client
// sent, else the local address the client reached.
func (s *Server) accessPoint(ctx context.Context, sent *rmqpb.Endpoints) *rmqpb.Endpoints {
	if s.adv != nil {
		return s.adv
	}
	if sent != nil && len(sent.GetAddresses()) > 0 {
		return sent
	}
	if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
		if ep, err := parseEndpoints(p.LocalAddr.String()); err == nil {
			return ep
		}
	}
	return &rmqpb.Endpoints{}
}
