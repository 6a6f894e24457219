package rmqtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// GRPCConsumeOptions configure a run of RocketMQ 5's gRPC SDK as a SimpleConsumer (the driver's
// GrpcConsume.java), with the SDK's defaults (TLS on) except its endpoint, group and topic.
type GRPCConsumeOptions struct {
	// Endpoint is the access point, host:port.
	Endpoint string
	Topic    string
	// Group is the consumer group.
	Group string
	// Count stops the consumer once it has acknowledged this many messages.
	Count int
	// Await is each receive's long poll; 0 means 5 s.
	Await time.Duration
	// Timeout stops receiving after this long in any case; 0 means 90 s.
	Timeout time.Duration
}

// GRPCReceived is one message the SimpleConsumer received (Kind "received"), a receive that
// failed (Kind "receive") or its failure to start (Kind "start").
type GRPCReceived struct {
	Kind  string `json:"kind"`
	MsgID string `json:"msgId"`
	Body  string `json:"body"`
	Tag   string `json:"tag"`
	// Acked is whether the consumer's ack of the message succeeded.
	Acked bool   `json:"acked"`
	Error string `json:"error"`
}

// GRPCConsumeRun is a run of the gRPC SDK's SimpleConsumer.
type GRPCConsumeRun struct {
	// Received are the messages and failed receives in order.
	Received []GRPCReceived
	// Log is the end of the SDK's log.
	Log string
}

// ConsumeGRPC runs the gRPC SDK's SimpleConsumer with o to its end. It fails the test only when
// the driver cannot run; failed receives and acks are results, for the test to judge.
func ConsumeGRPC(t TB, dir string, o GRPCConsumeOptions) GRPCConsumeRun {
	t.Helper()
	_, cp, err := GRPCClassPath()
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "grpc-consumer-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.Await <= 0 {
		o.Await = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 90 * time.Second
	}
	argv := append([]string{"-Xmx256m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-cp", cp, "dev.detour.rmqdriver.GrpcConsume",
		"endpoints="+o.Endpoint, "topic="+o.Topic, "group="+o.Group, "count="+strconv.Itoa(o.Count),
		"timeoutMs="+strconv.FormatInt(o.Timeout.Milliseconds(), 10), "awaitMs="+strconv.FormatInt(o.Await.Milliseconds(), 10))
	// The JVM gets a minute beyond the receiving time to start and close the consumer.
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Logf("rmqtest: the gRPC consumer exited with %v\nstderr:\n%s", err, truncate(stderr.Bytes(), 4000))
	}
	return GRPCConsumeRun{Received: driverLines[GRPCReceived](t, &stdout, `{"kind"`, "gRPC consumer"), Log: clientLog(home)}
}
