package rmqtest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// GRPCLoadOptions configure a load run of RocketMQ 5's gRPC SDK (rocketmq-client-java, the
// driver's GrpcLoad.java): one producer with the SDK's defaults but the endpoint, and Senders
// threads calling its synchronous send in a loop, in a JVM of its own.
type GRPCLoadOptions struct {
	// Endpoint is the access point, host:port.
	Endpoint string
	Topic    string
	// Senders is how many threads send at once; 0 means one.
	Senders int
	// Warmup is how long the senders run before the measured phase.
	Warmup time.Duration
	// Duration bounds the measured phase; Count, when above zero, ends it after that many sends.
	// Stop ends it earlier.
	Duration time.Duration
	Count    int
	// BodyBytes is each message's body size; 0 means 1 KiB.
	BodyBytes int
	// Interval is a pause after each send of each sender, to pace the load.
	Interval time.Duration
	// Handshake holds the measured phase until Go is called, so the caller can sample what it
	// measures exactly at its start.
	Handshake bool
	// Timeout bounds the whole run; 0 means the warm-up and the duration plus two minutes.
	Timeout time.Duration
	// Plaintext turns the SDK's TLS off (enableSsl false); by default it speaks TLS, as the SDK
	// does.
	Plaintext bool
}

// GRPCLoadPhase is what the SDK's senders did in one phase: successful and failed sends and, for
// the measured phase, its length and the nearest-rank percentiles of the successful sends'
// latency.
type GRPCLoadPhase struct {
	Phase      string `json:"phase"`
	Sent       int64  `json:"sent"`
	Failed     int64  `json:"failed"`
	ElapsedMs  int64  `json:"elapsedMs"`
	P50Us      int64  `json:"p50Us"`
	P90Us      int64  `json:"p90Us"`
	P99Us      int64  `json:"p99Us"`
	MaxUs      int64  `json:"maxUs"`
	FirstError string `json:"firstError"`
}

// Rate is the successful sends per second of the phase.
func (p GRPCLoadPhase) Rate() float64 {
	if p.ElapsedMs <= 0 {
		return 0
	}
	return float64(p.Sent) / (float64(p.ElapsedMs) / 1000)
}

// P99 is the phase's 99th percentile send latency.
func (p GRPCLoadPhase) P99() time.Duration { return time.Duration(p.P99Us) * time.Microsecond }

// GRPCLoad is a running load of the gRPC SDK.
type GRPCLoad struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdin  io.WriteCloser
	stderr bytes.Buffer
	home   string
	phases chan GRPCLoadPhase
	done   chan struct{} // closed once the driver exited, exited set
	exited error

	stopOnce sync.Once
}

// StartGRPCLoad starts the SDK's load driver with o. Read its phases with Warm and Wait.
func StartGRPCLoad(t TB, dir string, o GRPCLoadOptions) *GRPCLoad {
	t.Helper()
	_, cp, err := GRPCClassPath()
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "grpc-load-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.Timeout <= 0 {
		o.Timeout = o.Warmup + o.Duration + 2*time.Minute
	}
	argv := append([]string{"-Xmx512m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-cp", cp, "dev.detour.rmqdriver.GrpcLoad",
		"endpoints="+o.Endpoint, "topic="+o.Topic, "senders="+strconv.Itoa(max(o.Senders, 1)),
		"warmupMs="+strconv.FormatInt(o.Warmup.Milliseconds(), 10),
		"durationMs="+strconv.FormatInt(o.Duration.Milliseconds(), 10), "count="+strconv.Itoa(o.Count),
		"bodyBytes="+strconv.Itoa(cmp.Or(o.BodyBytes, 1024)), "intervalMs="+strconv.FormatInt(o.Interval.Milliseconds(), 10),
		"handshake="+strconv.FormatBool(o.Handshake), "tls="+strconv.FormatBool(!o.Plaintext))
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	l := &GRPCLoad{cancel: cancel, home: home, phases: make(chan GRPCLoadPhase, 2), done: make(chan struct{})}
	l.cmd = exec.CommandContext(ctx, "java", argv...)
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	l.cmd.Stderr = &l.stderr
	if l.stdin, err = l.cmd.StdinPipe(); err != nil {
		cancel()
		t.Fatal(err)
	}
	stdout, err := l.cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("rmqtest: start the gRPC load driver: %v", err)
	}
	go l.readPhases(stdout)
	t.Cleanup(func() {
		l.Stop()
		cancel()
	})
	return l
}

// readPhases passes on the driver's phase lines and then its exit.
func (l *GRPCLoad) readPhases(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"phase"`)) {
			continue
		}
		var p GRPCLoadPhase
		if err := json.Unmarshal(line, &p); err != nil {
			continue
		}
		l.phases <- p
		if p.Phase != "warm" {
			break
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	l.exited = l.cmd.Wait()
	close(l.done)
	close(l.phases)
}

// next is the driver's next phase line, or an error with what it said when it ended without one.
func (l *GRPCLoad) next(want string) (GRPCLoadPhase, error) {
	p, ok := <-l.phases
	if !ok {
		<-l.done
		return p, fmt.Errorf("rmqtest: the gRPC load driver ended before its %s phase (%v)\nstderr:\n%s\nclient log:\n%s",
			want, l.exited, truncate(l.stderr.Bytes(), 4000), clientLog(l.home))
	}
	if p.Phase != want {
		return p, fmt.Errorf("rmqtest: the gRPC load driver reported phase %q (%s), want %q\nclient log:\n%s",
			p.Phase, p.FirstError, want, clientLog(l.home))
	}
	return p, nil
}

// Warm waits for the end of the warm-up and returns what it did.
func (l *GRPCLoad) Warm() (GRPCLoadPhase, error) { return l.next("warm") }

// Go starts a measured phase held by Handshake.
func (l *GRPCLoad) Go() error {
	_, err := io.WriteString(l.stdin, "go\n")
	return err
}

// Stop ends the measured phase early (and releases a held one, which then ends at once).
func (l *GRPCLoad) Stop() {
	l.stopOnce.Do(func() { _ = l.stdin.Close() })
}

// Done waits for the measured phase to end and returns it, without waiting for the driver to
// close its producer and exit (see Close).
func (l *GRPCLoad) Done() (GRPCLoadPhase, error) { return l.next("done") }

// Close waits for the driver to exit, after Done, and returns its exit's error.
func (l *GRPCLoad) Close() error {
	l.Stop()
	for range l.phases {
	}
	<-l.done
	if l.exited != nil {
		return fmt.Errorf("rmqtest: the gRPC load driver exited with %w", l.exited)
	}
	return nil
}
