package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/producer"
)

// buildDetourctl compiles the command once per test binary run.
func buildDetourctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "detourctl")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startBrokers(t *testing.T, topic string, queues int, names ...string) map[string]*brokersim.Broker {
	t.Helper()
	out := map[string]*brokersim.Broker{}
	for _, n := range names {
		b, err := brokersim.StartBroker(n, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.CreateTopic(topic, queues)
		out[n] = b
	}
	return out
}

func TestDetourctlSendPrintsOneJSONObjectPerSendAndASummary(t *testing.T) {
	bin := buildDetourctl(t)
	bs := startBrokers(t, "TopicTest", 4, "broker-a", "broker-b")
	cmd := exec.Command(bin, "send",
		"--broker", "broker-a="+bs["broker-a"].Addr(), "--broker", "broker-b="+bs["broker-b"].Addr(),
		"--topic", "TopicTest", "--queues", "4", "--count", "16", "--preset", "RocketMQ5", "--output", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("detourctl: %v\n%s", err, stderr.String())
	}
	var lines []sendLine
	var sum *summary
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		raw := sc.Bytes()
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			t.Fatalf("line %q is not JSON: %v", raw, err)
		}
		if s, ok := probe["summary"]; ok {
			sum = &summary{}
			if err := json.Unmarshal(s, sum); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, k := range []string{"msgId", "broker", "queueId", "queueOffset", "attempts", "brokersTried", "latencyMillis", "error"} {
			if _, ok := probe[k]; !ok {
				t.Fatalf("line %s lacks %q", raw, k)
			}
		}
		var l sendLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 16 || sum == nil {
		t.Fatalf("%d send lines, summary %v:\n%s", len(lines), sum, out)
	}
	perBroker := map[string]int{}
	for _, l := range lines {
		if l.Error != "" || len(l.MsgID) != 32 || l.Attempts != 1 || len(l.BrokersTried) != 1 || l.BrokersTried[0] != l.Broker {
			t.Fatalf("line %+v", l)
		}
		perBroker[l.Broker]++
	}
	if sum.Sent != 16 || sum.Failed != 0 || sum.PerBroker["broker-a"] != perBroker["broker-a"] ||
		sum.PerBroker["broker-b"] != perBroker["broker-b"] || perBroker["broker-a"] == 0 || perBroker["broker-b"] == 0 {
		t.Fatalf("summary %+v, lines per broker %v", sum, perBroker)
	}
	for name, b := range bs {
		n := 0
		for q := 0; q < 4; q++ {
			n += len(b.Messages("TopicTest", q))
		}
		if n != perBroker[name] {
			t.Fatalf("%s stores %d messages, the output says %d", name, n, perBroker[name])
		}
	}
}

func TestDetourctlSendTextOutputAndFailures(t *testing.T) {
	bin := buildDetourctl(t)
	bs := startBrokers(t, "TopicTest", 2, "broker-a", "broker-b")
	bs["broker-a"].SetFault(brokersim.Fault{Code: 2}) // SYSTEM_BUSY: retried on broker-b
	cmd := exec.Command(bin, "send",
		"--broker", "broker-a="+bs["broker-a"].Addr(), "--broker", "broker-b="+bs["broker-b"].Addr(),
		"--topic", "TopicTest", "--queues", "2", "--count", "6", "--output", "text")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("detourctl: %v\n%s", err, out)
	}
	text := string(out)
	if n := strings.Count(text, "SEND_OK  msgId="); n != 6 {
		t.Fatalf("%d SEND_OK lines:\n%s", n, text)
	}
	if !strings.Contains(text, "brokersTried=broker-a,broker-b") || !strings.Contains(text, "summary: sent=6 failed=0 retried=1 perBroker=[broker-b=6]") ||
		!strings.Contains(text, "isolated=[broker-a") {
		t.Fatalf("output:\n%s", text)
	}

	// Every broker failing: failure lines, exit status 1.
	bs["broker-b"].SetFault(brokersim.Fault{Code: 1})
	cmd = exec.Command(bin, "send", "--broker", "broker-b="+bs["broker-b"].Addr(), "--topic", "TopicTest",
		"--queues", "2", "--count", "2", "--attempts", "1", "--output", "text")
	out, err = cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit status 1, got %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "FAILED   attempts=1 brokersTried=broker-b") ||
		!strings.Contains(string(out), "Send [1] times, still failed") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestDetourctlRefusesBadUsage(t *testing.T) {
	// Bodies RocketMQ refuses are refused before anything is sent: no broker listens at a=1:1.
	emptyFile := filepath.Join(t.TempDir(), "empty")
	oversizeFile := filepath.Join(t.TempDir(), "oversize")
	if err := os.WriteFile(emptyFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oversizeFile, make([]byte, producer.MaxMessageSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{}, {"nope"}, {"send"}, {"send", "--broker", "x"}, {"send", "--broker", "a=1:1", "--output", "yaml"},
		{"send", "--broker", "a=1:1", "--topic", "bad topic"}, {"send", "--broker", "a=1:1", "--preset", "RocketMQ9"},
		{"send", "--broker", "a=1:1", "--broker", "a=1:2"},
		{"send", "--broker", "a=1:1", "--body", "x", "--body-file", "-"},
		{"send", "--broker", "a=1:1", "--property", "novalue"},
		{"send", "--broker", "a=1:1", "--property", "k=1", "--property", "k=2"},
		{"send", "--broker", "a=1:1", "--property", "UNIQ_KEY=mine"},
		{"send", "--broker", "a=1:1", "--body-file", filepath.Join(t.TempDir(), "missing")},
		{"send", "--broker", "a=1:1", "--body-file", emptyFile},
		{"send", "--broker", "a=1:1", "--body-file", oversizeFile},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, nil, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
		if stderr.Len() == 0 {
			t.Errorf("%v: nothing on stderr", args)
		}
	}
}

// TestDetourctlSendsUserPropertiesAndABodyFromStandardInput: --property and --body-file - reach
// the broker as they were given, a 3 MiB body included (too large for a command line).
func TestDetourctlSendsUserPropertiesAndABodyFromStandardInput(t *testing.T) {
	bin := buildDetourctl(t)
	bs := startBrokers(t, "TopicTest", 1, "broker-a")
	body := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16)
	cmd := exec.Command(bin, "send", "--broker", "broker-a="+bs["broker-a"].Addr(), "--topic", "TopicTest",
		"--queues", "1", "--count", "1", "--body-file", "-", "--property", "order=42", "--property", "region=eu-1")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("detourctl: %v\n%s", err, out)
	}
	msgs := bs["broker-a"].Messages("TopicTest", 0)
	if len(msgs) != 1 {
		t.Fatalf("%d messages stored, want 1", len(msgs))
	}
	m := msgs[0]
	stored := m.Body
	if m.SysFlag&1 != 0 { // compressed by the runtime, as RocketMQ does above 4 KiB: zlib
		zr, err := zlib.NewReader(bytes.NewReader(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		if stored, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(stored, body) {
		t.Errorf("stored body of %d bytes differs from the %d bytes given", len(stored), len(body))
	}
	if m.Properties["order"] != "42" || m.Properties["region"] != "eu-1" {
		t.Errorf("stored properties %v, want order=42 and region=eu-1", m.Properties)
	}
}

func TestDetourctlSendTakesTheRouteFromNameServers(t *testing.T) {
	bin := buildDetourctl(t)
	bs := startBrokers(t, "TopicTest", 2, "broker-a", "broker-b")
	bs["broker-b"].SetTopicPerm("TopicTest", 4) // drained: published without the write bit
	ns, err := brokersim.StartNameServer("127.0.0.1:0", bs["broker-a"], bs["broker-b"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	cmd := exec.Command(bin, "send", "--namesrv", "127.0.0.1:1;"+ns.Addr(), "--topic", "TopicTest", "--count", "6", "--output", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("detourctl: %v\n%s", err, stderr.String())
	}
	var sum summary
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &struct {
		Summary *summary `json:"summary"`
	}{&sum}); err != nil {
		t.Fatal(err)
	}
	if sum.Sent != 6 || sum.Failed != 0 || sum.PerBroker["broker-a"] != 6 {
		t.Fatalf("summary %+v, want every send on broker-a (broker-b is drained)", sum)
	}
}

// TestSendPolicyIsThePresetWithTheGivenFlags proves --preset selects a whole behaviour and only
// the flags given on the command line override it.
func TestSendPolicyIsThePresetWithTheGivenFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "RocketMQ5"}, "RocketMQ5"},
		{[]string{"--preset", "RocketMQ4"}, "RocketMQ4"},
		{[]string{"--preset", "Disabled"}, "Disabled"},
		{[]string{"--preset", "Detour"}, "Detour"},
		// The pressure poll runs in the probe loop, so turning probing off turns it off too.
		{[]string{"--preset", "Detour", "--probe=false", "--per-attempt-timeout", "0"}, "Detour-probing-pressure-perAttemptCap"},
		{[]string{"--preset", "RocketMQ5", "--probe", "--attempts", "5"}, "RocketMQ5~retry+probing"},
	} {
		c, err := parseSend(append([]string{"--broker", "a=127.0.0.1:1"}, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		pol, err := sendPolicy(c)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := pol.Behavior(); got != tc.want {
			t.Errorf("%v runs %q, want %q", tc.args, got, tc.want)
		}
	}
}
