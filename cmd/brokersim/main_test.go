package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		spec string
		want brokersim.Fault
	}{
		{"delay:800ms", brokersim.Fault{Delay: 800 * time.Millisecond}},
		{"delay:100ms-1s", brokersim.Fault{Delay: 100 * time.Millisecond, DelayMax: time.Second}},
		{"blackhole", brokersim.Fault{BlackHole: true}},
		{"blackhole,strand", brokersim.Fault{BlackHole: true, Strand: true}},
		{"refuse", brokersim.Fault{Refuse: true}},
		{"close", brokersim.Fault{CloseMidRequest: true}},
		{"code:14", brokersim.Fault{Code: 14}},
		{"illegal", brokersim.Fault{IllegalMessages: true}},
		{"flap:2s/500ms", brokersim.Fault{FlapUp: 2 * time.Second, FlapDown: 500 * time.Millisecond}},
		{"flap:2s/500ms:refuse", brokersim.Fault{FlapUp: 2 * time.Second, FlapDown: 500 * time.Millisecond, Refuse: true}},
		{"delay:5ms,code:2", brokersim.Fault{Delay: 5 * time.Millisecond, Code: 2}},
		{"blackhole,none", brokersim.Fault{}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := parseFault(brokersim.Fault{}, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			// The ready line prints faults back in the same syntax.
			again, err := parseFault(brokersim.Fault{}, got.String())
			if got != (brokersim.Fault{}) && (err != nil || again != got) {
				t.Fatalf("%q re-parsed as %+v, %v", got.String(), again, err)
			}
		})
	}
}

func TestBadFlagsExitWithStatus2(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no broker", nil, "at least one --broker"},
		{"broker without address", []string{"--broker", "a"}, `--broker "a": want name=ip:port`},
		{"duplicate broker", []string{"--broker", "a=127.0.0.1:0", "--broker", "a=127.0.0.1:0"}, "given twice"},
		{"topic without queues", []string{"--broker", "a=127.0.0.1:0", "--topic", "T"}, `--topic "T"`},
		{"topic with zero queues", []string{"--broker", "a=127.0.0.1:0", "--topic", "T:0"}, "1..1024 queues"},
		{"fault for an unknown broker", []string{"--broker", "a=127.0.0.1:0", "--fault", "b=blackhole"}, "no --broker named b"},
		{"unknown fault", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=explode"}, `unknown fault "explode"`},
		{"bad delay", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=delay:soon"}, "delay:"},
		{"inverted delay range", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=delay:2s-1s"}, "upper bound must exceed"},
		{"zero code", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=code:0"}, "non-zero response code"},
		{"code out of range", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=code:70000"}, "non-zero response code"},
		{"flap without down", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=flap:1s"}, "UP/DOWN"},
		{"flap with an unknown mode", []string{"--broker", "a=127.0.0.1:0", "--fault", "a=flap:1s/1s:sleep"}, "flap mode"},
		{"unknown flag", []string{"--brokers", "a=1"}, "flag provided but not defined: -brokers"},
		{"stray argument", []string{"--broker", "a=127.0.0.1:0", "extra"}, `unexpected argument "extra"`},
		{"negative idle timeout", []string{"--broker", "a=127.0.0.1:0", "--idle-timeout=-1s"}, "--idle-timeout -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr, nil)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr %q does not mention %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q", stdout.String())
			}
		})
	}
}

func TestHelpExitsWithStatus0(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-h"}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stderr.String(), "usage: brokersim") || !strings.Contains(stderr.String(), "-fault") {
		t.Fatalf("help %q", stderr.String())
	}
}

func TestParseArgsCollectsEverything(t *testing.T) {
	cfg, err := parseArgs([]string{
		"--namesrv-addr", "127.0.0.1:9876", "--broker", "broker-a=127.0.0.1:10911", "--broker", "broker-b=127.0.0.1:10921",
		"--topic", "TopicTest:4", "--fault", "broker-b=delay:800ms", "--fault", "broker-b=code:14", "--auto-create-topics=false",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := &config{
		namesrvAddr: "127.0.0.1:9876", cluster: "DefaultCluster", autoCreate: false, idleTimeout: 2 * time.Minute,
		brokers: []brokerSpec{{"broker-a", "127.0.0.1:10911"}, {"broker-b", "127.0.0.1:10921"}},
		topics:  []topicSpec{{"TopicTest", 4}},
		faults:  map[string]brokersim.Fault{"broker-b": {Delay: 800 * time.Millisecond, Code: 14}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

func TestIdleTimeoutFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 120 * time.Second}, // a Java server's default
		{[]string{"--idle-timeout=30s"}, 30 * time.Second},
		{[]string{"--idle-timeout=0"}, 0}, // never
	} {
		cfg, err := parseArgs(append([]string{"--broker", "a=127.0.0.1:0"}, tt.args...), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if cfg.idleTimeout != tt.want {
			t.Errorf("%v: idle timeout %v, want %v", tt.args, cfg.idleTimeout, tt.want)
		}
	}
}

func TestStartupFailureExitsWithStatus1(t *testing.T) {
	b, err := brokersim.StartBroker("taken", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--namesrv-addr", "", "--broker", "a=" + b.Addr()}, &stdout, &stderr, nil); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "address already in use") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

// TestCommandServesUntilSIGTERM builds the command, runs it, waits for its ready line, talks to
// its name server and brokers, and stops it with SIGTERM.
func TestCommandServesUntilSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "brokersim")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	cmd := exec.CommandContext(ctx, bin,
		"--namesrv-addr", "127.0.0.1:0",
		"--broker", "broker-a=127.0.0.1:0", "--broker", "broker-b=127.0.0.1:0",
		"--topic", "TopicTest:4", "--fault", "broker-b=code:14")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("no ready line; stderr %q", stderr.String())
	}
	ready := lines.Text()
	fields := map[string]string{}
	for _, f := range strings.Fields(ready)[2:] {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	if !strings.HasPrefix(ready, "brokersim ready ") || fields["namesrv"] == "" || fields["broker:broker-a"] == "" || fields["fault:broker-b"] != "code:14" {
		t.Fatalf("ready line %q", ready)
	}

	c := remoting.NewClient(remoting.ClientOptions{})
	defer c.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	resp, err := c.Invoke(rctx, fields["namesrv"], remoting.NewGetRouteInfoRequest("TopicTest"))
	if err != nil {
		t.Fatal(err)
	}
	route, err := remoting.ParseRouteResponse(resp)
	if err != nil || len(route.QueueDatas) != 2 || route.BrokerDatas[0].MasterAddr() != fields["broker:broker-a"] {
		t.Fatalf("route %+v, %v", route, err)
	}
	send := func(addr string) *remoting.Command {
		h := &remoting.SendHeader{ProducerGroup: "g", Topic: "TopicTest", DefaultTopic: remoting.DefaultTopic, DefaultTopicQueueNums: 4,
			QueueID: 1, BornTimestamp: time.Now().UnixMilli(), Properties: (&remoting.Message{Properties: map[string]string{remoting.PropertyUniqKey: remoting.NewUniqID()}}).EncodeProperties()}
		resp, err := c.Invoke(rctx, addr, remoting.NewSendRequest(h, []byte("hello"), true))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r, err := remoting.ParseSendResponse(send(fields["broker:broker-a"])); err != nil || r.QueueID != 1 || r.QueueOffset != 0 {
		t.Fatalf("send to broker-a: %+v %v", r, err)
	}
	if resp := send(fields["broker:broker-b"]); resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("send to the faulty broker-b answered %v", resp)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr %q", err, stderr.String())
	}
	if len(rest) != 1 || rest[0] != "brokersim stopped: terminated" {
		t.Fatalf("output after SIGTERM %q", rest)
	}
	if _, err := c.Invoke(rctx, fields["broker:broker-a"], remoting.NewHeartbeatRequest("c")); err == nil {
		t.Fatal("broker still answers after the command exited")
	}
}

func TestRunStopsOnSignal(t *testing.T) {
	stop := make(chan os.Signal, 1)
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	w := &lineWriter{buf: &stdout, line: make(chan string, 4)}
	go func() {
		done <- run([]string{"--namesrv-addr", "127.0.0.1:0", "--broker", "a=127.0.0.1:0", "--fault", "a=flap:1h/1h"}, w, &stderr, stop)
	}()
	if l := <-w.line; !strings.HasPrefix(l, "brokersim ready namesrv=127.0.0.1:") || !strings.Contains(l, "fault:a=flap:1h0m0s/1h0m0s") {
		t.Fatalf("ready line %q", l)
	}
	stop <- syscall.SIGINT
	if code := <-done; code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr.String())
	}
	if l := <-w.line; l != "brokersim stopped: interrupt\n" {
		t.Fatalf("last line %q", l)
	}
}

// lineWriter hands every write (the command writes whole lines) to a channel.
type lineWriter struct {
	buf  *bytes.Buffer
	line chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	w.line <- string(p)
	return len(p), nil
}
