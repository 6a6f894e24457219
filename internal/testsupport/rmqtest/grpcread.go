package rmqtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// GRPCReader is one consumer of a read-back run: a SimpleConsumer ("simple") or a PushConsumer
// ("push") of group Group at Endpoint.
type GRPCReader struct {
	Name, Mode, Endpoint, Group string
}

// GRPCReadOptions configure a read-back run: every reader subscribes to every topic (all tags)
// and reads until it has Count messages or Timeout passed.
type GRPCReadOptions struct {
	Topics  []string
	Readers []GRPCReader
	Count   int
	// Timeout bounds the reading; 0 means 2 min.
	Timeout time.Duration
}

// GRPCRead is one message a reader read (Kind "received"), or a failure: a consumer that could
// not start ("start"), a failed receive ("receive") or a failed ack ("ack").
type GRPCRead struct {
	Reader string            `json:"reader"`
	Kind   string            `json:"kind"`
	MsgID  string            `json:"msgId"`
	Topic  string            `json:"topic"`
	Tag    string            `json:"tag"`
	Keys   []string          `json:"keys"`
	Props  map[string]string `json:"props"`
	// BodyLen and BodySHA256 are the body the application got.
	BodyLen    int    `json:"bodyLen"`
	BodySHA256 string `json:"bodySha256"`
	// Encoding is the body_encoding the message carried on the wire (the Python driver only).
	Encoding string `json:"encoding"`
	Error    string `json:"error"`
}

// readerArgs are the drivers' common arguments for o.
func readerArgs(o GRPCReadOptions) []string {
	argv := []string{"topics=" + strings.Join(o.Topics, ","), "count=" + strconv.Itoa(o.Count),
		"timeoutMs=" + strconv.FormatInt(o.Timeout.Milliseconds(), 10)}
	for i, r := range o.Readers {
		argv = append(argv, "reader."+strconv.Itoa(i)+"="+strings.Join([]string{r.Name, r.Mode, r.Endpoint, r.Group}, ","))
	}
	return argv
}

// ReadGRPCJava runs o's readers with RocketMQ 5's Java gRPC SDK, all in one JVM (the driver's
// GrpcRead.java), and returns what they read. It fails the test only when the driver cannot run;
// failed receives are results, for the test to judge.
func ReadGRPCJava(t TB, dir string, o GRPCReadOptions) []GRPCRead {
	t.Helper()
	_, cp, err := GRPCClassPath()
	if err != nil {
		t.Fatal(err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	home := filepath.Join(dir, "grpc-reader-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"-Xmx512m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-cp", cp, "dev.detour.rmqdriver.GrpcRead")
	return runReader(t, "java", append(argv, readerArgs(o)...), nil, o.Timeout, "Java gRPC reader")
}

// ReadGRPCPython runs o's readers with RocketMQ's Python gRPC client (plaintext, the client's
// default), all in one process (the driver's grpc_read.py), and returns what they read. Under go
// test -short it skips the test; a missing client fails it with what to do.
func ReadGRPCPython(t TB, dir string, o GRPCReadOptions) []GRPCRead {
	t.Helper()
	client, _ := LocatePythonClient(t)
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	home := filepath.Join(dir, "python-reader-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"-X", "utf8", filepath.Join(client, "grpc_read.py")}, readerArgs(o)...)
	env := append(os.Environ(), "HOME="+home, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	return runReader(t, filepath.Join(client, "venv", "bin", "python"), argv, env, o.Timeout, "Python gRPC reader")
}

// runReader runs a reader driver to its end, a minute beyond timeout at most (to start and close
// its consumers), and decodes its lines.
func runReader(t TB, prog string, argv, env []string, timeout time.Duration, what string) []GRPCRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, argv...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Logf("rmqtest: the %s exited with %v\nstderr:\n%s", what, err, truncate(stderr.Bytes(), 4000))
	}
	return driverLines[GRPCRead](t, &stdout, `{"reader"`, what)
}

// EnvNodeClient names the environment variable that points at the folder
// hack/setup-node-client.sh prints: RocketMQ's Node.js gRPC client (rocketmq-client-nodejs) and
// the project's driver for it (hack/rocketmq/node).
const EnvNodeClient = "DETOUR_NODE_CLIENT"

// LocateNodeClient is the folder hack/setup-node-client.sh prints and the client's version in it.
// Under go test -short it skips the test (the fast tier runs no real clients); otherwise a missing
// client fails the test with what to do.
func LocateNodeClient(t TB) (dir, version string) {
	t.Helper()
	skipShort(t)
	dir = os.Getenv(EnvNodeClient)
	if dir == "" {
		t.Fatalf("rmqtest: %s is not set: run `make test`, or `%s=$(hack/setup-node-client.sh) go test ...` (needs node and npm)", EnvNodeClient, EnvNodeClient)
	}
	b, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		t.Fatalf("rmqtest: %s=%s is not a folder hack/setup-node-client.sh completed: %v", EnvNodeClient, dir, err)
	}
	return dir, strings.TrimSpace(string(b))
}

// ReadGRPCNode runs o's readers with RocketMQ's Node.js gRPC client (plaintext, the client's
// default), all in one process (the driver's grpc_read.js), and returns what they read. A
// missing client fails the test with what to do.
func ReadGRPCNode(t TB, dir string, o GRPCReadOptions) []GRPCRead {
	t.Helper()
	client, _ := LocateNodeClient(t)
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	// The client logs under $HOME/logs/rocketmq; a home of its own keeps each run's log apart.
	home := filepath.Join(dir, "node-reader-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{filepath.Join(client, "grpc_read.js")}, readerArgs(o)...)
	env := append(os.Environ(), "HOME="+home)
	return runReader(t, "node", argv, env, o.Timeout, "Node.js gRPC reader")
}
