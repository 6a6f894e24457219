package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/detourmq/detour/internal/testsupport/poll"
)

var (
	buildOnce  sync.Once
	binaryPath string
	buildErr   error
)

// demoBinary builds the demo once for the tests that run it as a user would.
func demoBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binaryPath = filepath.Join(suiteDir, "detour-demo")
		cmd := exec.Command("go", "build", "-o", binaryPath, "./cmd/detour-demo")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binaryPath
}

// demoRun is the demo running as a separate process, from the repository root as `make demo`
// runs it.
type demoRun struct {
	cmd        *exec.Cmd
	kubeconfig string
	mu         sync.Mutex
	lines      []string
	// onLine, when set, sees each output line as it arrives, before any poll would.
	onLine  func(string)
	exited  chan struct{}
	exitErr error
}

func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	dir := t.TempDir()
	d := &demoRun{kubeconfig: filepath.Join(dir, "demo.kubeconfig"), exited: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	all := append([]string{"--local-assets", os.Getenv("KUBEBUILDER_ASSETS"),
		"--demo-kubeconfig", d.kubeconfig, "--demo-log", filepath.Join(dir, "demo.log"),
		"--demo-phase", "5s", "--demo-rate", "100"}, args...)
	d.cmd = exec.CommandContext(ctx, demoBinary(t), all...)
	d.cmd.Dir = repoRoot
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.mu.Lock()
			d.lines = append(d.lines, sc.Text())
			hook := d.onLine
			d.mu.Unlock()
			if hook != nil {
				hook(sc.Text())
			}
		}
		d.exitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", d.output())
		}
	})
	return d
}

func (d *demoRun) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// waitFor polls until cond holds, the demo exits or the deadline passes.
func (d *demoRun) waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, 100*time.Millisecond, what, func() error {
		err := cond()
		select {
		case <-d.exited:
			if err != nil {
				t.Fatalf("the demo exited (%v) before %s: %v", d.exitErr, what, err)
			}
		default:
		}
		return err
	})
}

func (d *demoRun) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-d.exited:
	case <-time.After(timeout):
		t.Fatalf("the demo did not exit within %s", timeout)
	}
	if d.exitErr != nil {
		t.Fatalf("the demo exited with %v", d.exitErr)
	}
}

// isolatedByKubectl runs `kubectl get faultpolicies` with the demo's kubeconfig and returns
// the ISOLATED column of the "default" policy.
func isolatedByKubectl(kubeconfig string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "get", "faultpolicies").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	rows := strings.Split(strings.TrimSpace(string(out)), "\n")
	header := strings.Fields(rows[0])
	col := -1
	for i, h := range header {
		if h == "ISOLATED" {
			col = i
		}
	}
	if col < 0 {
		return "", fmt.Errorf("no ISOLATED column in %q", rows[0])
	}
	for _, row := range rows[1:] {
		// An empty cell collapses in Fields; BROKERS and ISOLATED are set together once the
		// policy has brokers, so a short row means "not yet".
		f := strings.Fields(row)
		if len(f) == len(header) && f[0] == "default" {
			return f[col], nil
		}
	}
	return "", fmt.Errorf("no complete row for the default policy:\n%s", out)
}

var totalRow = regexp.MustCompile(`^\s+total\s+(\d+)\s+([\d.]+)%`)

// TestDemoRunsBoundedAndKubectlSeesTheIsolation runs the demo as `make demo` does, bounded by
// --demo-duration, and proves that while the fault lasts a user's kubectl, pointed at the
// written kubeconfig, lists the default FaultPolicy with one isolated broker; that the live view
// prints a line a second; and that the run ends by itself with a summary in which the sends
// succeeded.
func TestDemoRunsBoundedAndKubectlSeesTheIsolation(t *testing.T) {
	needsEnvtest(t)
	d := startDemo(t, "--demo-duration", "25s")
	d.waitFor(t, "the kubeconfig", time.Minute, func() error {
		_, err := os.Stat(d.kubeconfig)
		return err
	})
	d.waitFor(t, "kubectl to list the default policy with Isolated 1", 90*time.Second, func() error {
		isolated, err := isolatedByKubectl(d.kubeconfig)
		if err != nil {
			return err
		}
		if isolated != "1" {
			return fmt.Errorf("ISOLATED %s", isolated)
		}
		return nil
	})
	d.wait(t, 2*time.Minute)

	out := d.output()
	for _, want := range []string{
		"kubectl --kubeconfig " + d.kubeconfig + " get faultpolicies -w",
		"--- broker-b slow (800 ms) ---",
		"isolated: broker-b",
		"demo: summary",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo output lacks %q", want)
		}
	}
	if n := strings.Count(out, " sends  ok "); n < 20 {
		t.Errorf("%d live view lines in a 25s run, want one a second", n)
	}
	var sends int
	var ok float64
	for _, line := range strings.Split(out, "\n") {
		if m := totalRow.FindStringSubmatch(line); m != nil {
			sends, _ = strconv.Atoi(m[1])
			ok, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if sends < 1000 || ok < 99 {
		t.Errorf("summary: %d sends, %.1f%% ok; want steady traffic that got through the faults", sends, ok)
	}
	if _, err := os.Stat(d.kubeconfig); !os.IsNotExist(err) {
		t.Errorf("the kubeconfig of the stopped control plane was left behind (%v)", err)
	}
}

var nameServerAddr = regexp.MustCompile(`name server for other clients: (127\.0\.0\.1:\d+)`)

// TestDemoStopsOnInterrupt proves Ctrl-C ends a demo that would run forever and leaves no
// control plane or broker listening: one interrupt stops it cleanly with its summary and status
// 0; an impatient second interrupt exits at once with status 1, but still takes the control
// plane down (it runs in process groups of its own, which the terminal's signal never reaches).
func TestDemoStopsOnInterrupt(t *testing.T) {
	needsEnvtest(t)
	for _, tc := range []struct {
		name       string
		interrupts int
	}{
		{"once", 1},
		{"twice", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDemo(t, "--demo-duration", "0")
			d.waitFor(t, "live traffic", 2*time.Minute, func() error {
				if !strings.Contains(d.output(), " sends  ok ") {
					return fmt.Errorf("no live view line yet")
				}
				return nil
			})
			kc, err := clientcmd.LoadFromFile(d.kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			var apiServer string
			for _, c := range kc.Clusters {
				apiServer = strings.TrimPrefix(c.Server, "https://")
			}
			m := nameServerAddr.FindStringSubmatch(d.output())
			if apiServer == "" || m == nil {
				t.Fatalf("no API server (%q) or name server address in the output", apiServer)
			}

			if tc.interrupts == 2 {
				// The second interrupt goes out the moment the demo says it is stopping: a
				// graceful stop can finish before a poll of the output would notice.
				var once sync.Once
				d.mu.Lock()
				d.onLine = func(line string) {
					if strings.Contains(line, "detour-demo: stopping") {
						once.Do(func() { _ = d.cmd.Process.Signal(os.Interrupt) })
					}
				}
				d.mu.Unlock()
			}
			if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if tc.interrupts == 2 {
				select {
				case <-d.exited:
				case <-time.After(time.Minute):
					t.Fatal("the demo did not exit after a second interrupt")
				}
				if code := d.cmd.ProcessState.ExitCode(); code != 1 {
					t.Errorf("exit status %d after two interrupts, want 1", code)
				}
			} else {
				d.wait(t, time.Minute)
				if !strings.Contains(d.output(), "demo: summary") {
					t.Error("no summary after the interrupt")
				}
			}
			for what, addr := range map[string]string{"the API server": apiServer, "the name server": m[1]} {
				if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					conn.Close()
					t.Errorf("%s at %s still accepts connections after the demo exited", what, addr)
				}
			}
		})
	}
}
