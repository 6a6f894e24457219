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

// EnvPythonClient names the environment variable that points at the folder
// hack/setup-python-client.sh prints: a virtual environment with RocketMQ's Python gRPC client
// (rocketmq-python-client) and the project's driver for it (hack/rocketmq/python).
const EnvPythonClient = "DETOUR_PYTHON_CLIENT"

// PythonGRPCSendOptions configure a run of RocketMQ's Python gRPC client (grpc_produce.py). The
// producer keeps the client's defaults (plaintext, three attempts, 3 s per request) except its
// endpoint and, with TLS, TLS.
type PythonGRPCSendOptions struct {
	GRPCSendOptions
	// TLS turns the client's TLS on. It verifies the endpoint's certificate against gRPC's default
	// roots, which RootsFile replaces.
	TLS bool
	// RootsFile, when set, is a PEM file of the root certificates the client trusts (passed in
	// gRPC's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
	RootsFile string
}

// PythonGRPCRun is a run of the Python client's producer.
type PythonGRPCRun struct {
	GRPCRun
	// Heartbeats and Routes count the heartbeats answered OK and the route answers the client
	// logged (it logs every one at INFO): with a pause, they show its session's schedulers ran.
	Heartbeats, Routes int
}

// PythonClient is the folder hack/setup-python-client.sh prints and the client's version in it.
func PythonClient() (dir, version string, err error) {
	dir = os.Getenv(EnvPythonClient)
	if dir == "" {
		return "", "", fmt.Errorf("rmqtest: %s is not set: run `make test`, or `%s=$(hack/setup-python-client.sh) go test ...` (needs python3 with its venv module)", EnvPythonClient, EnvPythonClient)
	}
	b, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return "", "", fmt.Errorf("rmqtest: %s=%s is not a folder hack/setup-python-client.sh completed: %w", EnvPythonClient, dir, err)
	}
	return dir, strings.TrimSpace(string(b)), nil
}

// LocatePythonClient is PythonClient for a test: under go test -short it skips the test (the fast
// tier runs no real clients); otherwise a missing client fails the test with what to do.
func LocatePythonClient(t TB) (dir, version string) {
	t.Helper()
	skipShort(t)
	dir, version, err := PythonClient()
	if err != nil {
		t.Fatal(err)
	}
	return dir, version
}

// PythonGRPCSend runs the Python client's producer with o to its end and returns its sends in
// order. Under go test -short it skips the test (the fast tier runs no real clients); otherwise a
// missing client fails the test with what to do. Like SendGRPC, it fails the test only when the
// driver cannot run or prints nothing it can read; failed sends are results, for the test to judge.
func PythonGRPCSend(t TB, dir string, o PythonGRPCSendOptions) PythonGRPCRun {
	t.Helper()
	client, _ := LocatePythonClient(t)
	// The client logs under $HOME/logs/rocketmq_python; a home of its own keeps each run's log apart.
	home := filepath.Join(dir, "python-producer-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(client, "venv", "bin", "python"), pythonArgs(client, o)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	if o.RootsFile != "" {
		cmd.Env = append(cmd.Env, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH="+o.RootsFile)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	logFile := filepath.Join(home, "logs", "rocketmq_python", "rocketmq_client.log")
	sends := driverLines[GRPCSend](t, bytes.NewBuffer(stdout.Bytes()), `{"kind"`, "Python gRPC producer")
	if len(sends) == 0 {
		t.Fatalf("rmqtest: the Python gRPC producer printed no sends (%v)\nstderr:\n%s\nclient log:\n%s", runErr,
			truncate(stderr.Bytes(), 4000), logTail(logFile))
	}
	if runErr != nil && sends[0].Kind != "start" {
		t.Fatalf("rmqtest: the Python gRPC producer failed after %d sends: %v\nstderr:\n%s", len(sends), runErr, truncate(stderr.Bytes(), 4000))
	}
	run := PythonGRPCRun{GRPCRun: GRPCRun{Sends: sends, Log: logTail(logFile),
		Checks: driverLines[GRPCCheck](t, bytes.NewBuffer(stdout.Bytes()), `{"checked"`, "Python gRPC producer")}}
	readPythonLog(logFile, o.Topic, &run)
	return run
}

// pythonArgs is the driver's command line for o.
func pythonArgs(client string, o PythonGRPCSendOptions) []string {
	argv := []string{"-X", "utf8", filepath.Join(client, "grpc_produce.py"),
		"endpoints=" + o.Endpoint, "topic=" + o.Topic, "normal=" + strconv.Itoa(o.Normal), "fifo=" + strconv.Itoa(o.FIFO),
		"groups=" + strconv.Itoa(max(o.Groups, 1)), "delay=" + strconv.Itoa(o.Delayed),
		"delayMs=" + strconv.FormatInt(o.Delay.Milliseconds(), 10), "pauseMs=" + strconv.FormatInt(o.Pause.Milliseconds(), 10),
		"tls=" + strconv.FormatBool(o.TLS), "commit=" + strconv.Itoa(o.Commit), "rollback=" + strconv.Itoa(o.Rollback),
		"orphanCommit=" + strconv.Itoa(o.OrphanCommit), "orphanRollback=" + strconv.Itoa(o.OrphanRollback)}
	if o.OrphanWait > 0 {
		argv = append(argv, "maxMs="+strconv.FormatInt(o.OrphanWait.Milliseconds(), 10))
	}
	if o.AccessKey != "" && o.SecretKey != "" {
		argv = append(argv, "accessKey="+o.AccessKey, "secretKey="+o.SecretKey)
	}
	return argv
}

// readPythonLog fills run's Problems (the WARNING, ERROR and CRITICAL lines; the log's format is
// "time [LEVEL] message"), Heartbeats and Routes (of topic) from the Python client's log.
func readPythonLog(logFile, topic string, run *PythonGRPCRun) {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, " [WARNING] ") || strings.Contains(line, " [ERROR] ") || strings.Contains(line, " [CRITICAL] "):
			run.Problems = append(run.Problems, line)
		case strings.Contains(line, " send heartbeat to ") && strings.HasSuffix(line, " success."):
			run.Heartbeats++
		case strings.Contains(line, " update topic:"+topic+" route, route info: "):
			run.Routes++
		}
	}
}

// logTail is the end of a client's log, which says why a send failed.
func logTail(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return strings.TrimSpace(string(b))
}
