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

// unsupportedMessage is the reason given for the calls detour does not serve itself.
const unsupportedMessage = "detour serves producers only: this call needs a RocketMQ Proxy to forward to, and none is configured"

// okStatus is the status of a call that did what it was asked.
func okStatus() *rmqpb.Status { return &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"} }

// newStatus is a status with a formatted message.
func newStatus(code rmqpb.Code, format string, args ...any) *rmqpb.Status {
	return &rmqpb.Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

// requireClientID is nil when the call names its client, else the CLIENT_ID_REQUIRED status.
func requireClientID(ctx context.Context) *rmqpb.Status {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(clientIDHeader) {
		if strings.TrimSpace(v) != "" {
			return nil
		}
	}
	return newStatus(rmqpb.Code_CLIENT_ID_REQUIRED, "missing %s header: every call must name its client", clientIDHeader)
}

// unsupported is the status of a call detour does not serve, after the client-id check.
func unsupported(ctx context.Context) *rmqpb.Status {
	if st := requireClientID(ctx); st != nil {
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

// Heartbeat answers OK: the runtime keeps its own heartbeats to the brokers, and a producer's
// heartbeat carries nothing detour needs.
func (s *Server) Heartbeat(ctx context.Context, _ *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	if st := requireClientID(ctx); st != nil {
		return &rmqpb.HeartbeatResponse{Status: st}, nil
	}
	return &rmqpb.HeartbeatResponse{Status: okStatus()}, nil
}

// NotifyClientTermination answers OK: detour keeps no state per producer.
func (s *Server) NotifyClientTermination(ctx context.Context, _ *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	if st := requireClientID(ctx); st != nil {
		return &rmqpb.NotifyClientTerminationResponse{Status: st}, nil
	}
	return &rmqpb.NotifyClientTerminationResponse{Status: okStatus()}, nil
}

// EndTransaction is not served yet: detour sends no half messages.
func (s *Server) EndTransaction(ctx context.Context, _ *rmqpb.EndTransactionRequest) (*rmqpb.EndTransactionResponse, error) {
	st := unsupported(ctx)
	if st.Code == rmqpb.Code_UNSUPPORTED {
		st.Message = "detour does not send transactional messages yet, so it holds no transaction to end"
	}
	return &rmqpb.EndTransactionResponse{Status: st}, nil
}

// QueryAssignment is a consumer's call (see unsupportedMessage).
func (s *Server) QueryAssignment(ctx context.Context, _ *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	return &rmqpb.QueryAssignmentResponse{Status: unsupported(ctx)}, nil
}

// ReceiveMessage is a consumer's call: one answer with the status, as the Proxy fails a receive.
func (s *Server) ReceiveMessage(_ *rmqpb.ReceiveMessageRequest, stream grpc.ServerStreamingServer[rmqpb.ReceiveMessageResponse]) error {
	return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: unsupported(stream.Context())}})
}

// AckMessage is a consumer's call.
func (s *Server) AckMessage(ctx context.Context, _ *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	return &rmqpb.AckMessageResponse{Status: unsupported(ctx)}, nil
}

// ForwardMessageToDeadLetterQueue is a consumer's call.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, _ *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: unsupported(ctx)}, nil
}

// PullMessage is a consumer's call: one answer with the status.
func (s *Server) PullMessage(_ *rmqpb.PullMessageRequest, stream grpc.ServerStreamingServer[rmqpb.PullMessageResponse]) error {
	return stream.Send(&rmqpb.PullMessageResponse{Content: &rmqpb.PullMessageResponse_Status{Status: unsupported(stream.Context())}})
}

// UpdateOffset is a consumer's call.
func (s *Server) UpdateOffset(ctx context.Context, _ *rmqpb.UpdateOffsetRequest) (*rmqpb.UpdateOffsetResponse, error) {
	return &rmqpb.UpdateOffsetResponse{Status: unsupported(ctx)}, nil
}

// GetOffset is a consumer's call.
func (s *Server) GetOffset(ctx context.Context, _ *rmqpb.GetOffsetRequest) (*rmqpb.GetOffsetResponse, error) {
	return &rmqpb.GetOffsetResponse{Status: unsupported(ctx)}, nil
}

// QueryOffset is a consumer's call.
func (s *Server) QueryOffset(ctx context.Context, _ *rmqpb.QueryOffsetRequest) (*rmqpb.QueryOffsetResponse, error) {
	return &rmqpb.QueryOffsetResponse{Status: unsupported(ctx)}, nil
}

// ChangeInvisibleDuration is a consumer's call.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, _ *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	return &rmqpb.ChangeInvisibleDurationResponse{Status: unsupported(ctx)}, nil
}

// RecallMessage would need the broker's recall handle, which detour's answers do not carry yet.
func (s *Server) RecallMessage(ctx context.Context, _ *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	return &rmqpb.RecallMessageResponse{Status: unsupported(ctx)}, nil
}

// SyncLiteSubscription is a consumer's call.
func (s *Server) SyncLiteSubscription(ctx context.Context, _ *rmqpb.SyncLiteSubscriptionRequest) (*rmqpb.SyncLiteSubscriptionResponse, error) {
	return &rmqpb.SyncLiteSubscriptionResponse{Status: unsupported(ctx)}, nil
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
