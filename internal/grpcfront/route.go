package grpcfront

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/rmqpb"
	"github.com/detourmq/detour/pkg/scope"
)

// acceptedTypes are the message types detour sends, listed on every queue of a MIXED topic and
// of one whose type no broker said.
var acceptedTypes = []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY, rmqpb.MessageType_TRANSACTION}

// maxEchoedAddresses bounds the access point a route echoes back.
const maxEchoedAddresses = 16

// QueryRoute answers a topic's master queues as the runtime's route has them. Every queue
// carries this endpoint's address, so every send comes back here whichever queue the client
// picks. Queues of brokers that the runtime would not pick now (isolated, or pod not ready) are
// READ, the others READ_WRITE; when no broker is writable all are, as a route without writable
// queues would stop the client from sending at all, and detour still picks the broker.
func (s *Server) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	who, st := s.admit(ctx)
	if st != nil {
		return &rmqpb.QueryRouteResponse{Status: st}, nil
	}
	// Before resolving, so that a key learns nothing of the topics it may not use.
	if st := who.authorizeSend(req.GetTopic()); st != nil {
		return &rmqpb.QueryRouteResponse{Status: st}, nil
	}
	target, st := s.resolve(ctx, req.GetTopic())
	if st != nil {
		return &rmqpb.QueryRouteResponse{Status: st}, nil
	}
	info, ok := s.opts.Runtime.RouteInfo(target.RouteKey())
	if !ok || len(info.Queues) == 0 {
		return &rmqpb.QueryRouteResponse{Status: newStatus(rmqpb.Code_TOPIC_NOT_FOUND,
			"no route of topic %s: no ready broker serves it yet", target.Topic)}, nil
	}
	ep := s.accessPoint(ctx, req.GetEndpoints())
	if len(ep.Addresses) > maxEchoedAddresses {
		ep = &rmqpb.Endpoints{Scheme: ep.Scheme, Addresses: ep.Addresses[:maxEchoedAddresses]}
	}
	facts, known := s.facts.get(ctx, target.RouteKey())
	types := acceptedTypesOf(facts.MessageType, known && !s.opts.SkipMessageTypeCheck)
	return &rmqpb.QueryRouteResponse{Status: okStatus(), MessageQueues: routeQueues(req.GetTopic(), info, target.Brokers, ep, types)}, nil
}

// routeQueues is a route's queues as the protocol writes them.
// types are the message types every queue takes.
func routeQueues(topic *rmqpb.Resource, info producer.RouteInfo, names scope.Scope, ep *rmqpb.Endpoints, types []rmqpb.MessageType) []*rmqpb.MessageQueue {
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
			b = &rmqpb.Broker{Name: names.Name(q.Broker), Id: 0, Endpoints: ep}
			brokers[q.Broker] = b
		}
		perm := rmqpb.Permission_READ_WRITE
		if anyWritable && !writable[q.Broker] {
			perm = rmqpb.Permission_READ
		}
		out = append(out, &rmqpb.MessageQueue{Topic: res, Id: int32(q.QueueID), Permission: perm, Broker: b,
			AcceptMessageTypes: types})
	}
	return out
}

// resolve finds the target of a client's topic, or the status that refuses it.
func (s *Server) resolve(ctx context.Context, topic *rmqpb.Resource) (front.Target, *rmqpb.Status) {
	name := topic.GetName()
	if st := checkTopicName(name); st != nil {
		return front.Target{}, st
	}
	t, err := s.opts.Topics.ResolveTopic(ctx, topic.GetResourceNamespace(), name)
	switch {
	case errors.Is(err, front.ErrTopicNotFound):
		return front.Target{}, newStatus(rmqpb.Code_TOPIC_NOT_FOUND, "%v", err)
	case errors.Is(err, front.ErrBusy):
		// The one code after which RocketMQ's clients back off before trying again.
		return front.Target{}, newStatus(rmqpb.Code_TOO_MANY_REQUESTS, "%v", err)
	case errors.Is(err, front.ErrUnavailable):
		// The Cluster's name servers are down: its status says so; a log line per request would
		// only repeat it.
		return front.Target{}, newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)
	case err != nil:
		s.log.Error(err, "Resolving a RocketMQ client's topic failed", "topic", name, "namespace", topic.GetResourceNamespace())
		return front.Target{}, newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "resolving topic %s failed: %v", name, err)
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

// Telemetry serves a producer's stream and forwards a consumer's. The first command tells
// which: a consumer's Settings (its client type, or a subscription) send the whole stream to the
// consumer's Proxy (forwardTelemetry). A producer's Settings are answered with detour's
// publishing settings, and the stream kept open until the client ends it: the clients wait for
// that answer before their first route query.
func (s *Server) Telemetry(stream grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand]) error {
	// The Proxy checks every command, but a stream's metadata is its first one's: checking it once
	// is the same. A refusal is the stream's one answer, as the Proxy ends it after one.
	if _, st := s.admit(stream.Context()); st != nil {
		return stream.Send(&rmqpb.TelemetryCommand{Status: st})
	}
	cmd, err := stream.Recv()
	if err != nil {
		return nil // the client ended the stream, or went away
	}
	if settings := cmd.GetSettings(); settings != nil && isConsumerSettings(settings) {
		return s.forwardTelemetry(stream, cmd, subscribedTopic(settings))
	}
	return s.serveProducerTelemetry(stream, cmd)
}

// serveProducerTelemetry answers a producer's Settings for as long as its stream lasts, and
// keeps the stream registered under the topics the Settings publish, so a broker's check-back on
// a half message of one reaches the producer (checkback.go) through a writer of the stream's own.
func (s *Server) serveProducerTelemetry(stream grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand], cmd *rmqpb.TelemetryCommand) error {
	ps := &producerStream{stream: stream, out: make(chan *rmqpb.TelemetryCommand, producerStreamQueue), done: make(chan struct{})}
	var writer sync.WaitGroup
	writer.Add(1)
	go ps.writeQueued(&writer)
	defer func() {
		s.orphans.remove(ps)
		close(ps.done)
		writer.Wait() // nothing may write to the stream once the handler returns
	}()
	for {
		if settings := cmd.GetSettings(); settings != nil { // else an answer to a command detour never sends
			if err := checkPublishedTopics(settings); err != nil {
				return err
			}
			answer := s.settingsAnswer(settings)
			if answer.GetSettings() != nil {
				s.orphans.register(ps, s.publishedTargets(ps, settings))
			}
			if err := ps.send(answer); err != nil {
				return nil
			}
		}
		var err error
		if cmd, err = stream.Recv(); err != nil {
			return nil
		}
	}
}

// checkPublishedTopics applies the Proxy's topic rules to the topics a producer's Settings
// publish. The Proxy ends such a stream with INVALID_ARGUMENT, the status naming the rule, as it
// ends a stream on any of its 4xx refusals.
func checkPublishedTopics(settings *rmqpb.Settings) error {
	for _, t := range settings.GetPublishing().GetTopics() {
		if st := checkTopicName(t.GetName()); st != nil {
			return status.Errorf(codes.InvalidArgument, "process client telemetryCommand failed. %s", st.Message)
		}
	}
	return nil
}

// settingsAnswer is the answer to a producer's Settings; Settings that are neither a producer's
// nor a consumer's get UNSUPPORTED.
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
