package grpcfront

import (
	"context"
	"path"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/detourmq/detour/pkg/rmqpb"
)

// statusAnswer is every MessagingService response: each carries the RocketMQ status of its call.
type statusAnswer interface{ GetStatus() *rmqpb.Status }

// countUnary counts every unary call by method and the code it was answered with, and every
// message of a SendMessage answer by its entry's code. It runs outside recoverUnary, so a
// handler's panic is counted as the INTERNAL error it becomes.
func (s *Server) countUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	begin := time.Now()
	resp, err := handler(ctx, req)
	s.metrics.CallDone(path.Base(info.FullMethod), answerCode(resp, err), time.Since(begin))
	if sent, ok := resp.(*rmqpb.SendMessageResponse); ok && err == nil {
		for _, e := range sent.GetEntries() {
			s.metrics.MessageAnswered(e.GetStatus().GetCode().String())
		}
	}
	return resp, err
}

// countStream counts every stream by method and the gRPC code it ended with.
func (s *Server) countStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	s.metrics.CallDone(path.Base(info.FullMethod), status.Code(err).String(), 0)
	return err
}

// answerCode is the RocketMQ status code of a call's answer, or the gRPC code of a call that
// failed as a whole.
func answerCode(resp any, err error) string {
	if err != nil {
		return status.Code(err).String()
	}
	if a, ok := resp.(statusAnswer); ok && a.GetStatus() != nil {
		return a.GetStatus().GetCode().String()
	}
	return "OK"
}
