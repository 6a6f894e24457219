package producer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestDifferentialRetryRulesMatchRocketMQsProducer holds the send loop's rules per preset against
// RocketMQ's own DefaultMQProducer (client 5.5.0 for RocketMQ5 and Disabled, 4.9.8 for RocketMQ4;
// the SendScript driver in hack/rocketmq) on the same brokersim broker: for each send mode and
// broker fault, both sides must make the same number of attempts (counted by the broker, or by
// the final error's "Send [n] times" where a refused connection leaves the broker nothing to
// count) and end the same way. One broker keeps selection out of it; the selection and fault
// updates behind the retries are the differential selection test's.
//
// Not covered here: retries of async sends after transport failures (RocketMQ retries them inside
// its async callback, where neither the broker nor the driver can count them; the send loop's
// unit tests and the source cover them). The time budget, selection across brokers and the fault
// updates of whole sync sends are the loop differential's (TestDifferentialSendLoopMatches
// RocketMQsProducer), which runs on a virtual clock.
func TestDifferentialRetryRulesMatchRocketMQsProducer(t *testing.T) {
	// broker-a serves topic and takes each scenario's fault; broker-b serves refusedTopic and
	// refuses every connection from the start, so that no connection RocketMQ's client starts in
	// the background can succeed later and deliver a oneway send into another scenario's count.
	const topic, refusedTopic = "TopicRetryRules", "TopicRefused"
	refused := brokersim.Fault{Refuse: true}
	scenarios := []retryScenario{
		{"sync SYSTEM_BUSY", "sync", brokersim.Fault{Code: remoting.SystemBusy}},
		{"sync SYSTEM_ERROR", "sync", brokersim.Fault{Code: remoting.SystemError}},
		{"sync TOPIC_NOT_EXIST", "sync", brokersim.Fault{Code: remoting.TopicNotExist}},
		{"sync MESSAGE_ILLEGAL", "sync", brokersim.Fault{Code: remoting.MessageIllegal}},
		{"sync FLOW_CONTROL", "sync", brokersim.Fault{Code: remoting.FlowControl}},
		{"async SYSTEM_ERROR", "async", brokersim.Fault{Code: remoting.SystemError}},
		{"async SYSTEM_BUSY", "async", brokersim.Fault{Code: remoting.SystemBusy}},
		{"oneway SYSTEM_ERROR", "oneway", brokersim.Fault{Code: remoting.SystemError}},
		{"sync refused", "sync", refused},
		{"oneway refused", "oneway", refused},
		{"sync healthy", "sync", brokersim.Fault{}},
		{"async healthy", "async", brokersim.Fault{}},
	}
	for _, run := range []struct {
		line    rmqtest.Line
		presets []Preset
	}{
		{rmqtest.V5, []Preset{PresetRocketMQ5, PresetDisabled}},
		{rmqtest.V4, []Preset{PresetRocketMQ4}},
	} {
		t.Run(run.line.String(), func(t *testing.T) {
			b, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			b.CreateTopic(topic, 2)
			dead, err := brokersim.StartBroker("broker-b", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dead.Close() })
			dead.CreateTopic(refusedTopic, 2)
			ns, err := brokersim.StartNameServer("127.0.0.1:0", b, dead)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ns.Close() })
			java := startSendScript(t, run.line)
			for _, preset := range run.presets {
				t.Run(string(preset), func(t *testing.T) {
					enable := 1
					if preset == PresetDisabled {
						enable = 0
					}
					b.SetFault(brokersim.Fault{})
					java.expect(t, fmt.Sprintf("producer %s %d 2 3000", ns.Addr(), enable), `{"ready":true}`)
					// The producer learns the routes on its first sends.
					dead.SetFault(brokersim.Fault{})
					for _, to := range []string{topic, refusedTopic} {
						if o := java.send(t, "sync", to); !o.OK {
							t.Fatalf("RocketMQ's first send to a healthy broker: %+v", o)
						}
					}
					r := retryRulesRuntime(t, preset, b.Addr(), dead.Addr(), topic, refusedTopic)
					dead.SetFault(refused)
					compareRetryScenarios(t, java, r, b, topic, refusedTopic, scenarios)
				})
			}
		})
	}
}

// retryScenario is one send mode against one broker fault.
type retryScenario struct {
	name  string
	mode  string
	fault brokersim.Fault
}

// compareRetryScenarios sends once per scenario through RocketMQ's producer and through r, and
// requires the same attempts (counted by broker-a, or from the final error for a refusing
// broker, whose topic is refusedTopic) and the same end.
func compareRetryScenarios(t *testing.T, java *sendScript, r *Runtime, b *brokersim.Broker, topic, refusedTopic string, scenarios []retryScenario) {
	t.Helper()
	for _, sc := range scenarios {
		to := topic
		if sc.fault.Refuse {
			to = refusedTopic
		} else {
			b.SetFault(sc.fault)
		}
		before := b.Stats().SendsReceived
		jo := java.send(t, sc.mode, to)
		jo.Attempts = attemptsOf(t, b, before, sc.fault, jo)
		before = b.Stats().SendsReceived
		do := detourSend(r, sc.mode, to)
		do.Attempts = attemptsOf(t, b, before, sc.fault, do)
		b.SetFault(brokersim.Fault{})
		if jo.OK != do.OK || jo.Attempts != do.Attempts || (!jo.OK && sc.fault.Code != 0 && jo.Code != do.Code) {
			t.Errorf("%s: RocketMQ %s made %d attempts (ok %v, code %d: %s); detour %d (ok %v, code %d: %s)",
				sc.name, java.version, jo.Attempts, jo.OK, jo.Code, jo.Message, do.Attempts, do.OK, do.Code, do.Message)
		}
	}
}

// retryRulesRuntime is a runtime under preset that sends topic to broker-a at addr and
// refusedTopic to broker-b at deadAddr, two queues each.
func retryRulesRuntime(t *testing.T, preset Preset, addr, deadAddr, topic, refusedTopic string) *Runtime {
	t.Helper()
	r := New(Options{})
	t.Cleanup(func() { r.Close() })
	if err := r.SetPolicy(mustPresetPolicy(t, "p", preset)); err != nil {
		t.Fatal(err)
	}
	r.SetBroker(Broker{Name: "broker-a", Addr: addr, Ready: true})
	r.SetBroker(Broker{Name: "broker-b", Addr: deadAddr, Ready: true})
	for _, rt := range []Route{
		{Topic: topic, Policy: "p", Brokers: []BrokerQueues{{Broker: "broker-a", WriteQueues: 2}}},
		{Topic: refusedTopic, Policy: "p", Brokers: []BrokerQueues{{Broker: "broker-b", WriteQueues: 2}}},
	} {
		if err := r.SetRoute(rt); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// sendOutcome is how one send ended, on either side.
type sendOutcome struct {
	OK       bool   `json:"ok"`
	Code     int    `json:"code"`
	Message  string `json:"message"`
	Attempts int    `json:"-"`
}

var sendTimes = regexp.MustCompile(`Send \[(\d+)\] times`)

// attemptsOf counts a send's attempts: by the broker when it saw them, else from the final error;
// a oneway send to a refusing broker that returned as sent made its one attempt.
func attemptsOf(t *testing.T, b *brokersim.Broker, before int64, f brokersim.Fault, o sendOutcome) int {
	t.Helper()
	if f.Refuse {
		if o.OK {
			return 1
		}
		m := sendTimes.FindStringSubmatch(o.Message)
		if m == nil {
			t.Fatalf("a send to a refusing broker ended without an attempt count: %q", o.Message)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	// A oneway request may still be on its way; every mode makes at least one attempt.
	waitFor(t, "the broker to read the send", func() bool { return b.Stats().SendsReceived > before })
	return int(b.Stats().SendsReceived - before)
}

// detourSend sends one message through the runtime in mode.
func detourSend(r *Runtime, mode, topic string) sendOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := &Message{Topic: topic, Body: []byte("retry-rules")}
	var err error
	switch mode {
	case "sync":
		_, err = r.Send(ctx, m)
	case "oneway":
		err = r.SendOneway(ctx, m)
	default:
		done := make(chan error, 1)
		r.SendAsync(ctx, m, func(_ *SendResult, err error) { done <- err })
		err = <-done
	}
	if err == nil {
		return sendOutcome{OK: true}
	}
	o := sendOutcome{Message: err.Error()}
	var be *BrokerError
	if errors.As(err, &be) {
		o.Code = int(be.Code)
	}
	return o
}

// sendScript is a running SendScript driver.
type sendScript struct {
	version string
	in      io.WriteCloser
	out     *bufio.Scanner
}

func startSendScript(t *testing.T, line rmqtest.Line) *sendScript {
	t.Helper()
	dist := rmqtest.Locate(t, line)
	home := t.TempDir()
	argv := append([]string{"-Xmx256m"}, rmqtest.JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
		"-Drocketmq.client.logLevel=ERROR", "-cp", dist.ClientClassPath, "dev.detour.rmqdriver.SendScript")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "java", argv...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting SendScript: %v", err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			t.Logf("SendScript stderr:\n%s", tail(stderr.String(), 4000))
		}
	})
	return &sendScript{version: dist.ClientVersion, in: in, out: bufio.NewScanner(stdout)}
}

// line writes one command and reads the driver's answer.
func (s *sendScript) line(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(s.in, cmd); err != nil {
		t.Fatalf("SendScript %q: %v", cmd, err)
	}
	if !s.out.Scan() {
		t.Fatalf("SendScript %q: no answer (%v)", cmd, s.out.Err())
	}
	return s.out.Text()
}

func (s *sendScript) expect(t *testing.T, cmd, want string) {
	t.Helper()
	if got := s.line(t, cmd); got != want {
		t.Fatalf("SendScript %q answered %q, want %q", cmd, got, want)
	}
}

func (s *sendScript) send(t *testing.T, mode, topic string) sendOutcome {
	t.Helper()
	var o sendOutcome
	answer := s.line(t, "send "+mode+" "+topic)
	if err := json.Unmarshal([]byte(answer), &o); err != nil {
		t.Fatalf("SendScript answer %q: %v", answer, err)
	}
	return o
}
