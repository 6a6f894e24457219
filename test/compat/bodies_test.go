package compat_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
	"github.com/detourmq/detour/pkg/rmqpb"
)

// Topics of the read-back run: bodies stored through the endpoint, and the canary's, the same
// messages stored as the endpoint stored them before it kept bodies as sent.
const (
	bodiesTopic       = "DetourGRPCBodies"
	bodiesCanaryTopic = "DetourGRPCBodiesCanary"
	bodiesTag         = "bodies"
)

// sentBody is one message of the read-back run as its producer sent it.
type sentBody struct {
	id, name, topic string
	body            []byte
	keys            []string
	props           map[string]string
}

// bodyCases are the read-back run's bodies: around the runtime's 4 KiB compression threshold and
// just under 1 MiB, each as text (which zlib shrinks) and as random bytes (which it does not).
func bodyCases(t *testing.T) []sentBody {
	t.Helper()
	var out []sentBody
	for _, n := range []int{1, producer.DefaultCompressThreshold - 1, producer.DefaultCompressThreshold, 1<<20 - 1} {
		random := make([]byte, n)
		if _, err := rand.Read(random); err != nil {
			t.Fatal(err)
		}
		text := bytes.Repeat([]byte("every consumer reads this body back; "), n/37+1)[:n]
		for _, c := range []struct {
			kind string
			body []byte
		}{{"text", text}, {"random", random}} {
			name := fmt.Sprintf("%s-%d", c.kind, n)
			out = append(out, sentBody{name: name, body: c.body, keys: []string{"key-" + name, "second-key"},
				props: map[string]string{"detour-case": name, "detour-note": "user property of " + name}})
		}
	}
	return out
}

// newMessageID is a message id of the form RocketMQ 5's SDKs make (version 01, 17 bytes in hex).
func newMessageID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "01" + strings.ToUpper(hex.EncodeToString(b))
}

// sendRaw stores msgs through the endpoint at addr with raw SendMessage requests, one message
// each, built with the project's own stubs as an SDK would send them (body_encoding IDENTITY).
func sendRaw(t *testing.T, addr string, msgs []sentBody) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rmqpb.NewMessagingServiceClient(conn)
	for _, m := range msgs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "detour-compat-bodies@1", "x-mq-language", "GOLANG")
		tag := bodiesTag
		resp, err := client.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
			Topic: &rmqpb.Resource{Name: m.topic}, Body: m.body, UserProperties: m.props,
			SystemProperties: &rmqpb.SystemProperties{MessageId: m.id, Tag: &tag, Keys: m.keys,
				MessageType: rmqpb.MessageType_NORMAL, BodyEncoding: rmqpb.Encoding_IDENTITY},
		}}})
		cancel()
		if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
			t.Fatalf("SendMessage of %s: %v %v", m.name, err, resp.GetStatus())
		}
	}
}

// sendAsBefore stores msgs the way the endpoint stored them before it kept bodies as sent: by the
// runtime's default, which compresses a body from 4 KiB that zlib shrinks.
func sendAsBefore(t *testing.T, rt *producer.Runtime, msgs []sentBody) {
	t.Helper()
	for _, m := range msgs {
		props := maps.Clone(m.props)
		props[remoting.PropertyUniqKey] = m.id
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := rt.Send(ctx, &producer.Message{Topic: m.topic, Tags: bodiesTag, Keys: strings.Join(m.keys, " "), Body: m.body, Properties: props})
		cancel()
		if err != nil {
			t.Fatalf("send of %s: %v", m.name, err)
		}
	}
}

// readerOutcome is what one reader made of one topic's messages: how many it read intact, what
// was wrong with the others (never read, a wrong body, tag, key or property, read twice), and
// which arrived GZIP-encoded, that is stored compressed (through the Proxy alone an SDK's body is
// stored and handed on as sent).
type readerOutcome struct {
	intact   int
	problems []string
	encoded  []string
}

// judgeReads sorts a run's lines by reader and topic and checks each message read against what
// was sent: body (length and SHA-256), tag, keys and user properties, each message once. A
// message never read is a problem of its reader too. Failed receives are returned by reader:
// a client may retry a receive that failed, so only its messages are judged.
func judgeReads(sent map[string]sentBody, readers []string, reads []rmqtest.GRPCRead) (map[string]map[string]*readerOutcome, map[string][]string) {
	out := map[string]map[string]*readerOutcome{}
	for _, r := range readers {
		out[r] = map[string]*readerOutcome{bodiesTopic: {}, bodiesCanaryTopic: {}}
	}
	failed := map[string][]string{}
	seen := map[string]bool{}
	for _, r := range reads {
		if r.Kind != "received" {
			failed[r.Reader] = append(failed[r.Reader], r.Kind+": "+r.Error)
			continue
		}
		want, ok := sent[r.MsgID]
		if !ok {
			continue // a message of a topic this judgement does not cover
		}
		o := out[r.Reader][want.topic]
		key := r.Reader + "/" + r.MsgID
		if p := readProblem(want, r, seen[key]); p != "" {
			o.problems = append(o.problems, want.name+": "+p)
		} else {
			o.intact++
		}
		if r.Encoding != "" && r.Encoding != rmqpb.Encoding_IDENTITY.String() {
			o.encoded = append(o.encoded, want.name+": arrived "+r.Encoding)
		}
		seen[key] = true
	}
	for _, r := range readers {
		for _, m := range sent {
			if !seen[r+"/"+m.id] {
				out[r][m.topic].problems = append(out[r][m.topic].problems, m.name+": never read")
			}
		}
	}
	return out, failed
}

// readProblem is what is wrong with r, a read of want, or "" when it is intact. Keys are compared
// as a set: the Python client keeps a message's keys in one.
func readProblem(want sentBody, r rmqtest.GRPCRead, again bool) string {
	sum := sha256.Sum256(want.body)
	switch {
	case again:
		return "read twice"
	case r.BodyLen != len(want.body) || r.BodySHA256 != hex.EncodeToString(sum[:]):
		return fmt.Sprintf("body of %d bytes, not the %d sent", r.BodyLen, len(want.body))
	case r.Tag != bodiesTag:
		return fmt.Sprintf("tag %q", r.Tag)
	case !slices.Equal(slices.Sorted(slices.Values(r.Keys)), slices.Sorted(slices.Values(want.keys))):
		return fmt.Sprintf("keys %q, want %q", r.Keys, want.keys)
	}
	for k, v := range want.props {
		if r.Props[k] != v {
			return fmt.Sprintf("user property %s = %q, want %q", k, r.Props[k], v)
		}
	}
	return ""
}

// TestBodiesStoredThroughTheEndpointAreReadIntactByEveryConsumer stores messages through detour's
// gRPC endpoint (raw SendMessage, as an SDK sends them) with bodies of 1 B, 4 KiB - 1, 4 KiB and
// 1 MiB - 1, each text and random, with a tag, two keys and user properties, in front of two real
// 5.5.0 brokers, and reads every one back with RocketMQ 5's Java gRPC SDK, RocketMQ's Python
// gRPC client and its Node.js client (SimpleConsumer and PushConsumer each), each through the
// real 5.5.0 Proxy and through detour's endpoint forwarding consumers to that Proxy, and with
// RocketMQ's remoting lite pull consumer from the brokers: every reader gets every body, tag, key
// and user property intact, once, and the Python client sees each body arrive IDENTITY (stored
// plain), as the Proxy stores an SDK's body. The canary stores the same messages as the endpoint
// did before (the runtime's default, compressed from 4 KiB): some reader must fail to read them
// intact (the Node.js client fails every receive that brings a compressed body: "incorrect header
// check"). Readers of one client run in one process, all clients at once, against one cluster and
// one Proxy.
func TestBodiesStoredThroughTheEndpointAreReadIntactByEveryConsumer(t *testing.T) {
	start := time.Now()
	// Before the cluster: a missing client fails at once.
	_, pyVersion := rmqtest.LocatePythonClient(t)
	_, nodeVersion := rmqtest.LocateNodeClient(t)
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
	rt := grpcRuntime(t, c, bodiesTopic, bodiesCanaryTopic)
	px := c.StartProxy(rmqtest.ProxyOptions{})
	addr := serveGRPCWith(t, rt, grpcfront.Options{TLS: selfSignedTLS(t), AllowPlaintext: true},
		&front.Upstream{Addr: px.Addr, TLS: &front.UpstreamTLS{InsecureSkipVerify: true}})
	dir := t.TempDir()

	sent := map[string]sentBody{}
	var through, before []sentBody
	for _, topic := range []string{bodiesTopic, bodiesCanaryTopic} {
		for _, m := range bodyCases(t) {
			m.id, m.topic = newMessageID(t), topic
			sent[m.id] = m
			if topic == bodiesTopic {
				through = append(through, m)
			} else {
				before = append(before, m)
			}
		}
	}
	sendRaw(t, addr, through)
	sendAsBefore(t, rt, before)

	readers, reads := readEverything(t, dir, px.Addr, addr)
	outcome, failed := judgeReads(sent, readers, reads)
	remotingOutcome(t, c, sent, outcome)
	readers = append(readers, remotingReader)
	report(t, readers, outcome, failed, len(through))
	t.Logf("Python client %s, Node.js client %s, Proxy %s; stored and read back in %s",
		pyVersion, nodeVersion, px.Version, time.Since(start).Round(time.Second))
}

// report fails the test for every reader that did not read every body stored through the
// endpoint intact and as sent, and unless the canary's bodies, stored as before, failed some
// reader's read; it logs the table of both.
func report(t *testing.T, readers []string, outcome map[string]map[string]*readerOutcome, failed map[string][]string, n int) {
	t.Helper()
	canaryFailed := false
	var table strings.Builder
	fmt.Fprintf(&table, "%-20s %-22s %-22s %s\n", "reader", "through the endpoint", "canary (as before)", "canary's first problems; failed receives")
	for _, r := range readers {
		o, k := outcome[r][bodiesTopic], outcome[r][bodiesCanaryTopic]
		fmt.Fprintf(&table, "%-20s %d/%d intact, %d encoded  %d/%d intact, %d encoded  %q; %d %q\n", r, o.intact, n, len(o.encoded),
			k.intact, n, len(k.encoded), firstOf(slices.Concat(k.problems, k.encoded), 2), len(failed[r]), firstOf(failed[r], 1))
		if o.intact != n || len(o.problems)+len(o.encoded) > 0 {
			t.Errorf("%s read %d of %d messages stored through the endpoint intact: %q", r, o.intact, n, firstOf(slices.Concat(o.problems, o.encoded), 6))
		}
		canaryFailed = canaryFailed || k.intact < n
	}
	t.Logf("read back:\n%s", table.String())
	if !canaryFailed {
		t.Error("canary: every reader read the messages stored as before intact too, so this test cannot tell the endpoint's storing from it")
	}
}

// readEverything runs every gRPC reader, the Java and the Python ones at once (one process each),
// through the Proxy at proxy and through the endpoint at endpoint, and returns their names and
// what they read.
func readEverything(t *testing.T, dir, proxy, endpoint string) ([]string, []rmqtest.GRPCRead) {
	t.Helper()
	total := 2 * len(bodyCases(t))
	byLang := map[string][]rmqtest.GRPCReader{}
	var names []string
	for _, lang := range []string{"java", "python", "node"} {
		for _, mode := range []string{"simple", "push"} {
			for _, at := range []struct{ name, addr string }{{"proxy", proxy}, {"detour", endpoint}} {
				r := rmqtest.GRPCReader{Name: lang + "-" + mode + "-" + at.name, Mode: mode, Endpoint: at.addr,
					Group: "detour_compat_bodies_" + lang + "_" + mode + "_" + at.name}
				byLang[lang] = append(byLang[lang], r)
				names = append(names, r.Name)
			}
		}
	}
	topics := []string{bodiesTopic, bodiesCanaryTopic}
	runs := map[string]func(rmqtest.TB, string, rmqtest.GRPCReadOptions) []rmqtest.GRPCRead{
		"java": rmqtest.ReadGRPCJava, "python": rmqtest.ReadGRPCPython, "node": rmqtest.ReadGRPCNode}
	// The Node.js client fails every receive that brings a body it cannot decode, so its readers
	// never reach the count when the canary's bodies are compressed; they stop at their timeout.
	timeouts := map[string]time.Duration{"java": 3 * time.Minute, "python": 3 * time.Minute, "node": 90 * time.Second}
	var mu sync.Mutex
	var reads []rmqtest.GRPCRead
	var wg sync.WaitGroup
	for lang, readers := range byLang {
		wg.Go(func() {
			got := runs[lang](t, dir, rmqtest.GRPCReadOptions{Topics: topics, Readers: readers, Count: total, Timeout: timeouts[lang]})
			mu.Lock()
			reads = append(reads, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return names, reads
}

// remotingReader names RocketMQ's remoting lite pull consumer among the readers.
const remotingReader = "remoting-lite-pull"

// remotingOutcome reads both topics from the brokers with RocketMQ's remoting lite pull consumer,
// which inflates a compressed body as every remoting consumer does, and adds its outcome to
// outcome under remotingReader. (It clears the compressed flag of a body it inflates, so the
// stored form is seen through the Python client's wire encoding instead: the Proxy marks a body
// GZIP exactly when the broker holds it compressed.)
func remotingOutcome(t *testing.T, c *rmqtest.Cluster, sent map[string]sentBody, outcome map[string]map[string]*readerOutcome) {
	t.Helper()
	outcome[remotingReader] = map[string]*readerOutcome{}
	for _, topic := range []string{bodiesTopic, bodiesCanaryTopic} {
		var reads []rmqtest.GRPCRead
		for _, m := range c.Consume(t, context.Background(), topic, len(bodyCases(t)), 90*time.Second) {
			sum := sha256.Sum256(m.Body)
			reads = append(reads, rmqtest.GRPCRead{Reader: remotingReader, Kind: "received", MsgID: m.MsgID, Topic: m.Topic, Tag: m.Tags,
				Keys: strings.Fields(m.Keys), Props: m.Properties, BodyLen: len(m.Body), BodySHA256: hex.EncodeToString(sum[:])})
		}
		topicSent := map[string]sentBody{}
		for id, m := range sent {
			if m.topic == topic {
				topicSent[id] = m
			}
		}
		judged, _ := judgeReads(topicSent, []string{remotingReader}, reads)
		outcome[remotingReader][topic] = judged[remotingReader][topic]
	}
}

// firstOf is at most n of s.
func firstOf(s []string, n int) []string {
	return s[:min(n, len(s))]
}
