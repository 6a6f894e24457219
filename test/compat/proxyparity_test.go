package compat_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	routingv1alpha1 "github.com/detourmq/detour/api/v1alpha1"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// The parity run's topics, one per message.type (the untyped one is NORMAL to the brokers).
const (
	parityUntyped = "DetourGRPCParityUntyped"
	parityNormal  = "DetourGRPCParityNormal"
	parityFIFO    = "DetourGRPCParityFifo"
	parityDelay   = "DetourGRPCParityDelay"
	parityTx      = "DetourGRPCParityTx"
	parityMixed   = "DetourGRPCParityMixed"
	// parityBig takes the large and the GZIP-encoded bodies, which are not read back.
	parityBig = "DetourGRPCParityBig"
)

// parityBrokerMax is the brokers' maxMessageSize in the parity run: 1 MiB, under the Proxy's own
// 4 MiB, so that a body between the two meets the brokers' limit.
const parityBrokerMax = 1 << 20

// parityCase is one raw request, sent alike to the Proxy and to detour's endpoint.
type parityCase struct {
	name string
	// send builds a SendMessage request's messages; id names message i for the side it goes to.
	send func(id func(i int) string) []*rmqpb.Message
	// route is the topic of a QueryRoute, when send and end are nil.
	route string
	// end builds an EndTransaction request.
	end func() *rmqpb.EndTransactionRequest
	// call makes any other call (Heartbeat, Telemetry) and answers its status, or the gRPC
	// status code of a call that failed.
	call func(ctx context.Context, cli rmqpb.MessagingServiceClient) (*rmqpb.Status, codes.Code)
	// visible says an OK answer makes the messages readable from the topic at once (no delivery
	// time ahead); commit says the test commits a transactional send answered OK, which makes
	// it readable.
	visible, commit bool
	// departure, when set, is why detour answers otherwise on purpose: the case must differ.
	departure string
	// canary cases are also sent to detour with the message-type check off.
	canary bool
}

// parityAnswer is one side's answer to a case: its status code, whether its messages were
// stored and readable, and for a route the types its queues accept.
type parityAnswer struct {
	code   rmqpb.Code
	grpc   codes.Code
	msg    string
	stored bool
	types  string
	ids    []string
	topic  string
	txIDs  []string
}

// TestGRPCEndpointAnswersAsTheProxy sends every raw request of parityCases (built with the
// project's stubs, so no SDK filters them) to a real RocketMQ 5.5.0 Proxy and to detour's gRPC
// endpoint, both in front of the same two real 5.5.0 brokers (maxMessageSize 1 MiB), and
// compares each pair of answers: the status code, whether the message was stored (read back from
// the topic by RocketMQ's Java consumer) and, for a route, the message types its queues accept.
// A case listed with a departure must differ (so the list stays true); every other case must
// not. A canary runs the message-type cases once more against detour with that check off, and
// the same comparison must report a difference.
func TestGRPCEndpointAnswersAsTheProxy(t *testing.T) {
	start := time.Now()
	small := rmqtest.BrokerConfig{Settings: map[string]string{"maxMessageSize": strconv.Itoa(parityBrokerMax)}}
	c := rmqtest.Start(t, rmqtest.V5, small, small)
	createParityTopics(t, c)
	rt := grpcRuntimeOf(t, c, parityUntyped, parityNormal, parityFIFO, parityDelay, parityTx, parityMixed, parityBig)
	whole := startManagerServingTheCluster(t, c, parityNormal)
	sides := map[string]rmqpb.MessagingServiceClient{
		"detour": dialPlain(t, serveGRPCWith(t, rt, grpcfront.Options{}, nil)),
		"canary": dialPlain(t, serveGRPCWith(t, rt, grpcfront.Options{SkipMessageTypeCheck: true}, nil)),
		"proxy":  dialPlain(t, c.StartProxy(rmqtest.ProxyOptions{}).Addr),
		// The manager serving the whole cluster: every topic of the cases is undeclared there.
		"undeclared": dialPlain(t, whole.endpoint),
	}
	cases := parityCases()
	if len(cases) < 60 {
		t.Fatalf("%d cases, the differential needs at least 60", len(cases))
	}
	answers := make([]map[string]*parityAnswer, len(cases))
	for i, pc := range cases {
		answers[i] = map[string]*parityAnswer{}
		for _, side := range []string{"proxy", "detour", "canary", "undeclared"} {
			if side == "canary" && !pc.canary {
				continue
			}
			answers[i][side] = askParity(t, sides[side], pc, func(j int) string { return fmt.Sprintf("parity-%02d-%s-%d", i, side, j) })
		}
	}
	for i, pc := range cases {
		t.Logf("answered: %s: detour %s, proxy %s (%.160s)", pc.name, p2s(answers[i]["detour"]), p2s(answers[i]["proxy"]), answers[i]["proxy"].msg)
	}
	readBackParity(t, c, cases, answers)

	differ, canaryDiffs := 0, 0
	for i, pc := range cases {
		p, d := answers[i]["proxy"], answers[i]["detour"]
		t.Logf("| %s | detour %s | proxy %s |%s", pc.name, p2s(d), p2s(p), departureNote(pc))
		if parityJudge(t, "detour", pc, p, d) {
			differ++
		}
		parityJudge(t, "detour serving the topic undeclared", pc, p, answers[i]["undeclared"])
		if cn := answers[i]["canary"]; cn != nil {
			if diff := parityDiff(p, cn); diff != "" {
				t.Logf("the canary differs on %s: %s", pc.name, diff)
				canaryDiffs++
			}
		}
	}
	if canaryDiffs == 0 {
		t.Error("the canary (detour without the message-type check) answered every case as the Proxy: the comparison cannot fail")
	}
	undeclaredParity(t, sides, whole)
	t.Logf("%d cases, %d deliberate departures, canary differences %d; wall time %v", len(cases), differ, canaryDiffs, time.Since(start).Round(time.Second))
}

// parityJudge compares side's answer d to the Proxy's p for a case: a case listed with a
// departure must differ, any other must not. It reports whether they differ.
func parityJudge(t *testing.T, side string, pc parityCase, p, d *parityAnswer) bool {
	t.Helper()
	diff := parityDiff(p, d)
	switch {
	case diff != "" && pc.departure == "":
		t.Errorf("%s: %s departs from the Proxy: %s\n  %s: %s\n  proxy: %s", pc.name, side, diff, side, d.msg, p.msg)
	case diff == "" && pc.departure != "":
		t.Errorf("%s: listed as a departure (%s) but %s now answers as the Proxy", pc.name, pc.departure, side)
	}
	return diff != ""
}

// undeclaredParity asks the cases only a topic nobody declares raises of the Proxy and of the
// manager serving the cluster's undeclared topics: routes and Settings of a topic no broker
// has and of a system topic every broker has. Its canary: once the Cluster serves declared topics
// only, the manager's answer to a NORMAL topic's route must differ from the Proxy's.
func undeclaredParity(t *testing.T, sides map[string]rmqpb.MessagingServiceClient, whole *servedCluster) {
	t.Helper()
	const none = "DetourGRPCParityNowhere"
	cases := []parityCase{
		{name: "undeclared: route of a topic no broker has", route: none},
		{name: "undeclared: route of a system topic every broker has", route: "TBW102"},
		{name: "undeclared: producer Settings publishing a topic no broker has", call: parityTelemetry(none)},
		{name: "undeclared: route of a NORMAL topic", route: parityNormal},
	}
	for i, pc := range cases {
		id := func(j int) string { return fmt.Sprintf("parity-undeclared-%02d-%d", i, j) }
		p, d := askParity(t, sides["proxy"], pc, id), askParity(t, sides["undeclared"], pc, id)
		t.Logf("| %s | detour %s | proxy %s | (%.160s / %.160s)", pc.name, p2s(d), p2s(p), d.msg, p.msg)
		parityJudge(t, "detour serving the topic undeclared", pc, p, d)
	}
	whole.setUndeclaredTopics(t, routingv1alpha1.UndeclaredTopicsRefuse)
	canary := cases[len(cases)-1]
	p := askParity(t, sides["proxy"], canary, nil)
	waitFor(t, 30*time.Second, "the canary: a Cluster serving declared topics only answering otherwise than the Proxy", func() bool {
		return parityDiff(p, askParity(t, sides["undeclared"], canary, nil)) != ""
	})
}

// createParityTopics creates the run's topics on both brokers, each with its message.type but
// the untyped one. The typed ones are created as the Topic controller creates them (the runtime's
// CreateTopic with WithMessageType), and each broker's own configuration must then carry the type:
// the differential reads it there, and would pass alike if neither side found one.
func createParityTopics(t *testing.T, c *rmqtest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	typed := map[string]string{parityNormal: "NORMAL", parityFIFO: "FIFO", parityDelay: "DELAY", parityTx: "TRANSACTION", parityMixed: "MIXED"}
	rt := producer.New(producer.Options{})
	defer rt.Close()
	wire := remoting.NewClient(remoting.ClientOptions{})
	defer wire.Close()
	for _, b := range c.Brokers() {
		for _, topic := range []string{parityUntyped, parityBig} {
			if err := b.CreateTopic(ctx, topic, 2); err != nil {
				t.Fatal(err)
			}
		}
		for topic, typ := range typed {
			if err := rt.CreateTopic(ctx, b.Addr, topic, 2, 2, int(remoting.PermReadWrite), producer.WithMessageType(typ)); err != nil {
				t.Fatal(err)
			}
			resp, err := wire.Invoke(ctx, b.Addr, remoting.NewGetTopicConfigRequest(topic))
			if err != nil {
				t.Fatal(err)
			}
			tc, err := remoting.ParseTopicConfig(resp)
			if err != nil || tc.Attributes[remoting.AttributeMessageType] != typ {
				t.Fatalf("%s on %s after CreateTopic with message type %s: attributes %v, %v", topic, b.Name, typ, tc.Attributes, err)
			}
		}
	}
}

// grpcRuntimeOf is a runtime routing the existing topics as the name server has them.
func grpcRuntimeOf(t *testing.T, c *rmqtest.Cluster, topics ...string) *producer.Runtime {
	t.Helper()
	r := producer.New(producer.Options{ProducerGroup: "detour_compat_parity"})
	t.Cleanup(func() { _ = r.Close() })
	if err := r.SetPolicy(contentPolicy("parity")); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		if err := r.SetNameServerRoute(producer.NameServerRoute{Topic: topic, NameServers: []string{c.NameServer()}, Policy: "parity"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the route of "+topic+" from the name server", func() bool {
			info, _ := r.RouteInfo(topic)
			return len(info.Brokers) == len(c.Brokers())
		})
	}
	return r
}

// dialPlain is a client of a gRPC endpoint in plaintext (the Proxy serves plaintext beside TLS).
func dialPlain(t *testing.T, addr string) rmqpb.MessagingServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rmqpb.NewMessagingServiceClient(conn)
}

// parityCall is a call's context with the metadata every RocketMQ 5 client sends.
func parityCall() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "parity@"+strconv.Itoa(os.Getpid()),
		"x-mq-language", "JAVA", "x-mq-protocol", "v2", "x-mq-client-version", "parity"), cancel
}

// askParity sends one case to one side and notes its answer; a transactional send answered OK
// is committed when the case says so.
func askParity(t *testing.T, cli rmqpb.MessagingServiceClient, pc parityCase, id func(int) string) *parityAnswer {
	t.Helper()
	ctx, cancel := parityCall()
	defer cancel()
	a := &parityAnswer{}
	switch {
	case pc.send != nil:
		msgs := pc.send(id)
		resp, err := cli.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: msgs})
		if err != nil {
			t.Fatalf("%s: the call failed: %v", pc.name, err)
		}
		a.code, a.msg = resp.GetStatus().GetCode(), resp.GetStatus().GetMessage()
		for _, m := range msgs {
			a.ids = append(a.ids, m.GetSystemProperties().GetMessageId())
			a.topic = m.GetTopic().GetName()
		}
		for _, e := range resp.GetEntries() {
			a.txIDs = append(a.txIDs, e.GetTransactionId())
		}
		if pc.commit && a.code == rmqpb.Code_OK {
			commitParity(t, ctx, cli, pc, a)
		}
	case pc.call != nil:
		st, gc := pc.call(ctx, cli)
		a.code, a.msg, a.grpc = st.GetCode(), st.GetMessage(), gc
	case pc.end != nil:
		resp, err := cli.EndTransaction(ctx, pc.end())
		if err != nil {
			t.Fatalf("%s: the call failed: %v", pc.name, err)
		}
		a.code, a.msg = resp.GetStatus().GetCode(), resp.GetStatus().GetMessage()
	default:
		resp, err := cli.QueryRoute(ctx, &rmqpb.QueryRouteRequest{Topic: &rmqpb.Resource{Name: pc.route},
			Endpoints: &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_IPv4, Addresses: []*rmqpb.Address{{Host: "127.0.0.1", Port: 8081}}}})
		if err != nil {
			t.Fatalf("%s: the call failed: %v", pc.name, err)
		}
		a.code, a.msg = resp.GetStatus().GetCode(), resp.GetStatus().GetMessage()
		if qs := resp.GetMessageQueues(); len(qs) > 0 {
			var types []string
			for _, mt := range qs[0].GetAcceptMessageTypes() {
				types = append(types, mt.String())
			}
			slices.Sort(types)
			a.types = strings.Join(types, ",")
		}
	}
	return a
}

// commitParity commits the half message a case's send stored.
func commitParity(t *testing.T, ctx context.Context, cli rmqpb.MessagingServiceClient, pc parityCase, a *parityAnswer) {
	t.Helper()
	resp, err := cli.EndTransaction(ctx, &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: a.topic},
		MessageId: a.ids[0], TransactionId: a.txIDs[0], Resolution: rmqpb.TransactionResolution_COMMIT,
		Source: rmqpb.TransactionSource_SOURCE_CLIENT})
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("%s: committing %s: %v %v", pc.name, a.ids[0], resp.GetStatus(), err)
	}
}

// readBackParity reads every topic a visible case sent to, expecting the messages whose sends
// were answered OK, and marks each answer stored when one of its messages was read.
func readBackParity(t *testing.T, c *rmqtest.Cluster, cases []parityCase, answers []map[string]*parityAnswer) {
	t.Helper()
	expect := map[string]int{}
	for i, pc := range cases {
		for _, a := range answers[i] {
			if (pc.visible || pc.commit) && a.code == rmqpb.Code_OK {
				expect[a.topic] += len(a.ids)
			}
		}
	}
	read := map[string]bool{}
	for _, topic := range slices.Sorted(maps.Keys(expect)) {
		// A send answered OK whose message never shows is a finding, not a reason to stop: the
		// topic is read for what it holds, and the table shows which answer it belies.
		held := awaitHeld(t, c, topic, expect[topic])
		if held < int64(expect[topic]) {
			t.Errorf("%s holds %d messages, but %d sends to it were answered OK", topic, held, expect[topic])
		}
		msgs, err := c.ConsumeRead(t, context.Background(), topic, int(held), time.Minute)
		if err != nil {
			t.Errorf("%s: %v", topic, err)
		}
		for _, m := range msgs {
			read[m.MsgID] = true
		}
	}
	for i, pc := range cases {
		for side, a := range answers[i] {
			for _, id := range a.ids {
				if a.code == rmqpb.Code_OK && (pc.visible || pc.commit) && !read[id] {
					t.Logf("%s: %s answered OK, but %s was not read back", pc.name, side, id)
				}
			}
		}
	}
	for i := range cases {
		for _, a := range answers[i] {
			for _, id := range a.ids {
				a.stored = a.stored || read[id]
			}
		}
	}
}

// awaitHeld waits up to a minute for topic's queues to hold want messages (a message delivered
// by the brokers' timer arrives late) and returns how many they hold.
func awaitHeld(t *testing.T, c *rmqtest.Cluster, topic string, want int) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		held, _ := storedTotal(t, c, topic)
		if held >= int64(want) || time.Now().After(deadline) {
			return held
		}
		<-tick.C
	}
}

// parityDiff says how two answers differ, "" when they do not.
func parityDiff(p, d *parityAnswer) string {
	var out []string
	if p.grpc != d.grpc {
		out = append(out, fmt.Sprintf("gRPC status %s, the Proxy's %s", d.grpc, p.grpc))
	}
	if p.code != d.code {
		out = append(out, fmt.Sprintf("code %s, the Proxy's %s", d.code, p.code))
	}
	if p.stored != d.stored {
		out = append(out, fmt.Sprintf("stored %v, the Proxy's %v", d.stored, p.stored))
	}
	if p.types != d.types {
		out = append(out, fmt.Sprintf("accepts %s, the Proxy's %s", d.types, p.types))
	}
	return strings.Join(out, "; ")
}

// p2s is an answer as the log's table shows it.
func p2s(a *parityAnswer) string {
	s := fmt.Sprintf("%d %s", int32(a.code), a.code)
	if a.grpc != codes.OK {
		s = "gRPC " + a.grpc.String()
	}
	if a.stored {
		s += ", stored"
	}
	if a.types != "" {
		s += " [" + a.types + "]"
	}
	return s
}

func departureNote(pc parityCase) string {
	if pc.departure == "" {
		return ""
	}
	return " departure: " + pc.departure
}

// pm is a message as RocketMQ 5's clients build it: NORMAL, an identity-encoded body.
func pm(topic, id string, body []byte) *rmqpb.Message {
	return &rmqpb.Message{Topic: &rmqpb.Resource{Name: topic}, Body: body,
		SystemProperties: &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL,
			BodyEncoding: rmqpb.Encoding_IDENTITY, BornTimestamp: timestamppb.Now(), BornHost: "127.0.0.1"}}
}

// one is a case's request of one message, built by pm and changed by edit.
func one(topic string, edit func(m *rmqpb.Message)) func(func(int) string) []*rmqpb.Message {
	return func(id func(int) string) []*rmqpb.Message {
		m := pm(topic, id(0), []byte("parity"))
		if edit != nil {
			edit(m)
		}
		return []*rmqpb.Message{m}
	}
}

// randomBody is n bytes that do not compress.
func randomBody(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// gzipped is b compressed as a client marks GZIP.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// Departures detour keeps on purpose, each with its reason.
const (
	departEmptyProperty = "a broker drops a property with an empty name or value from the stored message, so the Proxy's OK loses it without a word; detour refuses it (ILLEGAL_MESSAGE_PROPERTY_KEY)"
	departBlankProperty = "detour's runtime keeps Java's Message.putUserProperty rule for every door: a name or value of only whitespace is refused (ILLEGAL_MESSAGE_PROPERTY_KEY)"
	departBrokerLimit   = "the Proxy passes a body over the brokers' maxMessageSize on and answers the broker's refusal as INTERNAL_SERVER_ERROR, which clients retry; detour checks it first and answers MESSAGE_BODY_TOO_LARGE"
	departGroupAndDelay = "detour sends a message either on its group's queue (FIFO) or at its delivery time, not both: the Proxy stores it as a delay message and its group's order is lost"
	departTxWithGroup   = "a transactional message with a message group: the Proxy stores it with the group ignored for its queue; detour refuses what it cannot send as asked"
	departTypedBatch    = "a batch is stored at once on one queue, so detour sends FIFO, delay and transactional messages one per request; the Proxy stores a batch of FIFO messages ignoring their group"
	departMadeUpTxID    = "an id detour never issued can never be ended: detour says INVALID_TRANSACTION_ID, the Proxy INTERNAL_SERVER_ERROR (transaction data not found), which invites retries"
	departUnknownTopic  = "a topic detour does not serve is TOPIC_NOT_FOUND before anything else"
	departHeartbeat     = "detour keeps no state per producer: a producer's heartbeat is OK with or without its Telemetry stream; the Proxy answers UNRECOGNIZED_CLIENT_TYPE until the stream's Settings came"
)

// parityCases is the table: every class of the Proxy's rules, each with requests it takes and
// requests it refuses.
func parityCases() []parityCase {
	future := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(time.Now().Add(d)) }
	withTag := func(tag string) func(*rmqpb.Message) { return func(m *rmqpb.Message) { m.SystemProperties.Tag = &tag } }
	withKeys := func(keys ...string) func(*rmqpb.Message) {
		return func(m *rmqpb.Message) { m.SystemProperties.Keys = keys }
	}
	withProps := func(kv map[string]string) func(*rmqpb.Message) {
		return func(m *rmqpb.Message) { m.UserProperties = kv }
	}
	withGroup := func(g string) func(*rmqpb.Message) {
		return func(m *rmqpb.Message) {
			m.SystemProperties.MessageGroup = &g
			m.SystemProperties.MessageType = rmqpb.MessageType_FIFO
		}
	}
	withDelay := func(d time.Duration) func(*rmqpb.Message) {
		return func(m *rmqpb.Message) {
			m.SystemProperties.DeliveryTimestamp = future(d)
			m.SystemProperties.MessageType = rmqpb.MessageType_DELAY
		}
	}
	asTx := func(m *rmqpb.Message) { m.SystemProperties.MessageType = rmqpb.MessageType_TRANSACTION }
	withBody := func(b []byte) func(*rmqpb.Message) { return func(m *rmqpb.Message) { m.Body = b } }
	manyProps := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			out["p"+strconv.Itoa(i)] = "v"
		}
		return out
	}
	both := func(edits ...func(*rmqpb.Message)) func(*rmqpb.Message) {
		return func(m *rmqpb.Message) {
			for _, e := range edits {
				e(m)
			}
		}
	}
	batch := func(topics ...string) func(func(int) string) []*rmqpb.Message {
		return func(id func(int) string) []*rmqpb.Message {
			var out []*rmqpb.Message
			for i, tp := range topics {
				out = append(out, pm(tp, id(i), []byte("batched")))
			}
			return out
		}
	}
	U, N, F, D, X, M, B := parityUntyped, parityNormal, parityFIFO, parityDelay, parityTx, parityMixed, parityBig
	cases := []parityCase{
		// Topics.
		{name: "topic with a space and a slash", send: one("Gs Bad/Topic", nil)},
		{name: "blank topic", send: one("", nil)},
		{name: "topic of 128 characters", send: one(strings.Repeat("T", 128), nil)},
		{name: "system topic rmq_sys_x", send: one("rmq_sys_x", nil)},
		{name: "system topic TBW102", send: one("TBW102", nil)},
		{name: "topic no broker has", send: one("DetourGRPCParityNone", nil), departure: departUnknownTopic},
		// The request.
		{name: "empty request", send: func(func(int) string) []*rmqpb.Message { return nil }},
		{name: "batch of two on one topic", send: batch(U, U), visible: true},
		{name: "batch over two topics", send: batch(U, N)},
		{name: "batch of FIFO messages on a FIFO topic", send: func(id func(int) string) []*rmqpb.Message {
			g := "g1"
			out := []*rmqpb.Message{pm(F, id(0), []byte("a")), pm(F, id(1), []byte("b"))}
			for _, m := range out {
				m.SystemProperties.MessageGroup, m.SystemProperties.MessageType = &g, rmqpb.MessageType_FIFO
			}
			return out
		}, visible: true, departure: departTypedBatch},
		{name: "batch whose second message has a bad tag", send: func(id func(int) string) []*rmqpb.Message {
			bad := "a|b"
			out := []*rmqpb.Message{pm(U, id(0), []byte("a")), pm(U, id(1), []byte("b"))}
			out[1].SystemProperties.Tag = &bad
			return out
		}},
		// Message ids.
		{name: "empty message id", send: func(func(int) string) []*rmqpb.Message { return []*rmqpb.Message{pm(U, "", []byte("x"))} }},
		{name: "blank message id", send: func(func(int) string) []*rmqpb.Message { return []*rmqpb.Message{pm(U, "   ", []byte("x"))} }},
		// Bodies.
		{name: "body of 1 byte", send: one(U, withBody([]byte("x"))), visible: true},
		{name: "empty body", send: one(U, withBody([]byte{}))},
		{name: "body of 1 MiB - 4 KiB", send: one(B, withBody(randomBody(parityBrokerMax-4096)))},
		{name: "1.5 MiB compressible body, brokers' maxMessageSize 1 MiB", send: one(B, withBody(bytes.Repeat([]byte("a"), 3<<19))), departure: departBrokerLimit},
		{name: "1.5 MiB random body, brokers' maxMessageSize 1 MiB", send: one(B, withBody(randomBody(3<<19))), departure: departBrokerLimit},
		{name: "5 MiB body, over the Proxy's 4 MiB", send: one(B, withBody(randomBody(5<<20)))},
		// Not read back: the Proxy stores a GZIP body as sent, marked compressed, which RocketMQ's
		// Java consumer cannot inflate (it reads such bodies as zlib), and its queue stops there.
		{name: "GZIP-encoded body", send: one(B, func(m *rmqpb.Message) {
			m.Body = gzipped(bytes.Repeat([]byte("z"), 8192))
			m.SystemProperties.BodyEncoding = rmqpb.Encoding_GZIP
		})},
		// Tags.
		{name: "plain tag", send: one(U, withTag("TagA")), visible: true},
		{name: "tag with a space inside", send: one(U, withTag("a b")), visible: true},
		{name: "tag in Chinese", send: one(U, withTag("标签")), visible: true},
		{name: "tag a|b", send: one(U, withTag("a|b"))},
		{name: "tag of one space", send: one(U, withTag(" "))},
		{name: "tag of a tab", send: one(U, withTag("\t"))},
		{name: "tag with 0x01", send: one(U, withTag("a\x01b"))},
		{name: "tag with DEL", send: one(U, withTag("a\x7fb"))},
		{name: "tag with U+0085", send: one(U, withTag("a\u0085b"))},
		// Keys.
		{name: "two keys", send: one(U, withKeys("k1", "k2")), visible: true},
		{name: "an empty key beside one", send: one(U, withKeys("", "k")), visible: true},
		{name: "key of one space", send: one(U, withKeys(" "))},
		{name: "key with NUL", send: one(U, withKeys("k\x00"))},
		{name: "key with a newline", send: one(U, withKeys("k\nv"))},
		// User properties.
		{name: "one user property", send: one(U, withProps(map[string]string{"color": "red"})), visible: true},
		{name: "user property in Chinese", send: one(U, withProps(map[string]string{"颜色": "红"})), visible: true},
		{name: "user property with an empty value", send: one(U, withProps(map[string]string{"a": ""})), visible: true, departure: departEmptyProperty},
		{name: "user property with an empty name", send: one(U, withProps(map[string]string{"": "v"})), visible: true, departure: departEmptyProperty},
		{name: "user property with a value of one space", send: one(U, withProps(map[string]string{"a": " "})), visible: true, departure: departBlankProperty},
		{name: "reserved property TAGS", send: one(U, withProps(map[string]string{"TAGS": "x"}))},
		{name: "reserved property UNIQ_KEY", send: one(U, withProps(map[string]string{"UNIQ_KEY": "x"}))},
		{name: "reserved property DELAY", send: one(U, withProps(map[string]string{"DELAY": "3"}))},
		{name: "reserved property TRAN_MSG", send: one(U, withProps(map[string]string{"TRAN_MSG": "true"}))},
		{name: "property name with 0x02", send: one(U, withProps(map[string]string{"a\x02b": "v"}))},
		{name: "property value with 0x01", send: one(U, withProps(map[string]string{"a": "x\x01TRAN_MSG"}))},
		{name: "property value with 0x1f", send: one(U, withProps(map[string]string{"a": "x\x1f"}))},
		{name: "128 user properties", send: one(U, withProps(manyProps(128))), visible: true},
		{name: "129 user properties", send: one(U, withProps(manyProps(129)))},
		{name: "user properties over 16 KiB", send: one(U, withProps(map[string]string{"big": strings.Repeat("v", 16<<10)}))},
		{name: "tag and keys over 16 KiB together", send: one(U, both(withTag(strings.Repeat("t", 9<<10)), withKeys(strings.Repeat("k", 8<<10))))},
		// Message groups.
		{name: "FIFO on a FIFO topic", send: one(F, withGroup("g")), visible: true},
		{name: "message group of 63 bytes", send: one(F, withGroup(strings.Repeat("g", 63))), visible: true},
		{name: "message group of 64 bytes", send: one(F, withGroup(strings.Repeat("g", 64)))},
		{name: "message group of 65 bytes", send: one(F, withGroup(strings.Repeat("g", 65)))},
		{name: "message group of one space", send: one(F, withGroup(" "))},
		{name: "message group with a newline", send: one(F, withGroup("g\nh"))},
		{name: "FIFO type without a group on a FIFO topic", send: one(F, func(m *rmqpb.Message) { m.SystemProperties.MessageType = rmqpb.MessageType_FIFO })},
		{name: "NORMAL type with a group on a FIFO topic", send: one(F, func(m *rmqpb.Message) {
			g := "g"
			m.SystemProperties.MessageGroup = &g
		}), visible: true},
		// Delivery times.
		{name: "delivery time past, DELAY topic", send: one(D, withDelay(-time.Minute)), visible: true},
		{name: "delivery time 1 h ahead, DELAY topic", send: one(D, withDelay(time.Hour))},
		{name: "delivery time 23 h ahead", send: one(D, withDelay(23*time.Hour))},
		{name: "delivery time 25 h ahead", send: one(D, withDelay(25*time.Hour))},
		{name: "delivery time 80 h ahead", send: one(D, withDelay(80*time.Hour))},
		{name: "group and delivery time, MIXED topic", send: one(M, both(withGroup("g"), withDelay(time.Hour))), departure: departGroupAndDelay},
		// Message type against the topic's message.type.
		{name: "NORMAL on an untyped topic", send: one(U, nil), visible: true, canary: true},
		{name: "NORMAL on a NORMAL topic", send: one(N, nil), visible: true, canary: true},
		{name: "FIFO on an untyped topic", send: one(U, withGroup("g")), visible: true, canary: true},
		{name: "FIFO on a NORMAL topic", send: one(N, withGroup("g")), visible: true, canary: true},
		{name: "DELAY on a NORMAL topic", send: one(N, withDelay(time.Hour)), canary: true},
		{name: "TRANSACTION on a NORMAL topic", send: one(N, asTx), commit: true, canary: true},
		{name: "NORMAL on a FIFO topic", send: one(F, nil), visible: true, canary: true},
		{name: "DELAY on a FIFO topic", send: one(F, withDelay(time.Hour)), canary: true},
		{name: "NORMAL on a DELAY topic", send: one(D, nil), visible: true, canary: true},
		{name: "NORMAL on a TRANSACTION topic", send: one(X, nil), visible: true, canary: true},
		{name: "TRANSACTION on a TRANSACTION topic", send: one(X, asTx), commit: true},
		{name: "TRANSACTION with recovery 30 s", send: one(X, both(asTx, func(m *rmqpb.Message) {
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(30 * time.Second)
		})), commit: true},
		{name: "TRANSACTION with recovery 2 h", send: one(X, both(asTx, func(m *rmqpb.Message) {
			m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(2 * time.Hour)
		}))},
		{name: "TRANSACTION with a message group", send: one(X, both(withGroup("g"), asTx)), commit: true, departure: departTxWithGroup},
		{name: "NORMAL on a MIXED topic", send: one(M, nil), visible: true},
		{name: "FIFO on a MIXED topic", send: one(M, withGroup("g")), visible: true},
		{name: "DELAY on a MIXED topic", send: one(M, withDelay(time.Hour))},
		{name: "TRANSACTION on a MIXED topic", send: one(M, asTx), commit: true},
		// Routes.
		{name: "route of an untyped topic", route: U},
		{name: "route of a NORMAL topic", route: N},
		{name: "route of a FIFO topic", route: F},
		{name: "route of a DELAY topic", route: D},
		{name: "route of a TRANSACTION topic", route: X},
		{name: "route of a MIXED topic", route: M},
		{name: "route of an illegal topic", route: "Gs Bad/Topic"},
		{name: "route of a system topic", route: "rmq_sys_x"},
		// Heartbeats and Telemetry Settings.
		{name: "producer heartbeat without Settings", call: func(ctx context.Context, cli rmqpb.MessagingServiceClient) (*rmqpb.Status, codes.Code) {
			resp, err := cli.Heartbeat(ctx, &rmqpb.HeartbeatRequest{ClientType: rmqpb.ClientType_PRODUCER})
			return resp.GetStatus(), status.Code(err)
		}, departure: departHeartbeat},
		{name: "producer Settings publishing a topic", call: parityTelemetry(U)},
		{name: "producer Settings publishing an illegal topic", call: parityTelemetry("Gs Bad/Topic")},
		{name: "producer Settings publishing a system topic", call: parityTelemetry("rmq_sys_x")},
		// Ending transactions.
		{name: "end with a made-up transaction id", end: func() *rmqpb.EndTransactionRequest {
			return &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: X}, MessageId: "parity-made-up", TransactionId: "7F0000010000000000000001",
				Resolution: rmqpb.TransactionResolution_COMMIT, Source: rmqpb.TransactionSource_SOURCE_CLIENT}
		}, departure: departMadeUpTxID},
		{name: "end with an empty transaction id", end: func() *rmqpb.EndTransactionRequest {
			return &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: X}, MessageId: "parity-empty",
				Resolution: rmqpb.TransactionResolution_COMMIT}
		}},
		{name: "end with a blank transaction id", end: func() *rmqpb.EndTransactionRequest {
			return &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: X}, MessageId: "parity-blank", TransactionId: "  ",
				Resolution: rmqpb.TransactionResolution_ROLLBACK}
		}},
		{name: "end on an illegal topic", end: func() *rmqpb.EndTransactionRequest {
			return &rmqpb.EndTransactionRequest{Topic: &rmqpb.Resource{Name: "Gs Bad/Topic"}, MessageId: "parity-topic", TransactionId: "x",
				Resolution: rmqpb.TransactionResolution_COMMIT}
		}},
	}
	return cases
}

// parityTelemetry opens a Telemetry stream, sends a producer's Settings publishing topic and
// answers the first command's status, or the stream's gRPC status when it ends instead.
func parityTelemetry(topic string) func(context.Context, rmqpb.MessagingServiceClient) (*rmqpb.Status, codes.Code) {
	return func(ctx context.Context, cli rmqpb.MessagingServiceClient) (*rmqpb.Status, codes.Code) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := cli.Telemetry(ctx)
		if err != nil {
			return nil, status.Code(err)
		}
		err = stream.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
			ClientType: rmqpb.ClientType_PRODUCER.Enum(),
			AccessPoint: &rmqpb.Endpoints{Scheme: rmqpb.AddressScheme_IPv4,
				Addresses: []*rmqpb.Address{{Host: "127.0.0.1", Port: 8081}}},
			RequestTimeout: durationpb.New(3 * time.Second),
			PubSub:         &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}},
		}}})
		if err != nil {
			return nil, status.Code(err)
		}
		cmd, err := stream.Recv()
		if err != nil {
			return &rmqpb.Status{Message: err.Error()}, status.Code(err)
		}
		return cmd.GetStatus(), codes.OK
	}
}
