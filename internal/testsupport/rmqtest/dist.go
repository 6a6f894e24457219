// Package rmqtest starts real Apache RocketMQ name servers and brokers (Java processes resolved
// from Maven Central by hack/setup-rocketmq.sh) on 127.0.0.1 for tests, and offers the faults tests
// need on real processes: pause (SIGSTOP), resume, kill (SIGKILL), graceful stop, restart, a
// read-only broker and write-permission changes on the name server.
//
// Every process belongs to the test that started it: logs go to the test's temporary folder and are
// printed when the test fails, and every process is stopped when the test ends, also on failure.
//
// The package needs the folder printed by hack/setup-rocketmq.sh in DETOUR_ROCKETMQ (make test sets
// it) and a java command. Without them tests fail with a message that says what to do; nothing is
// skipped.
package rmqtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EnvDist names the environment variable that points at the folder hack/setup-rocketmq.sh prints.
const EnvDist = "DETOUR_ROCKETMQ"

// Line is a RocketMQ release line the harness can run.
type Line string

const (
	// V5 is RocketMQ 5.x: server and client 5.5.0.
	V5 Line = "5"
	// V4 is RocketMQ 4.9.x: server 4.9.7 (the newest 4.x broker published) and client 4.9.8.
	V4 Line = "4"
)

// Lines are the release lines every real-RocketMQ suite runs against.
var Lines = []Line{V5, V4}

// String names the line for test names ("rocketmq5", "rocketmq4").
func (l Line) String() string { return "rocketmq" + string(l) }

// Dist is one release line's resolved class paths.
type Dist struct {
	Line Line
	// ServerVersion and ClientVersion are the RocketMQ versions of the two class paths.
	ServerVersion, ClientVersion string
	// ServerClassPath runs NamesrvStartup and BrokerStartup; ClientClassPath runs the client and the
	// project's Java driver.
	ServerClassPath, ClientClassPath string
}

// JVMFlags are the options every RocketMQ process here gets. On Java 17, RocketMQ 4.9.x unmaps
// its store files (at shutdown and when it deletes old files) through DirectByteBuffer.attachment
// and jdk.internal.ref.Cleaner by reflection, which needs exactly the two module flags below;
// without them a graceful stop fails with InaccessibleObjectException. RocketMQ 5.5.0 needs none
// (it was measured with no flags through boot, sends, consume and graceful stop). The rest keeps
// three brokers within a 2-core machine: the serial collector and C1-only compilation, which
// starts faster and uses less CPU than tiered compilation for short test runs.
var JVMFlags = []string{
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-Xss512k",
	"-Djava.net.preferIPv4Stack=true",
}

// Locate finds a release line's class paths, failing the test with what to do when they are
// missing. Under go test -short (make test-unit) it skips the test instead: the fast tier runs no
// Java.
func Locate(t TB, line Line) Dist {
	t.Helper()
	skipShort(t)
	d, err := locate(line)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func locate(line Line) (Dist, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return Dist{}, fmt.Errorf("rmqtest: no java command: the real-RocketMQ tests need a Java runtime, 11 or newer (Debian: apt-get install openjdk-17-jdk-headless)")
	}
	root := os.Getenv(EnvDist)
	if root == "" {
		return Dist{}, fmt.Errorf("rmqtest: %s is not set: run `make test`, or `%s=$(hack/setup-rocketmq.sh) go test ...` (needs Java and Maven)", EnvDist, EnvDist)
	}
	d := Dist{Line: line}
	var err error
	if d.ServerVersion, d.ServerClassPath, err = classPath(root, line, "server"); err != nil {
		return Dist{}, err
	}
	if d.ClientVersion, d.ClientClassPath, err = classPath(root, line, "client"); err != nil {
		return Dist{}, err
	}
	return d, nil
}

// classPath returns the version and the class path (folder/*) of one side of a line.
func classPath(root string, line Line, side string) (version, cp string, err error) {
	dir := filepath.Join(root, string(line), side)
	v, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return "", "", fmt.Errorf("rmqtest: %s does not hold RocketMQ %s (%s side): rerun hack/setup-rocketmq.sh: %w", root, line, side, err)
	}
	return strings.TrimSpace(string(v)), filepath.Join(dir, "*"), nil
}

// skipShort skips a test that runs real RocketMQ under go test -short. Commands (faultbench) pass
// a Runner, which cannot skip, and run outside go test, where testing.Short cannot be asked.
func skipShort(t TB) {
	s, ok := t.(interface{ Skip(args ...any) })
	if ok && testing.Testing() && testing.Short() {
		s.Skip("runs real RocketMQ; skipped under -short")
	}
}
