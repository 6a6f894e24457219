//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// routePoll is RocketMQ's default pollNameServerInterval: a remoting client learns a new route at
// most this long after the name server (here detour's facade) publishes it.
const routePoll = 30 * time.Second

// facadeStopFile is the file whose creation ends the facade producer's senders (Produce's
// stopFile).
const facadeStopFile = "/tmp/stop"

// facadeTraffic is RocketMQ's own Java producer (DefaultMQProducer, default settings: no latency
// fault tolerance, a route poll every 30 s) sending from a pod with the detour-namesrv Service as
// its name server.
type facadeTraffic struct {
	k   *cluster
	pod string
}

// facadeSend is one line of Produce's output.
type facadeSend struct {
	StartMs *int64   `json:"startMs"`
	OK      bool     `json:"ok"`
	MsgID   string   `json:"msgId"`
	Brokers []string `json:"brokers"`
	Error   string   `json:"error"`
}

// disruption is a broker restart a test caused, from its start (the kubectl command) to when its
// pod was Ready again; deleting is when the test first saw the old pod terminating or gone, which
// is when the facade begins to publish the broker read-only.
type disruption struct {
	broker               string
	start, deleting, end time.Time
}

// startFacadeTraffic starts the producer's pod (2 senders, 20 sends a second in all, until
// stopped or for at most 15 minutes) and waits until it has started: connected and warmed by 12
// sends that are not recorded, as a harness warms the producers it measures.
func (k *cluster) startFacadeTraffic(t *testing.T) *facadeTraffic {
	t.Helper()
	f := &facadeTraffic{k: k, pod: fmt.Sprintf("produce-%d", time.Now().UnixNano())}
	k.runJava(t, f.pod, "dev.detour.rmqdriver.Produce", "namesrv="+k.facade, "topic="+topicName,
		"group=e2e-java", "senders=2", "rate=20", "durationMs=900000", "size=128", "stopFile="+facadeStopFile,
		"warmup=12")
	eventually(t, 2*time.Minute, "the Java producer started", func() error {
		logs, err := k.cs.CoreV1().Pods(namespace).GetLogs(f.pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil || !bytes.Contains(logs, []byte(`{"ready":true}`)) {
			return fmt.Errorf("not ready: %v %.200s", err, logs)
		}
		return nil
	})
	return f
}

// finish stops the producer, waits for its pod to end and fails the test for every send that
// failed without trying a broker restarting before the producer's first route poll after the
// restart began: until that poll a remoting client sends on the route it has, which the facade
// cannot change; from it on, the facade's route must keep every send away from trouble. It
// returns the acknowledged message ids, each mapped to "facade" for read back.
func (f *facadeTraffic) finish(t *testing.T, ds []disruption) map[string]string {
	t.Helper()
	if _, err := f.k.kubectl(nil, "-n", namespace, "exec", f.pod, "--", "touch", facadeStopFile); err != nil {
		t.Fatalf("stopping the Java producer: %v", err)
	}
	sends := parseFacadeSends(f.k.waitPod(t, f.pod, 2*time.Minute))
	acked := map[string]string{}
	var failed, excused int
	for _, s := range sends {
		if s.OK && s.MsgID != "" {
			acked[s.MsgID] = "facade"
			continue
		}
		failed++
		if beforeFirstPoll(s, ds) {
			excused++
			continue
		}
		t.Errorf("a send through the facade failed after the producer's route poll: started %s, tried %v: %s",
			time.UnixMilli(*s.StartMs).UTC().Format("15:04:05.000"), s.Brokers, s.Error)
	}
	t.Logf("Java producer through the facade: %d sends, %d acknowledged, %d failed, %d of them on a restarting broker before the producer's first route poll",
		len(sends), len(acked), failed, excused)
	if len(acked) == 0 {
		t.Fatal("no send through the facade was acknowledged")
	}
	return acked
}

// pollSlack is how long after the test sees a restarting broker's old pod terminating the facade
// may take to publish the broker read-only (the pod's event reaching the runtime, the isolation,
// the next route answer) and the client's poll timer may run late on a loaded node.
const pollSlack = 5 * time.Second

// beforeFirstPoll reports whether a failed send tried a broker that a disruption had begun to
// restart, started before the producer's first route poll after the broker's old pod began to
// terminate (one route poll, and pollSlack, after the test saw it). Until then the facade cannot
// have hidden the broker from the client: a loaded node's StatefulSet controller has taken 20 s
// and more to delete the pod after `kubectl rollout restart`. One such attempt is
// enough: the client's attempts share one budget (3 s), and an attempt that connects to a
// restarting broker's old address can spend it all, whatever the other attempts met (on a loaded
// node, seen as [broker-a, broker-b] with broker-b restarting: "sendDefaultImpl call timeout").
// A send that failed without trying a restarting broker is never excused.
func beforeFirstPoll(s facadeSend, ds []disruption) bool {
	at := time.UnixMilli(*s.StartMs)
	return slices.ContainsFunc(s.Brokers, func(b string) bool {
		return slices.ContainsFunc(ds, func(d disruption) bool {
			return d.broker == b && !at.Before(d.start) && at.Before(d.deleting.Add(routePoll+pollSlack))
		})
	})
}

// parseFacadeSends reads Produce's send lines out of a pod's log.
func parseFacadeSends(logs []byte) []facadeSend {
	var sends []facadeSend
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s facadeSend
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.StartMs != nil {
			sends = append(sends, s)
		}
	}
	return sends
}
