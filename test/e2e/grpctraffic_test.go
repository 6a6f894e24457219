//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// grpcStopFile is the file whose creation ends the gRPC producer's stream (GrpcProduce's stopFile).
const grpcStopFile = "/tmp/stop"

// grpcSDKLog is where RocketMQ 5's Java SDK logs, with the pod's user.home at /tmp.
const grpcSDKLog = "/tmp/logs/rocketmq/rocketmq-client.log"

// grpcTraffic is RocketMQ 5's Java gRPC SDK (5.2.0) sending from a pod through the detour-grpc
// Service, with the SDK's defaults but the endpoint: TLS on (the SDK trusts any certificate, so
// the manager's self-signed one serves), three attempts, 3 s per request.
type grpcTraffic struct {
	k   *cluster
	pod string
	// topic is the RocketMQ topic it sends to.
	topic string
	// started is when the pod was created, for the report of how long the SDK took to send.
	started time.Time
}

// grpcSend is one line of GrpcProduce's output: a send, or (kind "start") the producer's failure
// to start.
type grpcSend struct {
	Kind   string `json:"kind"`
	Index  int    `json:"index"`
	OK     bool   `json:"ok"`
	MsgID  string `json:"msgId"`
	TookMs int64  `json:"tookMs"`
	Error  string `json:"error"`
}

// startGRPCTraffic starts the gRPC producer's pod, which sends one normal message to the Topic
// every 100 ms until stopped (at most 10 minutes, should a test end without stopping it).
func (k *cluster) startGRPCTraffic(t *testing.T) *grpcTraffic {
	t.Helper()
	return k.startGRPCTrafficTo(t, topicName)
}

// startGRPCTrafficTo is startGRPCTraffic to another RocketMQ topic.
func (k *cluster) startGRPCTrafficTo(t *testing.T, topic string) *grpcTraffic {
	t.Helper()
	g := &grpcTraffic{k: k, topic: topic, pod: fmt.Sprintf("grpc-produce-%d", time.Now().UnixNano()), started: time.Now()}
	k.runJavaOn(t, g.pod, grpcClassPath, "dev.detour.rmqdriver.GrpcProduce", "endpoints="+k.grpc,
		"topic="+topic, "tag=e2e-grpc", "stopFile="+grpcStopFile, "intervalMs=100", "maxMs=600000")
	return g
}

// waitAcked waits until the gRPC producer has n acknowledged sends, so that a disruption starts
// on a running session (route queried, settings received), not on the SDK's start.
func (g *grpcTraffic) waitAcked(t *testing.T, n int) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("%d gRPC sends acknowledged", n), func() error {
		logs, err := g.k.cs.CoreV1().Pods(namespace).GetLogs(g.pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			return err
		}
		sends := parseGRPCSends(logs)
		if len(sends) > 0 && sends[0].Kind == "start" {
			t.Fatalf("the gRPC producer did not start: %s", sends[0].Error)
		}
		if ok := countOK(sends); ok < n {
			return fmt.Errorf("%d of %d acknowledged", ok, len(sends))
		}
		return nil
	})
	t.Logf("gRPC producer to %s: %d sends acknowledged %v after its pod was created", g.topic, n, time.Since(g.started).Round(100*time.Millisecond))
}

// finish stops the gRPC producer, waits for its pod to end and fails the test if any send failed;
// it returns the acknowledged message ids (the receipts'), each mapped to "grpc" for read back
// alongside the gateway's.
func (g *grpcTraffic) finish(t *testing.T) map[string]string {
	t.Helper()
	// The SDK's own warnings say what it met on the way (retries, refused heartbeats), which the
	// sends alone do not; they are read before the pod ends and its files go.
	stop := time.Now()
	script := fmt.Sprintf("grep -E ' (WARN|ERROR) ' %s | tail -n 20; touch %s", grpcSDKLog, grpcStopFile)
	warnings, err := g.k.kubectl(nil, "-n", namespace, "exec", g.pod, "--", "sh", "-c", script)
	if err != nil {
		t.Fatalf("stopping the gRPC producer: %v", err)
	}
	logs := g.k.waitPod(t, g.pod, 2*time.Minute)
	stopped := time.Since(stop).Round(100 * time.Millisecond)
	sends := parseGRPCSends(logs)
	acked := map[string]string{}
	var failed []grpcSend
	var slowest int64
	for _, s := range sends {
		slowest = max(slowest, s.TookMs)
		if s.OK && s.MsgID != "" {
			acked[s.MsgID] = "grpc"
		} else {
			failed = append(failed, s)
		}
	}
	t.Logf("gRPC traffic to %s (Java SDK 5.2.0, TLS): %d sends, %d acknowledged, %d failed, slowest send %d ms; stopped and its pod ended in %v",
		g.topic, len(sends), len(acked), len(failed), slowest, stopped)
	if w := strings.TrimSpace(string(warnings)); w != "" {
		t.Logf("the gRPC SDK's warnings (last 20):\n%s", w)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d gRPC sends to %s failed; first: %s %d: %s", len(failed), len(sends), g.topic, failed[0].Kind, failed[0].Index, failed[0].Error)
	}
	if len(acked) == 0 {
		t.Fatalf("no gRPC send was acknowledged; the producer printed:\n%.2000s", logs)
	}
	return acked
}

// parseGRPCSends reads GrpcProduce's JSON lines out of a pod's log, skipping anything else the
// JVM printed.
func parseGRPCSends(logs []byte) []grpcSend {
	var sends []grpcSend
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"kind"`)) {
			continue
		}
		var s grpcSend
		if json.Unmarshal(line, &s) == nil {
			sends = append(sends, s)
		}
	}
	return sends
}

// countOK counts the acknowledged sends.
func countOK(sends []grpcSend) int {
	n := 0
	for _, s := range sends {
		if s.OK {
			n++
		}
	}
	return n
}
