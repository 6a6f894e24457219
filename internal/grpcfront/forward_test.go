package grpcfront

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	certutil "k8s.io/client-go/util/cert"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// upstreamProxy is a gRPC server serving MessagingService in a Proxy's seat: it records the
// metadata of every call and answers naming itself, in its status, header and trailer.
// Topic "LongPoll" makes ReceiveMessage wait until its call ends; failWith makes every call fail
// with that gRPC status.
type upstreamProxy struct {
	rmqpb.UnimplementedMessagingServiceServer
	name     string
	addr     string
	failWith error

	mu    sync.Mutex
	calls []seenCall
	// ended receives how each ReceiveMessage and Telemetry call ended on the upstream side:
	// "eof" for a client half-close, "canceled" for a cancelled call.
	ended chan string
}

type seenCall struct {
	method string
	md     metadata.MD
}

func startUpstream(t *testing.T, name string, creds credentials.TransportCredentials) *upstreamProxy {
	t.Helper()
	p := &upstreamProxy{name: name, ended: make(chan string, 16)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	rmqpb.RegisterMessagingServiceServer(srv, p)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	p.addr = ln.Addr().String()
	return p
}

func (p *upstreamProxy) upstream() *front.Upstream { return &front.Upstream{Addr: p.addr} }

// seen records a call and sets the answer's header and trailer.
func (p *upstreamProxy) seen(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	p.mu.Lock()
	p.calls = append(p.calls, seenCall{method: method, md: md})
	p.mu.Unlock()
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-upstream", p.name))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-upstream-trailer", p.name))
}

func (p *upstreamProxy) answer(ctx context.Context, method string) (*rmqpb.Status, error) {
	p.seen(ctx, method)
	if p.failWith != nil {
		return nil, p.failWith
	}
	return &rmqpb.Status{Code: rmqpb.Code_OK, Message: p.name + " " + method}, nil
}

func (p *upstreamProxy) seenCalls() []seenCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenCall(nil), p.calls...)
}

func (p *upstreamProxy) QueryAssignment(ctx context.Context, req *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	st, err := p.answer(ctx, "QueryAssignment")
	if err != nil {
		return nil, err
	}
	// As the Proxy answers: the client's host with the Proxy's own port.
	ep := &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_IPv4, Addresses: []*rmqpb.Address{{Host: "127.0.0.1", Port: 8081}}}
	return &rmqpb.QueryAssignmentResponse{Status: st, Assignments: []*rmqpb.Assignment{{MessageQueue: &rmqpb.MessageQueue{
		Topic: req.GetTopic(), Id: -1, Permission: rmqpb.Permission_READ_WRITE, Broker: &rmqpb.Broker{Name: "broker-a", Endpoints: ep}}}}}, nil
}

func (p *upstreamProxy) AckMessage(ctx context.Context, _ *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	st, err := p.answer(ctx, "AckMessage")
	return &rmqpb.AckMessageResponse{Status: st}, err
}

func (p *upstreamProxy) ChangeInvisibleDuration(ctx context.Context, _ *rmqpb.ChangeInvisibleDurationRequest) (*rmqpb.ChangeInvisibleDurationResponse, error) {
	st, err := p.answer(ctx, "ChangeInvisibleDuration")
	return &rmqpb.ChangeInvisibleDurationResponse{Status: st}, err
}

func (p *upstreamProxy) ForwardMessageToDeadLetterQueue(ctx context.Context, _ *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	st, err := p.answer(ctx, "ForwardMessageToDeadLetterQueue")
	return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: st}, err
}

func (p *upstreamProxy) UpdateOffset(ctx context.Context, _ *rmqpb.UpdateOffsetRequest) (*rmqpb.UpdateOffsetResponse, error) {
	st, err := p.answer(ctx, "UpdateOffset")
	return &rmqpb.UpdateOffsetResponse{Status: st}, err
}

func (p *upstreamProxy) GetOffset(ctx context.Context, _ *rmqpb.GetOffsetRequest) (*rmqpb.GetOffsetResponse, error) {
	st, err := p.answer(ctx, "GetOffset")
	return &rmqpb.GetOffsetResponse{Status: st}, err
}

func (p *upstreamProxy) QueryOffset(ctx context.Context, _ *rmqpb.QueryOffsetRequest) (*rmqpb.QueryOffsetResponse, error) {
	st, err := p.answer(ctx, "QueryOffset")
	return &rmqpb.QueryOffsetResponse{Status: st}, err
}

func (p *upstreamProxy) RecallMessage(ctx context.Context, _ *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	st, err := p.answer(ctx, "RecallMessage")
	return &rmqpb.RecallMessageResponse{Status: st}, err
}

func (p *upstreamProxy) Heartbeat(ctx context.Context, _ *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	st, err := p.answer(ctx, "Heartbeat")
	return &rmqpb.HeartbeatResponse{Status: st}, err
}

func (p *upstreamProxy) NotifyClientTermination(ctx context.Context, _ *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	st, err := p.answer(ctx, "NotifyClientTermination")
	return &rmqpb.NotifyClientTerminationResponse{Status: st}, err
}

func (p *upstreamProxy) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream grpc.ServerStreamingServer[rmqpb.ReceiveMessageResponse]) error {
	st, err := p.answer(stream.Context(), "ReceiveMessage")
	if err != nil {
		return err
	}
	if req.GetMessageQueue().GetTopic().GetName() == "LongPoll" {
		<-stream.Context().Done()
		p.ended <- "canceled"
		return stream.Context().Err()
	}
	for _, body := range []string{"one", "two"} {
		m := &rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: &rmqpb.Message{
			Topic: req.GetMessageQueue().GetTopic(), Body: []byte(body)}}}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: st}})
}

// Telemetry answers the client's Settings with its own, echoes every later command, and on the
// client's half-close ends the stream with status OK.
func (p *upstreamProxy) Telemetry(stream grpc.BidiStreamingServer[rmqpb.TelemetryCommand, rmqpb.TelemetryCommand]) error {
	st, err := p.answer(stream.Context(), "Telemetry")
	if err != nil {
		return err
	}
	for {
		cmd, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			p.ended <- "eof"
			return nil
		case err != nil:
			p.ended <- "canceled"
			return err
		case cmd.GetSettings() != nil:
			err = stream.Send(&rmqpb.TelemetryCommand{Status: st, Command: &rmqpb.TelemetryCommand_Settings{Settings: cmd.GetSettings()}})
		default:
			err = stream.Send(cmd)
		}
		if err != nil {
			return err
		}
	}
}

// newForwardingBed is the endpoint with topic Orders on Proxy one and Refunds on Proxy two;
// Mixed has no Proxy.
func newForwardingBed(t *testing.T, mutate func(*Options)) (*testBed, *upstreamProxy, *upstreamProxy) {
	t.Helper()
	one, two := startUpstream(t, "one", nil), startUpstream(t, "two", nil)
	bed := newTestBed(t, func(o *Options) {
		local := o.Topics
		o.Topics = front.TopicResolverFunc(func(ctx context.Context, ns, topic string) (front.Target, error) {
			if topic == "Refunds" {
				return front.Target{Topic: topic, Upstream: two.upstream()}, nil
			}
			target, err := local.ResolveTopic(ctx, ns, topic)
			if topic == "Orders" {
				target.Upstream = one.upstream()
			}
			return target, err
		})
		o.UpstreamHint = "declare spec.proxy on the Cluster"
		if mutate != nil {
			mutate(o)
		}
	})
	return bed, one, two
}

// asConsumer is a call context of a consumer, with the metadata the SDKs send.
func asConsumer(t *testing.T, clientID string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, clientIDHeader, clientID, "x-mq-language", "JAVA", "x-mq-namespace", "shop",
		"authorization", "MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=00", "x-mq-date-time", "20261203T132000Z")
}

func orders() *rmqpb.Resource { return &rmqpb.Resource{Name: "Orders"} }

func ordersQueue() *rmqpb.MessageQueue { return &rmqpb.MessageQueue{Topic: orders(), Id: 0} }

func TestForwardedConsumerCallsReachTheTopicsProxyWithTheirMetadata(t *testing.T) {
	bed, one, _ := newForwardingBed(t, nil)
	consumer := rmqpb.ClientType_SIMPLE_CONSUMER
	group := &rmqpb.Resource{Name: "readers"}
	for _, tc := range []struct {
		method string
		call   func(ctx context.Context, opts ...grpc.CallOption) (statusAnswer, error)
	}{
		{"QueryAssignment", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.QueryAssignment(ctx, &rmqpb.QueryAssignmentRequest{Topic: orders(), Group: group}, o...)
		}},
		{"AckMessage", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.AckMessage(ctx, &rmqpb.AckMessageRequest{Topic: orders(), Group: group}, o...)
		}},
		{"ChangeInvisibleDuration", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.ChangeInvisibleDuration(ctx, &rmqpb.ChangeInvisibleDurationRequest{Topic: orders(), Group: group}, o...)
		}},
		{"ForwardMessageToDeadLetterQueue", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.ForwardMessageToDeadLetterQueue(ctx, &rmqpb.ForwardMessageToDeadLetterQueueRequest{Topic: orders(), Group: group}, o...)
		}},
		{"UpdateOffset", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.UpdateOffset(ctx, &rmqpb.UpdateOffsetRequest{MessageQueue: ordersQueue(), Group: group}, o...)
		}},
		{"GetOffset", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.GetOffset(ctx, &rmqpb.GetOffsetRequest{MessageQueue: ordersQueue(), Group: group}, o...)
		}},
		{"QueryOffset", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.QueryOffset(ctx, &rmqpb.QueryOffsetRequest{MessageQueue: ordersQueue()}, o...)
		}},
		{"RecallMessage", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.RecallMessage(ctx, &rmqpb.RecallMessageRequest{Topic: orders(), RecallHandle: "h"}, o...)
		}},
		{"Heartbeat", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.Heartbeat(ctx, &rmqpb.HeartbeatRequest{Group: group, ClientType: consumer}, o...)
		}},
		{"NotifyClientTermination", func(ctx context.Context, o ...grpc.CallOption) (statusAnswer, error) {
			return bed.client.NotifyClientTermination(ctx, &rmqpb.NotifyClientTerminationRequest{Group: group}, o...)
		}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			clientID := "reader@" + tc.method
			// The client's first call binds it to the Orders Proxy; calls without a topic then follow it.
			if _, err := bed.client.AckMessage(asConsumer(t, clientID), &rmqpb.AckMessageRequest{Topic: orders(), Group: group}); err != nil {
				t.Fatal(err)
			}
			var header, trailer metadata.MD
			resp, err := tc.call(asConsumer(t, clientID), grpc.Header(&header), grpc.Trailer(&trailer))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := resp.GetStatus().GetMessage(), "one "+tc.method; got != want || resp.GetStatus().GetCode() != rmqpb.Code_OK {
				t.Errorf("status = %v, want OK %q", resp.GetStatus(), want)
			}
			if header.Get("x-upstream")[0] != "one" || trailer.Get("x-upstream-trailer")[0] != "one" {
				t.Errorf("header %v, trailer %v: want the Proxy's", header, trailer)
			}
			calls := one.seenCalls()
			last := calls[len(calls)-1]
			if last.method != tc.method {
				t.Fatalf("the Proxy last saw %s, want %s", last.method, tc.method)
			}
			for key, want := range map[string]string{clientIDHeader: clientID, "x-mq-language": "JAVA", "x-mq-namespace": "shop",
				"authorization": "MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=00", "x-mq-date-time": "20261203T132000Z"} {
				if got := last.md.Get(key); len(got) != 1 || got[0] != want {
					t.Errorf("the Proxy saw %s = %q, want %q", key, got, want)
				}
			}
		})
	}
}

func TestQueryAssignmentAnswersNameThisEndpoint(t *testing.T) {
	bed, _, _ := newForwardingBed(t, nil)
	sent := &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_DOMAIN_NAME, Addresses: []*rmqpb.Address{{Host: "detour-grpc", Port: 8443}}}
	r, err := bed.client.QueryAssignment(asConsumer(t, "push@1"), &rmqpb.QueryAssignmentRequest{Topic: orders(), Endpoints: sent})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetAssignments()) != 1 {
		t.Fatalf("assignments = %v, want the Proxy's one", r.GetAssignments())
	}
	got := r.GetAssignments()[0].GetMessageQueue().GetBroker().GetEndpoints().GetAddresses()
	if len(got) != 1 || got[0].GetHost() != "detour-grpc" || got[0].GetPort() != 8443 {
		t.Errorf("assignment endpoints = %v, want the access point the client sent", got)
	}
}

func TestClientsStayWithTheProxyOfTheirFirstCall(t *testing.T) {
	bed, one, two := newForwardingBed(t, nil)
	for _, tc := range []struct {
		name     string
		clientID string
		topics   []string // in call order
		want     *upstreamProxy
	}{
		{"first on Orders", "a@1", []string{"Orders", "Refunds", ""}, one},
		{"first on Refunds", "b@1", []string{"Refunds", "Orders", ""}, two},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, topic := range tc.topics {
				before := len(tc.want.seenCalls())
				if topic == "" {
					_, err := bed.client.Heartbeat(asConsumer(t, tc.clientID), &rmqpb.HeartbeatRequest{ClientType: rmqpb.ClientType_PUSH_CONSUMER})
					if err != nil {
						t.Fatal(err)
					}
				} else if _, err := bed.client.AckMessage(asConsumer(t, tc.clientID), &rmqpb.AckMessageRequest{Topic: &rmqpb.Resource{Name: topic}}); err != nil {
					t.Fatal(err)
				}
				if len(tc.want.seenCalls()) != before+1 {
					t.Errorf("the call on topic %q did not reach Proxy %s", topic, tc.want.name)
				}
			}
		})
	}
}

func TestForwardedCallsPassTheProxysGRPCStatusThrough(t *testing.T) {
	bed, one, _ := newForwardingBed(t, nil)
	one.failWith = status.Error(codes.ResourceExhausted, "flow limit on the Proxy")
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, trailer *metadata.MD) error
	}{
		{"unary", func(ctx context.Context, trailer *metadata.MD) error {
			_, err := bed.client.AckMessage(ctx, &rmqpb.AckMessageRequest{Topic: orders()}, grpc.Trailer(trailer))
			return err
		}},
		{"server stream", func(ctx context.Context, trailer *metadata.MD) error {
			s, err := bed.client.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{MessageQueue: ordersQueue()})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			*trailer = s.Trailer()
			return err
		}},
		{"telemetry", func(ctx context.Context, trailer *metadata.MD) error {
			s, err := bed.client.Telemetry(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(consumerSettings()); err != nil {
				return err
			}
			_, err = s.Recv()
			*trailer = s.Trailer()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trailer metadata.MD
			err := tc.call(asConsumer(t, "failing@"+tc.name), &trailer)
			if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != "flow limit on the Proxy" {
				t.Errorf("error = %v, want the Proxy's ResourceExhausted", err)
			}
			if got := trailer.Get("x-upstream-trailer"); len(got) != 1 || got[0] != "one" {
				t.Errorf("trailer = %v, want the Proxy's", trailer)
			}
		})
	}
}

func consumerSettings() *rmqpb.TelemetryCommand {
	consumer := rmqpb.ClientType_SIMPLE_CONSUMER
	return &rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{ClientType: &consumer,
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{Group: &rmqpb.Resource{Name: "readers"},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: orders()}}}}}}}
}

func TestReceiveMessageRelaysTheProxysAnswers(t *testing.T) {
	bed, _, _ := newForwardingBed(t, nil)
	s, err := bed.client.ReceiveMessage(asConsumer(t, "simple@1"), &rmqpb.ReceiveMessageRequest{MessageQueue: ordersQueue()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := r.GetMessage(); m != nil {
			got = append(got, string(m.GetBody()))
		} else {
			got = append(got, r.GetStatus().GetMessage())
		}
	}
	if want := []string{"one", "two", "one ReceiveMessage"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("answers = %q, want %q", got, want)
	}
	if h, _ := s.Header(); len(h.Get("x-upstream")) != 1 {
		t.Errorf("header = %v, want the Proxy's", h)
	}
}

func TestForwardedStreamsEndTogether(t *testing.T) {
	bed, one, _ := newForwardingBed(t, nil)
	for _, tc := range []struct {
		name string
		// run starts a stream and ends it from the client's side, returning what the client saw
		// after its end
		run  func(t *testing.T, ctx context.Context, cancel context.CancelFunc) error
		want string // how the upstream's side ended
	}{
		{"a cancelled long poll cancels the Proxy's", func(t *testing.T, ctx context.Context, cancel context.CancelFunc) error {
			// An ack on Orders binds the client to Orders' Proxy, where the receive then waits.
			if _, err := bed.client.AckMessage(ctx, &rmqpb.AckMessageRequest{Topic: orders()}); err != nil {
				return err
			}
			s, err := bed.client.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "LongPoll"}}})
			if err != nil {
				return err
			}
			waitForCalls(t, one, "ReceiveMessage")
			cancel()
			_, err = s.Recv()
			return err
		}, "canceled"},
		{"a half-closed telemetry stream half-closes the Proxy's", func(t *testing.T, ctx context.Context, _ context.CancelFunc) error {
			s, err := bed.client.Telemetry(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(consumerSettings()); err != nil {
				return err
			}
			if r, err := s.Recv(); err != nil || r.GetSettings() == nil || r.GetStatus().GetMessage() != "one Telemetry" {
				t.Fatalf("first answer %v, %v: want the Proxy's settings", r, err)
			}
			// A later command still goes up and its echo comes down.
			echo := &rmqpb.TelemetryCommand{Status: &rmqpb.Status{Code: rmqpb.Code_OK, Message: "stack trace"}}
			if err := s.Send(echo); err != nil {
				return err
			}
			if r, err := s.Recv(); err != nil || r.GetStatus().GetMessage() != "stack trace" {
				t.Fatalf("echo %v, %v: want the command relayed both ways", r, err)
			}
			if err := s.CloseSend(); err != nil {
				return err
			}
			if _, err := s.Recv(); !errors.Is(err, io.EOF) {
				return err
			}
			if got := s.Trailer().Get("x-upstream-trailer"); len(got) != 1 {
				t.Errorf("trailer = %v, want the Proxy's", s.Trailer())
			}
			return nil
		}, "eof"},
		{"a cancelled telemetry stream cancels the Proxy's", func(t *testing.T, ctx context.Context, cancel context.CancelFunc) error {
			s, err := bed.client.Telemetry(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(consumerSettings()); err != nil {
				return err
			}
			if _, err := s.Recv(); err != nil {
				return err
			}
			cancel()
			_, err = s.Recv()
			return err
		}, "canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(asConsumer(t, "streams@"+tc.name))
			defer cancel()
			err := tc.run(t, ctx, cancel)
			if tc.want == "canceled" && status.Code(err) != codes.Canceled {
				t.Errorf("the client saw %v, want Canceled", err)
			}
			if tc.want == "eof" && err != nil {
				t.Errorf("the client saw %v, want a clean end", err)
			}
			select {
			case got := <-one.ended:
				if got != tc.want {
					t.Errorf("the Proxy's side ended with %s, want %s", got, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the Proxy's side did not end (want %s)", tc.want)
			}
		})
	}
}

// waitForCalls waits until the Proxy has seen a call of method.
func waitForCalls(t *testing.T, p *upstreamProxy, method string) {
	t.Helper()
	poll.Until(t, 30*time.Second, 10*time.Millisecond, "the Proxy seeing a "+method, func() error {
		for _, c := range p.seenCalls() {
			if c.method == method {
				return nil
			}
		}
		return errors.New("not yet")
	})
}

func TestProducerTelemetryIsStillServedByDetour(t *testing.T) {
	bed, one, _ := newForwardingBed(t, nil)
	s, err := bed.client.Telemetry(asConsumer(t, "producer@1"))
	if err != nil {
		t.Fatal(err)
	}
	producer := rmqpb.ClientType_PRODUCER
	if err := s.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{ClientType: &producer,
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{orders()}}}}}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r.GetSettings().GetPublishing().GetMaxBodySize() == 0 || r.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Errorf("answer = %v, want detour's publishing settings", r)
	}
	for _, c := range one.seenCalls() {
		t.Errorf("the Proxy saw %s; a producer's stream is detour's", c.method)
	}
}

func TestConsumerCallsWithoutAProxyAnswerUnsupported(t *testing.T) {
	bed, _, _ := newForwardingBed(t, nil)
	mixed := &rmqpb.Resource{Name: "Mixed"}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) (*rmqpb.Status, error)
		want string
	}{
		{"ack on a topic without a Proxy", func(ctx context.Context) (*rmqpb.Status, error) {
			r, err := bed.client.AckMessage(ctx, &rmqpb.AckMessageRequest{Topic: mixed})
			return r.GetStatus(), err
		}, "declare spec.proxy on the Cluster"},
		{"receive on a topic without a Proxy", func(ctx context.Context) (*rmqpb.Status, error) {
			s, err := bed.client.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{MessageQueue: &rmqpb.MessageQueue{Topic: mixed}})
			if err != nil {
				return nil, err
			}
			r, err := s.Recv()
			return r.GetStatus(), err
		}, "declare spec.proxy on the Cluster"},
		{"consumer telemetry on a topic without a Proxy", func(ctx context.Context) (*rmqpb.Status, error) {
			s, err := bed.client.Telemetry(ctx)
			if err != nil {
				return nil, err
			}
			cmd := consumerSettings()
			cmd.GetSettings().GetSubscription().Subscriptions[0].Topic = mixed
			if err := s.Send(cmd); err != nil {
				return nil, err
			}
			r, err := s.Recv()
			return r.GetStatus(), err
		}, "declare spec.proxy on the Cluster"},
		{"heartbeat of a consumer no call has bound", func(ctx context.Context) (*rmqpb.Status, error) {
			r, err := bed.client.Heartbeat(ctx, &rmqpb.HeartbeatRequest{ClientType: rmqpb.ClientType_SIMPLE_CONSUMER})
			return r.GetStatus(), err
		}, "no RocketMQ Proxy is known for client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.call(asConsumer(t, "lost@"+tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if st.GetCode() != rmqpb.Code_UNSUPPORTED || !strings.Contains(st.GetMessage(), tc.want) {
				t.Errorf("status = %v, want UNSUPPORTED saying %q", st, tc.want)
			}
		})
	}
}

func TestAffinityTableIsBoundedAndForgetsIdleClients(t *testing.T) {
	p1, p2 := &front.Upstream{Addr: "p1:8081"}, &front.Upstream{Addr: "p2:8081"}
	for _, tc := range []struct {
		name string
		run  func(a *affinity, advance func(time.Duration)) (size int, forgotten string, remembered string)
	}{
		{"the least recently active client leaves a full table", func(a *affinity, _ func(time.Duration)) (int, string, string) {
			a.bind("c1", p1)
			a.bind("c2", p1)
			a.lookup("c1") // c1 is now more recent than c2
			a.bind("c3", p2)
			a.bind("c4", p2)
			return a.size(), "c2", "c1"
		}},
		{"an idle client is forgotten", func(a *affinity, advance func(time.Duration)) (int, string, string) {
			a.bind("old", p1)
			advance(time.Minute)
			a.bind("new", p2)
			advance(time.Minute + time.Second)
			a.lookup("new")
			return a.size(), "old", "new"
		}},
		{"a bound client stays with its Proxy", func(a *affinity, _ func(time.Duration)) (int, string, string) {
			if got := a.bind("c1", p1); got != p1 {
				t.Errorf("first bind = %v", got)
			}
			if got := a.bind("c1", p2); got != p1 {
				t.Errorf("second bind = %v, want the first Proxy", got)
			}
			a.forget("gone")
			a.bind("gone", p2)
			a.forget("gone")
			return a.size(), "gone", "c1"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			a := newAffinity(3, 2*time.Minute, func() time.Time { return now })
			size, forgotten, remembered := tc.run(a, func(d time.Duration) { now = now.Add(d) })
			if size > 3 {
				t.Errorf("size = %d, over the bound of 3", size)
			}
			if a.lookup(forgotten) != nil {
				t.Errorf("%s is still remembered", forgotten)
			}
			if a.lookup(remembered) == nil {
				t.Errorf("%s was forgotten", remembered)
			}
		})
	}
}

func TestManyClientsDoNotGrowTheEndpointsTables(t *testing.T) {
	bed, one, _ := newForwardingBed(t, func(o *Options) { o.MaxClients = 8 })
	for i := range 50 {
		r, err := bed.client.AckMessage(asConsumer(t, "many@"+strings.Repeat("x", i)), &rmqpb.AckMessageRequest{Topic: orders()})
		if err != nil || r.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("ack %d: %v, %v", i, r, err)
		}
	}
	if got := bed.srv.affinity.size(); got != 8 {
		t.Errorf("affinity holds %d clients, want its bound of 8", got)
	}
	if got := bed.srv.upstreams.size(); got != 1 {
		t.Errorf("%d Proxy connections, want 1 for the one Proxy", got)
	}
	if got := len(one.seenCalls()); got != 50 {
		t.Errorf("the Proxy saw %d calls, want 50", got)
	}
}

func TestUpstreamTLSVerification(t *testing.T) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("proxy.test", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startUpstream(t, "tls", credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	for _, tc := range []struct {
		name   string
		tls    *front.UpstreamTLS
		wantOK bool
	}{
		{"the Proxy's CA", &front.UpstreamTLS{CA: certPEM, ServerName: "proxy.test"}, true},
		{"insecure skip verify", &front.UpstreamTLS{InsecureSkipVerify: true}, true},
		{"the system's roots refuse a self-signed certificate", &front.UpstreamTLS{}, false},
		{"plaintext to a TLS-only Proxy", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &front.Upstream{Addr: proxy.addr, TLS: tc.tls}
			bed := newTestBed(t, func(o *Options) {
				o.Topics = front.TopicResolverFunc(func(context.Context, string, string) (front.Target, error) {
					return front.Target{Topic: "Orders", Upstream: up}, nil
				})
			})
			ctx, cancel := context.WithTimeout(asConsumer(t, "tls@1"), 10*time.Second)
			defer cancel()
			r, err := bed.client.AckMessage(ctx, &rmqpb.AckMessageRequest{Topic: orders()})
			if tc.wantOK && (err != nil || r.GetStatus().GetMessage() != "tls AckMessage") {
				t.Errorf("ack = %v, %v: want the Proxy's answer", r, err)
			}
			if !tc.wantOK && status.Code(err) != codes.Unavailable {
				t.Errorf("ack = %v, %v: want Unavailable", r, err)
			}
		})
	}
}

func TestUpstreamsWithBadSettingsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		up   *front.Upstream
		want string
	}{
		{"no port", &front.Upstream{Addr: "proxy"}, "host:port"},
		{"port zero", &front.Upstream{Addr: "proxy:0"}, "port from 1 to 65535"},
		{"a CA that is no PEM", &front.Upstream{Addr: "proxy:8081", TLS: &front.UpstreamTLS{CA: []byte("nope")}}, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bed := newTestBed(t, func(o *Options) {
				o.Topics = front.TopicResolverFunc(func(context.Context, string, string) (front.Target, error) {
					return front.Target{Topic: "Orders", Upstream: tc.up}, nil
				})
			})
			r, err := bed.client.AckMessage(asConsumer(t, "bad@1"), &rmqpb.AckMessageRequest{Topic: orders()})
			if err != nil {
				t.Fatal(err)
			}
			if r.GetStatus().GetCode() != rmqpb.Code_INTERNAL_SERVER_ERROR || !strings.Contains(r.GetStatus().GetMessage(), tc.want) {
				t.Errorf("status = %v, want INTERNAL_SERVER_ERROR saying %q", r.GetStatus(), tc.want)
			}
		})
	}
}

func TestIdleProxyConnectionsAreClosed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight bool // whether the first Proxy's call is still in flight when the second dials
		want     int
	}{
		{"an idle connection is closed when another Proxy is dialled", false, 1},
		{"a connection with a call in flight is kept", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			p := newUpstreams(time.Minute, func() time.Time { return now })
			t.Cleanup(p.close)
			_, release, err := p.acquire(&front.Upstream{Addr: "127.0.0.1:18081"})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.inFlight {
				release()
			}
			now = now.Add(2 * time.Minute)
			if _, _, err := p.acquire(&front.Upstream{Addr: "127.0.0.1:18082"}); err != nil {
				t.Fatal(err)
			}
			if got := p.size(); got != tc.want {
				t.Errorf("%d connections held, want %d", got, tc.want)
			}
		})
	}
}
