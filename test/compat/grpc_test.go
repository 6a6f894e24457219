package compat_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	certutil "k8s.io/client-go/util/cert"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// Topics of the gRPC SDK suite: messages (normal and FIFO), delayed messages, and the canary's.
const (
	grpcTopic        = "DetourGRPCJava"
	grpcDelayedTopic = "DetourGRPCJavaDelayed"
	grpcCanaryTopic  = "DetourGRPCJavaCanary"
	grpcSignedTopic  = "DetourGRPCJavaSigned"
	grpcTxTopic      = "DetourGRPCJavaTx"
)

// TestGRPCJavaSDKSendsThroughTheEndpoint runs RocketMQ 5's own gRPC SDK (rocketmq-client-java
// 5.2.0, a producer with the SDK's defaults but its endpoint: TLS on, three attempts) against
// detour's gRPC endpoint, served over TLS only with a self-signed certificate in front of a
// runtime routed from two real 5.5.0 brokers' name server. Every message the SDK has a receipt
// for is read back by RocketMQ's Java consumer under the receipt's message id, with its body,
// exactly once, with its tag and user property, and nothing else is in the topic; the session
// stays healthy across a pause of 12 s (heartbeats, route refresh: nothing in the SDK's log warns); a message group's messages sit on one queue in
// the order sent; a delayed message is not in its topic before the time it asked for; a
// transaction the SDK commits is read back, one it rolls back never reaches the topic, and ones
// it never ends are checked back by the brokers through the endpoint, the SDK's
// TransactionChecker reading each as sent and its verdict settling it (COMMIT read back,
// ROLLBACK never stored). Against an
// endpoint with access keys, the SDK signing with its StaticSessionCredentialsProvider sends with
// the right secret and fails UNAUTHORIZED (40100) with a wrong one, storing nothing. The canary:
// the same SDK against a plaintext-only endpoint sends nothing, so the suite's sends really go
// through the endpoint's TLS.
func TestGRPCJavaSDKSendsThroughTheEndpoint(t *testing.T) {
	c := rmqtest.Start(t, rmqtest.V5, checkBackEvery, checkBackEvery)
	rt := grpcRuntime(t, c, grpcTopic, grpcDelayedTopic, grpcCanaryTopic, grpcSignedTopic, grpcTxTopic)
	tlsCfg := selfSignedTLS(t)
	tlsAddr := serveGRPC(t, rt, tlsCfg, nil)
	dir := t.TempDir()

	t.Run("normal and FIFO messages", func(t *testing.T) {
		const normal, fifo, groups = 20, 30, 3
		run := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: tlsAddr, Topic: grpcTopic,
			Normal: normal, FIFO: fifo, Groups: groups, Pause: 12 * time.Second})
		acked := ackedSends(t, run, normal+fifo)
		got := c.Consume(t, context.Background(), grpcTopic, len(acked), 90*time.Second)
		byID := readBackExactly(t, acked, got)
		last := groupsInOrder(t, acked, byID, groups)
		t.Logf("%d normal and %d FIFO messages sent with the Java gRPC SDK and read back under their receipts' ids; groups on %v", normal, fifo, last)
	})

	t.Run("delayed messages", func(t *testing.T) {
		const delayed, delay = 3, 15 * time.Second
		run := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: tlsAddr, Topic: grpcDelayedTopic,
			Delayed: delayed, Delay: delay})
		acked := ackedSends(t, run, delayed)
		looks := notDeliveredEarly(t, c, grpcDelayedTopic, acked, delay)
		got := c.Consume(t, context.Background(), grpcDelayedTopic, len(acked), 60*time.Second)
		readBackExactly(t, acked, got)
		t.Logf("%d delayed messages, none in the topic before its time at %d looks", len(acked), looks)
	})

	t.Run("transactions committed, rolled back and settled by check-back", func(t *testing.T) {
		tx := transactionCounts{commit: 3, rollback: 3, orphanCommit: 2, orphanRollback: 1}
		run := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: tlsAddr, Topic: grpcTxTopic, Commit: tx.commit, Rollback: tx.rollback,
			OrphanCommit: tx.orphanCommit, OrphanRollback: tx.orphanRollback})
		tx.check(t, c, grpcTxTopic, run)
	})

	t.Run("signed with the SDK's credentials provider", func(t *testing.T) {
		keys := grpcfront.StaticAccessKeys{"detour-compat": {Secret: "compat-secret", Topics: []string{grpcSignedTopic}}}
		signedAddr := serveGRPC(t, rt, tlsCfg, keys)
		run := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: signedAddr, Topic: grpcSignedTopic, Normal: 3,
			AccessKey: "detour-compat", SecretKey: "compat-secret"})
		acked := ackedSends(t, run, 3)
		readBackExactly(t, acked, c.Consume(t, context.Background(), grpcSignedTopic, len(acked), 60*time.Second))

		wrong := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: signedAddr, Topic: grpcSignedTopic, Normal: 2,
			AccessKey: "detour-compat", SecretKey: "guessed"})
		for _, s := range wrong.Sends {
			if s.OK {
				t.Fatalf("the SDK sent %s signed with a wrong secret", s.MsgID)
			}
		}
		if !strings.Contains(wrong.Sends[0].Error, "UnauthorizedException") || !strings.Contains(wrong.Sends[0].Error, "response-code=40100") {
			t.Errorf("the SDK's error for a wrong secret names no UNAUTHORIZED: %s", wrong.Sends[0].Error)
		}
		if n, per := storedTotal(t, c, grpcSignedTopic); n != int64(len(acked)) {
			t.Fatalf("%d messages stored in the signed topic, want the %d signed right: %v", n, len(acked), per)
		}
		t.Logf("signed with the right secret: %d sends stored; with a wrong one the SDK failed: %s", len(acked), wrong.Sends[0].Error)
	})

	t.Run("undeclared topics through the manager", func(t *testing.T) { testUndeclaredTopicsThroughTheManager(t, c, dir) })

	t.Run("canary: plaintext-only endpoint", func(t *testing.T) {
		plainAddr := serveGRPC(t, rt, nil, nil)
		run := rmqtest.SendGRPC(t, dir, rmqtest.GRPCSendOptions{Endpoint: plainAddr, Topic: grpcCanaryTopic, Normal: 3})
		sends := run.Sends
		// The healthy runs' "nothing in the SDK's log warns" holds only if the log is read at all.
		if len(run.Problems) == 0 {
			t.Errorf("the SDK's log holds no error for a producer that could not start: it is not where it is read from\n%s", run.Log)
		}
		for _, s := range sends {
			if s.OK {
				t.Fatalf("the SDK (TLS on) sent %s through a plaintext-only endpoint", s.MsgID)
			}
		}
		if n, per := storedTotal(t, c, grpcCanaryTopic); n != 0 {
			t.Fatalf("%d messages stored in the canary's topic: %v", n, per)
		}
		t.Logf("against a plaintext-only endpoint the SDK failed: %s", sends[0].Error)
	})
}

// transactionCounts are the transactions a gRPC producer's run sends: ended by the client
// (commit, rollback) and never ended (orphanCommit, orphanRollback), settled by check-back as
// the producer's TransactionChecker answers, COMMIT or ROLLBACK as the kind says.
type transactionCounts struct{ commit, rollback, orphanCommit, orphanRollback int }

// check proves what run did with the transactions: every one acknowledged; every orphan checked
// back, the checker reading it as sent, and nothing else checked; the committed ones (by the
// client or by check-back) read back exactly, and nothing else stored in the topic.
func (tx transactionCounts) check(t *testing.T, c *rmqtest.Cluster, topic string, run rmqtest.GRPCRun) {
	t.Helper()
	acked := ackedSends(t, run, tx.commit+tx.rollback+tx.orphanCommit+tx.orphanRollback)
	var committed []rmqtest.GRPCSend
	orphans := map[string]rmqtest.GRPCSend{}
	for _, s := range acked {
		switch s.Kind {
		case "commit", "orphan-commit":
			committed = append(committed, s)
		}
		if strings.HasPrefix(s.Kind, "orphan-") {
			orphans[s.MsgID] = s
		}
	}
	if len(committed) != tx.commit+tx.orphanCommit {
		t.Fatalf("%d commits acknowledged, want %d", len(committed), tx.commit+tx.orphanCommit)
	}
	checked := map[string]bool{}
	for _, ch := range run.Checks {
		s, ok := orphans[ch.MsgID]
		if !ok || ch.Kind != s.Kind || ch.Body != s.Body {
			t.Errorf("the checker was asked about %+v, not one of the orphans as sent", ch)
		}
		checked[ch.MsgID] = true
	}
	if len(checked) != len(orphans) {
		t.Fatalf("%d of %d orphaned transactions checked back: %+v", len(checked), len(orphans), run.Checks)
	}
	readBackExactly(t, committed, c.Consume(t, context.Background(), topic, len(committed), 60*time.Second))
	// Rolled back messages never reach the topic: only the committed ones are stored in it.
	if n, per := storedTotal(t, c, topic); n != int64(len(committed)) {
		t.Fatalf("%d messages stored in the transactional topic, want the %d committed: %v", n, len(committed), per)
	}
	t.Logf("%d transactions committed and %d rolled back by the client; %d settled by the brokers' check-back (%d checks), "+
		"the committed ones read back, the rolled back never stored in the topic", tx.commit, tx.rollback, len(orphans), len(run.Checks))
}

// checkBackEvery is a broker that checks back on a transaction every 10 s (30 s by default),
// once it has waited transactionTimeOut (6 s). A broker may check a transaction again before it
// has read the end of its last check from its operation queue (at a 2 s interval it did so in
// most runs), and a second COMMIT stores the message twice; 10 s is longer than the producer
// stays once its checker has answered.
var checkBackEvery = rmqtest.BrokerConfig{Settings: map[string]string{"transactionCheckInterval": "10000"}}

// groupsInOrder checks that each message group's acknowledged FIFO sends are on one queue of one
// broker, their queue offsets in the order sent, and that want groups were read back. It returns
// each group's last place.
func groupsInOrder(t *testing.T, acked []rmqtest.GRPCSend, byID map[string]rmqtest.Consumed, want int) map[string]string {
	t.Helper()
	type place struct {
		queue  string
		offset int64
	}
	last := map[string]place{}
	for _, s := range acked {
		if s.Kind != "fifo" {
			continue
		}
		m := byID[s.MsgID]
		q := fmt.Sprintf("%s/%d", m.BrokerName, m.QueueID)
		if p, ok := last[s.Group]; ok && (p.queue != q || p.offset >= m.QueueOffset) {
			t.Errorf("%s of %s at %s offset %d, after the group's previous message at %s offset %d", s.Body, s.Group, q, m.QueueOffset, p.queue, p.offset)
		}
		last[s.Group] = place{q, m.QueueOffset}
	}
	if len(last) != want {
		t.Errorf("messages of %d groups read back, want %d", len(last), want)
	}
	out := make(map[string]string, len(last))
	for g, p := range last {
		out[g] = fmt.Sprintf("%s@%d", p.queue, p.offset)
	}
	return out
}

// notDeliveredEarly watches topic until every acknowledged delayed send is in it, failing the test
// when, at any look, the topic holds more messages than have reached the time they asked for, or
// when they are not all there within 90 s of delay. It returns how many looks it took. A look
// counts what is due when the count has been read, not when it began: reading waits for the
// brokers' dispatch, and a message delivered on time meanwhile is in the count.
func notDeliveredEarly(t *testing.T, c *rmqtest.Cluster, topic string, acked []rmqtest.GRPCSend, delay time.Duration) int {
	t.Helper()
	looks := 0
	for deadline := time.Now().Add(delay + 90*time.Second); ; {
		n, _ := storedTotal(t, c, topic)
		now := time.Now()
		due := 0
		for _, s := range acked {
			if s.DeliverAtMs <= now.UnixMilli() {
				due++
			}
		}
		if n > int64(due) {
			t.Fatalf("%d delayed messages in the topic at %v, only %d asked to be delivered by then", n, now.Format(time.RFC3339Nano), due)
		}
		looks++
		if n == int64(len(acked)) {
			return looks
		}
		if now.After(deadline) {
			t.Fatalf("%d of %d delayed messages reached the topic within 90 s of their time", n, len(acked))
		}
		time.Sleep(200 * time.Millisecond) // the interval between looks; each look is the check
	}
}

// grpcRuntime is a runtime routing topics from c's name server, after creating them on every broker
// with two queues and message.type MIXED: its tests send normal, FIFO, delayed and transactional
// messages, which a topic of one type would refuse, as the Proxy does.
func grpcRuntime(t *testing.T, c *rmqtest.Cluster, topics ...string) *producer.Runtime {
	t.Helper()
	r := producer.New(producer.Options{ProducerGroup: "detour_compat_grpc"})
	t.Cleanup(func() { _ = r.Close() })
	if err := r.SetPolicy(contentPolicy("grpc")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range topics {
		for _, b := range c.Brokers() {
			if err := b.CreateTypedTopic(ctx, topic, 2, "MIXED"); err != nil {
				t.Fatalf("create %s on %s: %v", topic, b.Name, err)
			}
		}
		if err := r.SetNameServerRoute(producer.NameServerRoute{Topic: topic, NameServers: []string{c.NameServer()}, Policy: "grpc"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the route of "+topic+" from the name server", func() bool {
			info, _ := r.RouteInfo(topic)
			return len(info.Brokers) == len(c.Brokers())
		})
	}
	return r
}

// selfSignedTLS is the endpoint's TLS configuration with a self-signed certificate, as the Proxy's
// test mode serves; the Java SDK does not verify it.
func selfSignedTLS(t testing.TB) *tls.Config {
	t.Helper()
	crt, key, err := certutil.GenerateSelfSignedCertKey("detour-grpc", nil, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// serveGRPC serves the gRPC endpoint around rt on a free loopback port until the test ends: over
// TLS only with cfg, plaintext only without; with keys, for calls they sign only.
func serveGRPC(t *testing.T, rt *producer.Runtime, cfg *tls.Config, keys grpcfront.AccessKeys) string {
	t.Helper()
	return serveGRPCWith(t, rt, grpcfront.Options{TLS: cfg, Credentials: keys}, nil)
}

// serveGRPCWith is serveGRPC with o's TLS, AllowPlaintext, Credentials and SkipMessageTypeCheck,
// whose topics forward consumers to up (none when nil); the rest is set here.
func serveGRPCWith(t *testing.T, rt *producer.Runtime, o grpcfront.Options, up *front.Upstream) string {
	t.Helper()
	srv, err := grpcfront.New(grpcfront.Options{Addr: "127.0.0.1:0", Runtime: rt, TLS: o.TLS, AllowPlaintext: o.AllowPlaintext,
		Credentials: o.Credentials, SkipMessageTypeCheck: o.SkipMessageTypeCheck, Logger: testr.New(t),
		Topics: front.TopicResolverFunc(func(_ context.Context, _, topic string) (front.Target, error) {
			if !strings.HasPrefix(topic, "DetourGRPC") {
				return front.Target{}, fmt.Errorf("%w: %s", front.ErrTopicNotFound, topic)
			}
			return front.Target{Topic: topic, Upstream: up}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gRPC endpoint: %v", err)
		}
	})
	return srv.Addr().String()
}

// ackedSends are the sends the SDK has a receipt for. Every send of a healthy run must have one,
// and the SDK's log must hold no warning or error (a failed heartbeat, settings or route refresh);
// either fails the test with what the SDK said.
func ackedSends(t *testing.T, run rmqtest.GRPCRun, want int) []rmqtest.GRPCSend {
	t.Helper()
	for _, p := range run.Problems {
		t.Errorf("the SDK logged: %s", p)
	}
	sends := run.Sends
	var acked []rmqtest.GRPCSend
	for _, s := range sends {
		if !s.OK {
			t.Errorf("%s send %d (%s) failed: %s", s.Kind, s.Index, s.Body, s.Error)
			continue
		}
		acked = append(acked, s)
	}
	if len(sends) != want {
		t.Errorf("the SDK reported %d sends, want %d", len(sends), want)
	}
	if t.Failed() {
		t.Logf("the SDK's log ends:\n%s", run.Log)
	}
	if len(acked) == 0 {
		t.FailNow()
	}
	return acked
}

// readBackExactly checks that what the consumer read is exactly the acknowledged sends: each under
// its receipt's message id (the UNIQ_KEY) with its body and keys, once, and nothing else. It
// returns the messages read by id.
func readBackExactly(t *testing.T, acked []rmqtest.GRPCSend, got []rmqtest.Consumed) map[string]rmqtest.Consumed {
	t.Helper()
	byID := make(map[string]rmqtest.Consumed, len(got))
	for _, m := range got {
		if _, dup := byID[m.MsgID]; dup {
			t.Errorf("message %s read twice", m.MsgID)
		}
		byID[m.MsgID] = m
	}
	for _, s := range acked {
		m, ok := byID[s.MsgID]
		switch {
		case !ok:
			t.Errorf("%s (receipt %s) not read back", s.Body, s.MsgID)
		case string(m.Body) != s.Body || m.Keys != s.Body || m.Properties["UNIQ_KEY"] != s.MsgID:
			t.Errorf("receipt %s read back as body %q keys %q UNIQ_KEY %q, sent body and keys %q", s.MsgID, m.Body, m.Keys, m.Properties["UNIQ_KEY"], s.Body)
		case m.Tags != "grpc" || m.Properties["detour-kind"] != s.Kind:
			t.Errorf("receipt %s read back with tag %q and property detour-kind %q, sent tag grpc and %q", s.MsgID, m.Tags, m.Properties["detour-kind"], s.Kind)
		}
		delete(byID, s.MsgID)
	}
	for id, m := range byID {
		t.Errorf("message %s (%q) read back but never acknowledged", id, m.Body)
	}
	out := make(map[string]rmqtest.Consumed, len(got))
	for _, m := range got {
		out[m.MsgID] = m
	}
	return out
}
