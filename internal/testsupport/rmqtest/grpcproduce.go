package rmqtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// GRPCSendOptions configure a run of RocketMQ 5's gRPC SDK (rocketmq-client-java, the project's
// driver in hack/rocketmq/src/grpc, GrpcProduce.java). The producer keeps the SDK's defaults
// (TLS on, three attempts, 3 s per request) except its endpoint.
type GRPCSendOptions struct {
	// Endpoint is the access point, host:port.
	Endpoint string
	Topic    string
	// Normal normal messages are sent first, then FIFO ones spread round-robin over Groups message
	// groups (group-0, group-1, ...), then Delayed ones, each asking to be delivered Delay after
	// it is sent.
	Normal, FIFO, Groups, Delayed int
	Delay                         time.Duration
	// Pause holds the producer after the first half of the normal messages, so that its
	// heartbeats (every 10 s) and route refresh (first after 10 s) run mid-session.
	Pause time.Duration
	// Timeout bounds the whole run.
	Timeout time.Duration
	// AccessKey and SecretKey, when both are set, sign the calls (the SDK's
	// StaticSessionCredentialsProvider).
	AccessKey, SecretKey string
	// Commit and Rollback transactional messages are sent last, each in its own transaction,
	// then committed or rolled back; the producer's TransactionChecker then answers a check-back
	// COMMIT for a message of kind commit or orphan-commit and ROLLBACK for any other.
	Commit, Rollback int
	// OrphanCommit and OrphanRollback transactional messages (kinds orphan-commit and
	// orphan-rollback) are sent after those and never ended: the producer then waits (at most
	// OrphanWait, default 2 min) until its checker has answered the broker's check-back for each,
	// plus a grace of 3 s in which the SDK sends the ends.
	OrphanCommit, OrphanRollback int
	OrphanWait                   time.Duration
}

// GRPCRun is a run of the gRPC SDK's producer.
type GRPCRun struct {
	// Sends are the sends in order.
	Sends []GRPCSend
	// Problems are the WARN and ERROR lines of the SDK's own log: a session whose heartbeats,
	// settings or route refreshes fail says so there, though its sends may succeed.
	Problems []string
	// Log is the end of the SDK's log.
	Log string
	// Checks are the check-backs the producer's TransactionChecker answered, in order.
	Checks []GRPCCheck
}

// GRPCCheck is one check-back the producer's TransactionChecker answered.
type GRPCCheck struct {
	// Kind is the checked message's kind, MsgID its message id and Body its body as the
	// checker read it; Verdict is COMMIT or ROLLBACK.
	Kind    string `json:"checked"`
	MsgID   string `json:"msgId"`
	Body    string `json:"body"`
	Verdict string `json:"verdict"`
}

// GRPCSend is one send of the gRPC SDK's producer, or (Kind "start") its failure to start.
type GRPCSend struct {
	// Kind is normal, fifo, delay, commit, rollback or start.
	Kind  string `json:"kind"`
	Index int    `json:"index"`
	OK    bool   `json:"ok"`
	// MsgID is the receipt's message id, which the broker stores as the message's UNIQ_KEY.
	MsgID string `json:"msgId"`
	// Body is the message's body, also its keys.
	Body  string `json:"body"`
	Group string `json:"group"`
	// DeliverAtMs is the delivery timestamp a delayed message asked for; SentMs when it was sent.
	DeliverAtMs int64 `json:"deliverAtMs"`
	SentMs      int64 `json:"sentMs"`
	// TookMs is how long the SDK's send call took, all its attempts included.
	TookMs int64  `json:"tookMs"`
	Error  string `json:"error"`
}

// Took is how long the SDK's send call took, all its attempts included.
func (s GRPCSend) Took() time.Duration { return time.Duration(s.TookMs) * time.Millisecond }

// GRPCClassPath is the class path of the gRPC SDK and its driver (5/grpc in the folder
// hack/setup-rocketmq.sh prints).
func GRPCClassPath() (version, cp string, err error) {
	root := os.Getenv(EnvDist)
	if root == "" {
		return "", "", fmt.Errorf("rmqtest: %s is not set: run `make test`, or `%s=$(hack/setup-rocketmq.sh) go test ...` (needs Java and Maven)", EnvDist, EnvDist)
	}
	return classPath(root, V5, "grpc")
}

// SendGRPC runs the gRPC SDK's producer with o to its end and returns its sends in order. It fails
// the test only when the driver cannot run or prints nothing it can read; failed sends (and a
// producer that cannot start) are results, for the test to judge.
func SendGRPC(t TB, dir string, o GRPCSendOptions) GRPCRun {
	t.Helper()
	_, cp, err := GRPCClassPath()
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "grpc-producer-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	argv := append([]string{"-Xmx256m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-cp", cp, "dev.detour.rmqdriver.GrpcProduce",
		"endpoints="+o.Endpoint, "topic="+o.Topic, "normal="+strconv.Itoa(o.Normal), "fifo="+strconv.Itoa(o.FIFO),
		"groups="+strconv.Itoa(max(o.Groups, 1)), "delay="+strconv.Itoa(o.Delayed),
		"delayMs="+strconv.FormatInt(o.Delay.Milliseconds(), 10), "pauseMs="+strconv.FormatInt(o.Pause.Milliseconds(), 10),
		"commit="+strconv.Itoa(o.Commit), "rollback="+strconv.Itoa(o.Rollback),
		"orphanCommit="+strconv.Itoa(o.OrphanCommit), "orphanRollback="+strconv.Itoa(o.OrphanRollback))
	if o.OrphanWait > 0 {
		argv = append(argv, "maxMs="+strconv.FormatInt(o.OrphanWait.Milliseconds(), 10))
	}
	if o.AccessKey != "" && o.SecretKey != "" {
		argv = append(argv, "accessKey="+o.AccessKey, "secretKey="+o.SecretKey)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	sends := driverLines[GRPCSend](t, bytes.NewBuffer(stdout.Bytes()), `{"kind"`, "gRPC producer")
	if len(sends) == 0 {
		t.Fatalf("rmqtest: the gRPC producer printed no sends (%v)\nstderr:\n%s\nclient log:\n%s", runErr,
			truncate(stderr.Bytes(), 4000), clientLog(home))
	}
	if runErr != nil && sends[0].Kind != "start" {
		t.Fatalf("rmqtest: the gRPC producer failed after %d sends: %v\nstderr:\n%s", len(sends), runErr, truncate(stderr.Bytes(), 4000))
	}
	run := GRPCRun{Sends: sends, Log: clientLog(home), Checks: driverLines[GRPCCheck](t, bytes.NewBuffer(stdout.Bytes()), `{"checked"`, "gRPC producer")}
	if b, err := os.ReadFile(filepath.Join(home, "logs", "rocketmq", "rocketmq-client.log")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, " WARN ") || strings.Contains(line, " ERROR ") {
				run.Problems = append(run.Problems, line)
			}
		}
	}
	return run
}

// clientLog is the end of the gRPC SDK's own log under home, which says why a send failed.
func clientLog(home string) string {
	b, err := os.ReadFile(filepath.Join(home, "logs", "rocketmq", "rocketmq-client.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return strings.TrimSpace(string(b))
}
