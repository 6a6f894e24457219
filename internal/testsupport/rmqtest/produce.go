package rmqtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProducerOptions configure a run of RocketMQ's own Java DefaultMQProducer (the project's driver
// in hack/rocketmq, Produce.java).
type ProducerOptions struct {
	// NameServers is the producer's namesrvAddr; empty means the cluster's name server.
	NameServers []string
	Topic       string
	// Senders threads share Rate sends per second for Duration, each send of Size bytes.
	Senders  int
	Rate     float64
	Duration time.Duration
	Size     int
	// FaultEnable is sendLatencyFaultEnable (RocketMQ's default is off).
	FaultEnable bool
	// PollNameServerInterval is how often the client asks for routes (RocketMQ's default 30 s);
	// 0 keeps the default.
	PollNameServerInterval time.Duration
	// Retries is retryTimesWhenSendFailed (default 2); SendTimeout is sendMsgTimeout (default 3 s);
	// PerAttemptTimeout is 5.x's sendMsgMaxTimeoutPerRequest (0 leaves it unset).
	Retries                        *int
	SendTimeout, PerAttemptTimeout time.Duration
	// Detector is 5.x's startDetectorEnable: the fault strategy probes the brokers it isolated
	// and lifts an isolation as soon as one answers.
	Detector bool
	// GRPCEndpoint, when set, runs RocketMQ 5's gRPC SDK producer (the driver's GrpcPaced, SDK
	// defaults but the endpoint) against this access point on the same schedule instead of the
	// remoting producer; the options above that only a remoting producer has are then ignored,
	// and a send's Brokers hold only the broker its receipt names.
	GRPCEndpoint string
	// StartAt aligns the first send slot; zero means when the producer is ready.
	StartAt time.Time
	// Client is the release line whose Java client runs the producer; "" means the cluster's own.
	// RocketMQ's clients speak to brokers of the other line too (a 4.9.8 client on 5.x brokers is
	// how most upgrades run), so one cluster can measure both clients.
	Client Line
	// Warmup sends this many one-byte messages before the producer reports ready and the schedule
	// starts; they are not recorded. They fetch the route and open the connections, as a harness
	// warms up every producer it compares.
	Warmup int
	// Shared makes the senders share one schedule (slot i at the start + i/Rate, a sender that is
	// behind sends at once, nothing issued later than 100 ms after Duration), as the fault
	// benchmark paces its Go producers; otherwise each sender keeps its own slots.
	Shared bool
	// Deferred leaves the start of the schedule to Begin, so that a harness can start its clock
	// once the JVM is up and warm; StartAt is then ignored.
	Deferred bool
}

// JavaSend is one send of the Java producer.
type JavaSend struct {
	Sender    int      `json:"sender"`
	StartMs   int64    `json:"startMs"`
	LatencyUs int64    `json:"latencyUs"`
	OK        bool     `json:"ok"`
	Broker    string   `json:"broker"`
	QueueID   int      `json:"queueId"`
	Brokers   []string `json:"brokers"`
	Error     string   `json:"error"`
	// Slot is the send's place in the schedule (with Shared, the global index; otherwise the
	// sender's own count).
	Slot int `json:"slot"`
	// Attempts are the send's attempts as RocketMQ's send hook saw them, in order.
	Attempts []JavaAttempt `json:"attempts"`
	Start    time.Time     `json:"-"`
}

// JavaAttempt is one attempt of a Java send on one broker.
type JavaAttempt struct {
	Broker string `json:"broker"`
	// StartUs is from the start of the send.
	StartUs   int64 `json:"startUs"`
	LatencyUs int64 `json:"latencyUs"`
	OK        bool  `json:"ok"`
}

// Latency is the send's duration.
func (s JavaSend) Latency() time.Duration { return time.Duration(s.LatencyUs) * time.Microsecond }

// JavaProducer is a running Java producer.
type JavaProducer struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	sends  []JavaSend
	stderr strings.Builder
	err    error
	stdin  io.WriteCloser // Deferred only
}

// lockedWriter guards the stderr buffer, which the exec package writes from its own goroutine.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Begin starts the schedule of a producer started with Deferred: its first slot is at.
func (p *JavaProducer) Begin(at time.Time) error {
	if p.stdin == nil {
		return fmt.Errorf("rmqtest: Begin on a producer not started with Deferred")
	}
	_, err := fmt.Fprintf(p.stdin, "%d\n", at.UnixMilli())
	if cerr := p.stdin.Close(); err == nil {
		err = cerr
	}
	return err
}

// StartProducer starts the line's Java producer with o; it returns once the producer has started
// (fetched nothing yet: RocketMQ clients ask for a topic's route on its first send). The process
// is killed when the test ends.
func (c *Cluster) StartProducer(o ProducerOptions) *JavaProducer {
	c.t.Helper()
	home := filepath.Join(c.dir, "producer-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.MkdirAll(home, 0o755); err != nil {
		c.t.Fatal(err)
	}
	args := o.driverArgs(c.nsAddr)
	cp, main, err := producerClassPath(c, o)
	if err != nil {
		c.t.Fatal(err)
	}
	argv := append([]string{"-Xmx256m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
		"-cp", cp, main)
	argv = append(argv, args...)
	p := &JavaProducer{cmd: exec.Command("java", argv...), ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, b: &p.stderr}
	// Killed with the process that started it, as brokers are: a test binary or benchmark that is
	// killed must not leave a producer sending.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if o.Deferred {
		in, err := p.cmd.StdinPipe()
		if err != nil {
			c.t.Fatal(err)
		}
		p.stdin = in
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	go p.read(stdout)
	select {
	case <-p.ready:
	case <-p.done:
		c.t.Fatalf("rmqtest: Java producer exited before it was ready: %v\n%s", p.err, p.stderrText())
	case <-time.After(startTimeout):
		c.t.Fatalf("rmqtest: Java producer not ready within %v", startTimeout)
	}
	return p
}

// producerClassPath is the class path and main class of the producer o asks for: the gRPC SDK's
// paced driver, or the remoting producer of the cluster's line or of o.Client's.
func producerClassPath(c *Cluster, o ProducerOptions) (cp, main string, err error) {
	if o.GRPCEndpoint != "" {
		_, cp, err = GRPCClassPath()
		return cp, "dev.detour.rmqdriver.GrpcPaced", err
	}
	if o.Client == "" || o.Client == c.Dist.Line {
		return c.Dist.ClientClassPath, "dev.detour.rmqdriver.Produce", nil
	}
	d, err := locate(o.Client)
	if err != nil {
		return "", "", err
	}
	return d.ClientClassPath, "dev.detour.rmqdriver.Produce", nil
}

// driverArgs are the Java driver's key=value arguments for o; the producer asks
// defaultNameServer when o names no name servers.
func (o ProducerOptions) driverArgs(defaultNameServer string) []string {
	ns := strings.Join(o.NameServers, ";")
	if ns == "" {
		ns = defaultNameServer
	}
	args := []string{"namesrv=" + ns, "topic=" + o.Topic,
		"senders=" + strconv.Itoa(max(o.Senders, 1)), "rate=" + strconv.FormatFloat(o.Rate, 'f', -1, 64),
		"durationMs=" + strconv.FormatInt(o.Duration.Milliseconds(), 10), "size=" + strconv.Itoa(max(o.Size, 1)),
		"faultEnable=" + strconv.FormatBool(o.FaultEnable)}
	if o.PollNameServerInterval > 0 {
		args = append(args, "pollMs="+strconv.FormatInt(o.PollNameServerInterval.Milliseconds(), 10))
	}
	if o.Retries != nil {
		args = append(args, "retries="+strconv.Itoa(*o.Retries))
	}
	if o.SendTimeout > 0 {
		args = append(args, "timeoutMs="+strconv.FormatInt(o.SendTimeout.Milliseconds(), 10))
	}
	if o.PerAttemptTimeout > 0 {
		args = append(args, "perAttemptMs="+strconv.FormatInt(o.PerAttemptTimeout.Milliseconds(), 10))
	}
	switch {
	case o.Deferred:
		args = append(args, "startAtMs=stdin")
	case !o.StartAt.IsZero():
		args = append(args, "startAtMs="+strconv.FormatInt(o.StartAt.UnixMilli(), 10))
	}
	if o.Detector {
		args = append(args, "detector=true")
	}
	if o.Warmup > 0 {
		args = append(args, "warmup="+strconv.Itoa(o.Warmup))
	}
	if o.Shared {
		args = append(args, "shared=true")
	}
	if o.GRPCEndpoint != "" {
		args = append(args, "endpoints="+o.GRPCEndpoint)
	}
	return args
}

func (p *JavaProducer) read(stdout interface{ Read([]byte) (int, error) }) {
	defer close(p.done)
	sc := bufio.NewScanner(stdout)
	readyOnce := sync.Once{}
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case strings.HasPrefix(string(line), `{"ready"`):
			readyOnce.Do(func() { close(p.ready) })
		case strings.HasPrefix(string(line), `{"sender"`):
			var s JavaSend
			if json.Unmarshal(line, &s) == nil {
				s.Start = time.UnixMilli(s.StartMs)
				p.mu.Lock()
				p.sends = append(p.sends, s)
				p.mu.Unlock()
			}
		}
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

func (p *JavaProducer) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stderr.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// Sends returns the sends recorded so far.
func (p *JavaProducer) Sends() []JavaSend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]JavaSend(nil), p.sends...)
}

// Wait waits until the producer has finished its schedule and exited, and returns every send.
func (p *JavaProducer) Wait(ctx context.Context) ([]JavaSend, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.Sends(), ctx.Err()
	}
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		return p.Sends(), fmt.Errorf("java producer: %v\n%s", err, p.stderrText())
	}
	return p.Sends(), nil
}
