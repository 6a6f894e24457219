//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// httpsClient talks to the gateway and the metrics endpoint. Their certificates are self-signed
// unless a TLS Secret is given, so this client does not verify them; the TLS rotation test checks
// the served certificate itself.
func httpsClient() *http.Client {
	return &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

// sendResult is the gateway's answer to one send.
type sendResult struct {
	status int
	MsgID  string `json:"msgId"`
	Broker string `json:"broker"`
	Error  string `json:"error"`
}

// send posts one message through the gateway Service with token.
func (k *cluster) send(c *http.Client, token, body string) (sendResult, error) {
	return k.sendTo(c, k.gateway, token, body)
}

// sendTo posts one message through the gateway at base (a Service or one pod).
func (k *cluster) sendTo(c *http.Client, base, token, body string) (sendResult, error) {
	url := fmt.Sprintf("%s/v1/namespaces/%s/topics/orders/messages", base, namespace)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return sendResult{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.Do(req)
	if err != nil {
		return sendResult{}, err
	}
	defer resp.Body.Close()
	var r sendResult
	data, _ := io.ReadAll(resp.Body)
	r.status = resp.StatusCode
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("HTTP %d, not JSON: %q", resp.StatusCode, data)
	}
	return r, nil
}

// traffic is a paced stream of sends through the gateway.
type traffic struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	acked  map[string]string // msgId -> broker
	failed []string
	tries  int
}

// startTraffic sends from senders concurrent clients, each one message every interval, until
// the returned traffic is stopped.
func (k *cluster) startTraffic(t *testing.T, token string, senders int, interval time.Duration) *traffic {
	tr := &traffic{stop: make(chan struct{}), acked: map[string]string{}}
	for s := range senders {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			c := httpsClient()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-tr.stop:
					return
				case <-tick.C:
				}
				r, err := k.send(c, token, fmt.Sprintf("e2e sender %d message %d", s, i))
				tr.mu.Lock()
				tr.tries++
				switch {
				case err != nil:
					tr.failed = append(tr.failed, time.Now().UTC().Format("15:04:05.000 ")+err.Error())
				case r.status != http.StatusOK:
					tr.failed = append(tr.failed, fmt.Sprintf("%s HTTP %d: %s", time.Now().UTC().Format("15:04:05.000"), r.status, r.Error))
				default:
					tr.acked[r.MsgID] = r.Broker
				}
				tr.mu.Unlock()
			}
		}()
	}
	t.Cleanup(tr.halt)
	return tr
}

func (tr *traffic) halt() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	tr.wg.Wait()
}

// finish stops the traffic and fails the test if any send failed; it returns what was acked.
func (tr *traffic) finish(t *testing.T) map[string]string {
	t.Helper()
	tr.halt()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	perBroker := map[string]int{}
	for _, b := range tr.acked {
		perBroker[b]++
	}
	t.Logf("gateway traffic: %d sends, %d acknowledged %v, %d failed", tr.tries, len(tr.acked), perBroker, len(tr.failed))
	if len(tr.failed) > 0 {
		t.Errorf("%d of %d sends through the gateway failed; first: %s", len(tr.failed), tr.tries, tr.failed[0])
	}
	if len(tr.acked) == 0 {
		t.Fatal("no send was acknowledged")
	}
	return tr.acked
}

// acknowledged counts the sends acknowledged so far.
func (tr *traffic) acknowledged() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.acked)
}

// consumed reads every message of topic back with RocketMQ's own Java consumer, in a pod, and
// returns the message ids it saw.
func (k *cluster) consumed(t *testing.T, topic string, atLeast int) map[string]bool {
	t.Helper()
	name := fmt.Sprintf("consume-%d", time.Now().UnixNano())
	k.runJava(t, name, "dev.detour.rmqdriver.Consume", k.nameServer, topic, fmt.Sprint(atLeast), "120000")
	logs := k.waitPod(t, name, 4*time.Minute)
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			MsgID string `json:"msgId"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.MsgID != "" {
			ids[m.MsgID] = true
		}
	}
	return ids
}

// The class paths in the RocketMQ image (hack/e2e-images.sh): RocketMQ's remoting client, and
// RocketMQ 5's gRPC SDK, each with the Java driver built on it.
const (
	remotingClassPath = "/opt/rocketmq/client/*"
	grpcClassPath     = "/opt/rocketmq/grpc/*"
)

// runJava starts a pod running one of the Java driver's programs (hack/rocketmq) with RocketMQ's
// own remoting client.
func (k *cluster) runJava(t *testing.T, name, main string, args ...string) {
	t.Helper()
	k.runJavaOn(t, name, remotingClassPath, main, args...)
}

// runJavaOn starts a pod running main from the class path cp of the RocketMQ image.
func (k *cluster) runJavaOn(t *testing.T, name, cp, main string, args ...string) {
	t.Helper()
	cmd := append([]string{"java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Duser.home=/tmp",
		"-Drocketmq.client.logRoot=/tmp/logs", "-cp", cp, main}, args...)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "rocketmq-client"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "java", Image: k.rocketmqImage, ImagePullPolicy: corev1.PullNever, Command: cmd,
			}},
		},
	}
	if _, err := k.cs.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.cs.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitPod waits until a pod has finished and returns its log.
func (k *cluster) waitPod(t *testing.T, name string, timeout time.Duration) []byte {
	t.Helper()
	eventually(t, timeout, "pod "+name+" finished", func() error {
		pod, err := k.cs.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p := pod.Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			return fmt.Errorf("phase %s", p)
		}
		return nil
	})
	logs, err := k.cs.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// checkReadBack fails the test for every acknowledged message the consumer did not see. A lite
// pull consumer ends after one empty poll once it has seen the count asked, and on a loaded node
// that poll can come before every queue is drained (the topic also holds earlier tests' messages,
// so the count is reached early): a stored message is read by one of up to three consumers, each
// reading from the first offset in a group of its own, while a lost one is read by none.
func (k *cluster) checkReadBack(t *testing.T, acked map[string]string) {
	t.Helper()
	k.checkReadBackFrom(t, topicName, acked)
}

// checkReadBackFrom is checkReadBack of another RocketMQ topic.
func (k *cluster) checkReadBackFrom(t *testing.T, topic string, acked map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	var lost []string
	for round := 1; round <= 3; round++ {
		read := k.consumed(t, topic, len(acked))
		for id := range read {
			seen[id] = true
		}
		lost = notSeen(acked, seen)
		t.Logf("read back from %s: %d acknowledged, %d read by Java consumer pod %d, %d not read yet", topic, len(acked), len(read), round, len(lost))
		if len(lost) == 0 {
			return
		}
	}
	t.Errorf("%d acknowledged messages were not read back, e.g. %v", len(lost), lost[:min(5, len(lost))])
}

// notSeen lists the acknowledged messages (id@broker) that no consumer has read.
func notSeen(acked map[string]string, seen map[string]bool) []string {
	var lost []string
	for id, broker := range acked {
		if !seen[id] {
			lost = append(lost, id+"@"+broker)
		}
	}
	return lost
}
