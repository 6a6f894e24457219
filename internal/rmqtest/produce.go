package rmqtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	// StartAt aligns the first send slot; zero means when the producer is ready.
	StartAt time.Time
}

// JavaSend is one send of the Java producer.
type JavaSend struct {
	Sender    int       `json:"sender"`
	StartMs   int64     `json:"startMs"`
	LatencyUs int64     `json:"latencyUs"`
	OK        bool      `json:"ok"`
	Broker    string    `json:"broker"`
	QueueID   int       `json:"queueId"`
	Brokers   []string  `json:"brokers"`
	Error     string    `json:"error"`
	Start     time.Time `json:"-"`
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
	ns := strings.Join(o.NameServers, ";")
	if ns == "" {
		ns = c.nsAddr
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
	if !o.StartAt.IsZero() {
		args = append(args, "startAtMs="+strconv.FormatInt(o.StartAt.UnixMilli(), 10))
	}
	argv := append([]string{"-Xmx256m"}, JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
		"-cp", c.Dist.ClientClassPath, "dev.detour.rmqdriver.Produce")
	argv = append(argv, args...)
	p := &JavaProducer{cmd: exec.Command("java", argv...), ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
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
