package grpcfront

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// acceptedTypes are the message types detour sends, listed on every queue: the runtime does not
// know a topic's type, and a client that validates types then refuses what detour cannot send
// (transactional messages) before sending it.
var acceptedTypes = []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY}

// maxEchoedAddresses bounds the access point a route echoes back.
const maxEchoedAddresses = 16

// QueryRoute answers a topic's master queues as the runtime's route has them. Every queue
// carries this endpoint's address, so every send comes back here whichever queue the client
// picks. Queues of brokers that the runtime would not pick now (isolated, or pod not ready) are
// READ, the others READ_WRITE; when no broker is writable all are, as a route without writable
// queues would stop the client from sending at all, and detour still picks the broker.
func (s *Server) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	if st := requireClientID(ctx); st != nil {
		return &rmqpb.QueryRouteResponse{Status: st}, nil
	}
	target, st := s.resolve(ctx, req.GetTopic())
	if st != nil {
		return &rmqpb.QueryRouteResponse{Status: st}, nil
	}
	info, ok := s.opts.Runtime.RouteInfo(target.key())
	if !ok || len(info.Queues) == 0 {
		return &rmqpb.QueryRouteResponse{Status: newStatus(rmqpb.Code_TOPIC_NOT_FOUND,
			"no route of topic %s: no ready broker serves it yet", target.Topic)}, nil
	}
	ep := s.accessPoint(ctx, req.GetEndpoints())
	if len(ep.Addresses) > maxEchoedAddresses {
		ep = &rmqpb.Endpoints{Scheme: ep.Scheme, Addresses: ep.Addresses[:maxEchoedAddresses]}
	}
	return &rmqpb.QueryRouteResponse{Status: okStatus(), MessageQueues: routeQueues(req.GetTopic(), info, target.BrokerPrefix, ep)}, nil
}

// routeQueues is a route's queues as the protocol writes them.
func routeQueues(topic *rmqpb.Resource, info producer.RouteInfo, prefix string, ep *rmqpb.Endpoints) []*rmqpb.MessageQueue {
	writable := make(map[string]bool, len(info.Brokers))
	anyWritable := false
	for _, b := range info.Brokers {
		writable[b.Name] = b.PodOK && b.Available
		anyWritable = anyWritable || writable[b.Name]
	}
	res := &rmqpb.Resource{ResourceNamespace: topic.GetResourceNamespace(), Name: topic.GetName()}
	out := make([]*rmqpb.MessageQueue, 0, len(info.Queues))
	brokers := make(map[string]*rmqpb.Broker, len(info.Brokers))
	for _, q := range info.Queues {
		b := brokers[q.Broker]
		if b == nil {
			b = &rmqpb.Broker{Name: strings.TrimPrefix(q.Broker, prefix), Id: 0, Endpoints: ep}
			brokers[q.Broker] = b
		}
		perm := rmqpb.Permission_READ_WRITE
		if anyWritable && !writable[q.Broker] {
			perm = rmqpb.Permission_READ
		}
		out = append(out, &rmqpb.MessageQueue{Topic: res, Id: int32(q.QueueID), Permission: perm, Broker: b,
			AcceptMessageTypes: acceptedTypes})
	}
	return out
}

// resolve finds the target of a client's topic, or the status that refuses it.
func (s *Server) resolve(ctx context.Context, topic *rmqpb.Resource) (Target, *rmqpb.Status) {
	name := topic.GetName()
	if name == "" {
		return Target{}, newStatus(rmqpb.Code_ILLEGAL_TOPIC, "the request names no topic")
	}
	if len(name) > producer.MaxTopicLength {
		return Target{}, newStatus(rmqpb.Code_ILLEGAL_TOPIC, "topic name is %d characters long, over the limit of %d", len(name), producer.MaxTopicLength)
	}
	t, err := s.opts.Topics.ResolveRocketMQTopic(ctx, topic.GetResourceNamespace(), name)
	if errors.Is(err, ErrTopicNotFound) {
		return Target{}, newStatus(rmqpb.Code_TOPIC_NOT_FOUND, "%v", err)
	}
	if err != nil {
		s.log.Error(err, "Resolving a RocketMQ client's topic failed", "topic", name, "namespace", topic.GetResourceNamespace())
		return Target{}, newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "resolving topic %s failed: %v", name, err)
	}
	return t, nil
}

// Backoff detour pushes to producers, as the Proxy's defaults: three attempts, waits growing
// from 10 ms by two up to 1 s (the clients wait only after TOO_MANY_REQUESTS).
const (
	backoffAttempts   = 3
	backoffInitial    = 10 * time.Millisecond
	backoffMax        = time.Second
	backoffMultiplier = 2
)

// Telemetry answers every Settings a producer announces with detour's publishing settings and
// keeps the stream open until the client ends it: the clients wait for that answer before their
// first route query. A consumer's Settings get UNSUPPORTED.
func (s *Server) Telemetry(stream grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand]) error {
	if st := requireClientID(stream.Context()); st != nil {
		return stream.Send(&rmqpb.TelemetryCommand{Status: st})
	}
	for {
		cmd, err := stream.Recv()
		if err != nil {
			return nil // the client ended the stream, or went away
		}
		settings := cmd.GetSettings()
		if settings == nil {
			continue // answers to commands detour never sends
		}
		if err := stream.Send(s.settingsAnswer(settings)); err != nil {
			return nil
		}
	}
}

// settingsAnswer is the answer to a client's Settings.
func (s *Server) settingsAnswer(in *rmqpb.Settings) *rmqpb.TelemetryCommand {
	pub := in.GetPublishing()
	if pub == nil || (in.ClientType != nil && in.GetClientType() != rmqpb.ClientType_PRODUCER) {
		return &rmqpb.TelemetryCommand{Status: &rmqpb.Status{Code: rmqpb.Code_UNSUPPORTED, Message: unsupportedMessage}}
	}
	out := &rmqpb.Settings{
		ClientType:     in.ClientType,
		AccessPoint:    in.AccessPoint,
		RequestTimeout: in.RequestTimeout,
		BackoffPolicy: &rmqpb.RetryPolicy{MaxAttempts: backoffAttempts, Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{
			ExponentialBackoff: &rmqpb.ExponentialBackoff{Initial: durationpb.New(backoffInitial), Max: durationpb.New(backoffMax),
				Multiplier: backoffMultiplier}}},
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: pub.GetTopics(),
			MaxBodySize: int32(s.opts.MaxBodySize), ValidateMessageType: true}},
	}
	return &rmqpb.TelemetryCommand{Status: okStatus(), Command: &rmqpb.TelemetryCommand_Settings{Settings: out}}
}
