package compat_test

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// Topics of the Python client suite: messages (normal and FIFO), delayed messages, the client's
// plaintext default, and the canary's.
const (
	pyTopic        = "DetourGRPCPython"
	pyDelayedTopic = "DetourGRPCPythonDelayed"
	pyPlainTopic   = "DetourGRPCPythonPlain"
	pySignedTopic  = "DetourGRPCPythonSigned"
	pyCanaryTopic  = "DetourGRPCPythonCanary"
	pyTxTopic      = "DetourGRPCPythonTx"
)

// TestGRPCPythonSDKSendsThroughTheEndpoint runs RocketMQ's Python gRPC client
// (rocketmq-python-client, a producer with the client's defaults but its endpoint and TLS turned
// on) against detour's gRPC endpoint, served over TLS only with a certificate for 127.0.0.1 signed
// by a throwaway CA, which the client trusts the way a deployment would: as its root, through
// gRPC's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH. Behind the endpoint is a runtime routed from two real
// 5.5.0 brokers' name server. Every message the client has a receipt for is read back by RocketMQ's
// Java consumer under the receipt's message id, with its body, tag and user property, exactly
// once, and nothing else is in the topic; nothing in the client's log warns across a pause of 15 s
// (heartbeats, route refresh); a message group's messages sit on one queue in the order sent; a
// delayed message is not in its topic before the time it asked for; transactions it commits are
// read back and ones it rolls back never stored, and ones it never ends are checked back by the
// brokers through the endpoint and settled by its TransactionChecker. Signed with its Credentials,
// the client sends to an endpoint with access keys; with a wrong secret it is refused
// UNAUTHORIZED and nothing is stored. The client's own default,
// plaintext, is served by an endpoint that allows it beside TLS. The canary: the same TLS client
// without the root sends nothing, so the client really verifies the certificate it is served.
func TestGRPCPythonSDKSendsThroughTheEndpoint(t *testing.T) {
	_, version := rmqtest.LocatePythonClient(t) // before the cluster: a missing client fails at once
	c := rmqtest.Start(t, rmqtest.V5, checkBackEvery, checkBackEvery)
	rt := grpcRuntime(t, c, pyTopic, pyDelayedTopic, pyPlainTopic, pySignedTopic, pyCanaryTopic, pyTxTopic)
	dir := t.TempDir()
	cfg, roots := loopbackTLS(t, dir, "roots.pem")
	tlsAddr := serveGRPC(t, rt, cfg, nil)
	send := func(t *testing.T, o rmqtest.PythonGRPCSendOptions) rmqtest.PythonGRPCRun {
		t.Helper()
		o.Endpoint, o.TLS, o.RootsFile = tlsAddr, true, roots
		return rmqtest.PythonGRPCSend(t, dir, o)
	}

	t.Run("normal and FIFO messages", func(t *testing.T) {
		const normal, fifo, groups = 10, 15, 3
		run := send(t, rmqtest.PythonGRPCSendOptions{GRPCSendOptions: rmqtest.GRPCSendOptions{Topic: pyTopic,
			Normal: normal, FIFO: fifo, Groups: groups, Pause: 15 * time.Second}})
		acked := ackedSends(t, run.GRPCRun, normal+fifo)
		// The client heartbeats 1 s after it starts and every 10 s, and refreshes its routes first
		// after 10 s: across the pause both ran, answered.
		if run.Heartbeats < 2 || run.Routes < 2 {
			t.Errorf("the client logged %d heartbeats answered OK and %d route answers, want at least 2 of each\n%s", run.Heartbeats, run.Routes, run.Log)
		}
		got := c.Consume(t, context.Background(), pyTopic, len(acked), 90*time.Second)
		byID := readBackExactly(t, acked, got)
		last := groupsInOrder(t, acked, byID, groups)
		t.Logf("%d normal and %d FIFO messages sent with the Python client %s over TLS and read back under their receipts' ids; groups end at %v; %d heartbeats, %d route answers", normal, fifo, version, last, run.Heartbeats, run.Routes)
	})

	t.Run("delayed messages", func(t *testing.T) {
		const delayed, delay = 3, 10 * time.Second
		run := send(t, rmqtest.PythonGRPCSendOptions{GRPCSendOptions: rmqtest.GRPCSendOptions{Topic: pyDelayedTopic,
			Delayed: delayed, Delay: delay}})
		acked := ackedSends(t, run.GRPCRun, delayed)
		looks := notDeliveredEarly(t, c, pyDelayedTopic, acked, delay)
		got := c.Consume(t, context.Background(), pyDelayedTopic, len(acked), 60*time.Second)
		readBackExactly(t, acked, got)
		t.Logf("%d delayed messages, none in the topic before its time at %d looks", len(acked), looks)
	})

	t.Run("transactions committed, rolled back and settled by check-back", func(t *testing.T) {
		tx := transactionCounts{commit: 2, rollback: 2, orphanCommit: 1, orphanRollback: 1}
		run := send(t, rmqtest.PythonGRPCSendOptions{GRPCSendOptions: rmqtest.GRPCSendOptions{Topic: pyTxTopic,
			Commit: tx.commit, Rollback: tx.rollback, OrphanCommit: tx.orphanCommit, OrphanRollback: tx.orphanRollback}})
		tx.check(t, c, pyTxTopic, run.GRPCRun)
	})

	t.Run("signed with the client's credentials", func(t *testing.T) {
		keys := grpcfront.StaticAccessKeys{"detour-python": {Secret: "python-secret", Topics: []string{pySignedTopic}}}
		signedAddr := serveGRPC(t, rt, cfg, keys)
		signed := func(secret string, n int) rmqtest.PythonGRPCRun {
			return rmqtest.PythonGRPCSend(t, dir, rmqtest.PythonGRPCSendOptions{GRPCSendOptions: rmqtest.GRPCSendOptions{
				Endpoint: signedAddr, Topic: pySignedTopic, Normal: n, AccessKey: "detour-python", SecretKey: secret},
				TLS: true, RootsFile: roots})
		}
		acked := ackedSends(t, signed("python-secret", 3).GRPCRun, 3)
		readBackExactly(t, acked, c.Consume(t, context.Background(), pySignedTopic, len(acked), 60*time.Second))

		wrong := signed("guessed", 2)
		for _, s := range wrong.Sends {
			if s.OK {
				t.Fatalf("the client sent %s signed with a wrong secret", s.MsgID)
			}
		}
		// The client's route query is refused first; the send then fails for want of a route,
		// and only the client's log holds the code it was refused with (40100, UNAUTHORIZED).
		refused := ""
		for _, p := range wrong.Problems {
			if strings.Contains(p, "query topic raise exception, 40100") {
				refused = p
			}
		}
		if refused == "" {
			t.Errorf("the client's log names no UNAUTHORIZED (40100) route query for a wrong secret:\n%s", wrong.Log)
		}
		if n, per := storedTotal(t, c, pySignedTopic); n != int64(len(acked)) {
			t.Fatalf("%d messages stored in the signed topic, want the %d signed right: %v", n, len(acked), per)
		}
		t.Logf("signed with the right secret: %d sends stored; with a wrong one the client failed: %s; its log: %s", len(acked), wrong.Sends[0].Error, refused)
	})

	t.Run("the client's plaintext default, allowed beside TLS", func(t *testing.T) {
		addr := serveGRPCWith(t, rt, grpcfront.Options{TLS: cfg, AllowPlaintext: true}, nil)
		run := rmqtest.PythonGRPCSend(t, dir, rmqtest.PythonGRPCSendOptions{GRPCSendOptions: rmqtest.GRPCSendOptions{
			Endpoint: addr, Topic: pyPlainTopic, Normal: 3}})
		acked := ackedSends(t, run.GRPCRun, 3)
		got := c.Consume(t, context.Background(), pyPlainTopic, len(acked), 60*time.Second)
		readBackExactly(t, acked, got)
		t.Logf("%d messages sent in plaintext and read back", len(acked))
	})

	t.Run("canary: another CA trusted", func(t *testing.T) {
		_, other := loopbackTLS(t, dir, "other-roots.pem")
		run := rmqtest.PythonGRPCSend(t, dir, rmqtest.PythonGRPCSendOptions{GRPCSendOptions: rmqtest.GRPCSendOptions{
			Endpoint: tlsAddr, Topic: pyCanaryTopic, Normal: 1}, TLS: true, RootsFile: other})
		// The healthy runs' "nothing in the client's log warns" holds only if the log is read at all.
		if len(run.Problems) == 0 {
			t.Fatalf("the client's log holds no error for a certificate it cannot verify: it is not where it is read from\n%s", run.Log)
		}
		// BoringSSL's reason, in gRPC's error the client logs: the handshake failed on the certificate.
		if !strings.Contains(run.Log, "CERTIFICATE_VERIFY_FAILED") {
			t.Errorf("the client's log does not say the endpoint's certificate failed verification:\n%s", run.Log)
		}
		for _, s := range run.Sends {
			if s.OK {
				t.Fatalf("the client sent %s to an endpoint whose certificate it has no root for", s.MsgID)
			}
		}
		if n, per := storedTotal(t, c, pyCanaryTopic); n != 0 {
			t.Fatalf("%d messages stored in the canary's topic: %v", n, per)
		}
		t.Logf("trusting another CA the client failed: %s; its log: %s", run.Sends[0].Error, run.Problems[0])
	})
}

// loopbackTLS is the endpoint's TLS configuration, a certificate for 127.0.0.1 (the address the
// client dials and checks the certificate against) signed by a CA of its own, and the path of a
// PEM file (name in dir) holding only that CA, for the client to trust.
func loopbackTLS(t *testing.T, dir, name string) (*tls.Config, string) {
	t.Helper()
	chain, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(chain, key)
	if err != nil {
		t.Fatal(err)
	}
	// The chain is the serving certificate followed by the CA that signed it.
	var blocks []*pem.Block
	for rest := chain; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 2 {
		t.Fatalf("the generated chain has %d certificates, want the serving one and its CA", len(blocks))
	}
	roots := filepath.Join(dir, name)
	if err := os.WriteFile(roots, pem.EncodeToMemory(blocks[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, roots
}
