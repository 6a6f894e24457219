package rmqtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Consumed is one message as RocketMQ's own Java consumer reads it back from a broker.
type Consumed struct {
	// MsgID is what consumers see as the message id: the producer's UNIQ_KEY when it set one.
	MsgID string `json:"msgId"`
	// OffsetMsgID is the broker's id (store host and commit log offset).
	OffsetMsgID    string            `json:"offsetMsgId"`
	Topic          string            `json:"topic"`
	BrokerName     string            `json:"brokerName"`
	QueueID        int               `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	ReconsumeTimes int               `json:"reconsumeTimes"`
	SysFlag        int               `json:"sysFlag"`
	Tags           string            `json:"tags"`
	Keys           string            `json:"keys"`
	Properties     map[string]string `json:"properties"`
	Body           []byte            `json:"body"`
}

// Consume reads every message of topic from offset 0 of every queue with the line's Java lite pull
// consumer (the project's driver in hack/rocketmq) and returns them. It reads until it has at least
// expect messages and one more poll comes back empty, so a message stored twice shows up; it fails
// t, the caller's test (a subtest's own, so a failure ends only that subtest), when fewer than
// expect arrive within timeout.
func (c *Cluster) Consume(t TB, ctx context.Context, topic string, expect int, timeout time.Duration) []Consumed {
	t.Helper()
	return c.ConsumeVia(t, ctx, c.nsAddr, topic, expect, timeout)
}

// ConsumeVia is Consume with the consumer's namesrvAddr set to nameServer (a facade, say).
func (c *Cluster) ConsumeVia(t TB, ctx context.Context, nameServer, topic string, expect int, timeout time.Duration) []Consumed {
	t.Helper()
	msgs, err := c.consume(t, ctx, nameServer, topic, expect, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// ConsumeRead is Consume that, when the consumer read fewer than expect messages, returns what it
// read with the error instead of failing t: for a test that reports which messages are missing.
func (c *Cluster) ConsumeRead(t TB, ctx context.Context, topic string, expect int, timeout time.Duration) ([]Consumed, error) {
	t.Helper()
	return c.consume(t, ctx, c.nsAddr, topic, expect, timeout)
}

func (c *Cluster) consume(t TB, ctx context.Context, nameServer, topic string, expect int, timeout time.Duration) ([]Consumed, error) {
	t.Helper()
	home := filepath.Join(c.dir, "consumer")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"-Xmx256m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
		"-cp", c.Dist.ClientClassPath, "dev.detour.rmqdriver.Consume",
		nameServer, topic, strconv.Itoa(expect), strconv.FormatInt(timeout.Milliseconds(), 10))
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	// A consumer that could not even ask the name server for the topic's queues read nothing, so
	// it is started once more: on a loaded machine its first request can fail on a fresh
	// connection (RemotingSendRequestException), which is the harness's trouble, not the test's.
	for attempt := 1; ; attempt++ {
		cmd := exec.CommandContext(ctx, "java", argv...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		runErr := cmd.Run()
		msgs := driverLines[Consumed](t, &stdout, `{"msgId"`, "consumer")
		if runErr != nil && len(msgs) == 0 && attempt == 1 && ctx.Err() == nil && bytes.Contains(stderr.Bytes(), []byte("Can not find Message Queue for this topic")) {
			t.Logf("rmqtest: the Java consumer of %s could not fetch the topic's queues; starting it again:\n%s", topic, truncate(stderr.Bytes(), 600))
			continue
		}
		if runErr != nil {
			return msgs, fmt.Errorf("rmqtest: Java consumer of %s read %d of %d messages: %w\nstderr:\n%s", topic, len(msgs), expect, runErr, truncate(stderr.Bytes(), 4000))
		}
		return msgs, nil
	}
}

// driverLines decodes the JSON lines a Java driver printed that start with prefix (its log lines
// are skipped); a line that does not decode fails the test, naming what printed it.
func driverLines[T any](t TB, out *bytes.Buffer, prefix, what string) []T {
	t.Helper()
	var rows []T
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(prefix)) {
			continue
		}
		var row T
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("rmqtest: %s line %q: %v", what, truncate(line, 200), err)
		}
		rows = append(rows, row)
	}
	return rows
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return fmt.Sprintf("%s... (%d bytes)", b[:n], len(b))
	}
	return string(b)
}
