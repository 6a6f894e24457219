package managertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// Build builds the cmd/manager of the repository at root into bin, as the image builds it.
func Build(root, bin string) error {
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building cmd/manager: %w", err)
	}
	return nil
}

// Manager is one run of the manager binary, its endpoints on loopback ports of their own.
type Manager struct {
	cmd *exec.Cmd
	// Started is when the process was started.
	Started time.Time
	// Metrics is the metrics endpoint's URL (plain HTTP).
	Metrics string
	// Gateway is the send gateway's address (plain HTTP, no token: the local-use gateway).
	Gateway string
	// GRPC is the gRPC endpoint's address.
	GRPC string
	// Pprof is the profiling endpoints' address.
	Pprof string
	// LogPath is the file the manager logs to.
	LogPath string
	done    chan error
}

// FreePort is a loopback address with a port nothing listens on now, for a process the caller
// starts next (the manager here, or a server a test runs beside it).
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start runs bin against kubeconfig with plain HTTP metrics, the local-use gateway (no TLS, no
// token), the gRPC endpoint and the profiling endpoints on free loopback ports, then args (which
// may override any of these), its log beside bin.
func Start(bin, kubeconfig string, args ...string) (*Manager, error) {
	var addrs [5]string
	for i := range addrs {
		a, err := FreePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	m := &Manager{Metrics: "http://" + addrs[0] + "/metrics", Gateway: addrs[2], GRPC: addrs[3], Pprof: addrs[4],
		LogPath: filepath.Join(filepath.Dir(bin), "manager.log"), done: make(chan error, 1)}
	logFile, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, append([]string{"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=" + addrs[0], "--metrics-secure=false",
		"--health-probe-bind-address=" + addrs[1],
		"--gateway-bind-address=" + addrs[2], "--gateway-secure=false", "--gateway-auth=false",
		"--grpc-bind-address=" + addrs[3], "--pprof-bind-address=" + addrs[4]}, args...)...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.Started = time.Now()
	if err := m.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait(); logFile.Close() }()
	return m, nil
}

// Pid is the manager's process id.
func (m *Manager) Pid() int { return m.cmd.Process.Pid }

// Exited is an error once the manager has exited on its own, nil while it runs.
func (m *Manager) Exited() error {
	select {
	case err := <-m.done:
		m.done <- err
		return fmt.Errorf("the manager exited: %v (log: %s)", err, m.LogPath)
	default:
		return nil
	}
}

// Stop sends SIGTERM, as the kubelet does, and waits for the manager to exit (killing it after a
// minute).
func (m *Manager) Stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(time.Minute):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// CPU is the CPU time (user and system, all threads) the manager has used so far.
func (m *Manager) CPU() (time.Duration, error) { return rmqtest.ProcessCPU(m.Pid()) }

// Memory reads the manager's resident set (VmRSS) and its Go heap in use, both in bytes.
func (m *Manager) Memory() (rss, heap float64, err error) {
	kib, err := residentKiB(m.Pid())
	if err != nil {
		return 0, 0, err
	}
	heap, err = heapInuse(m.Metrics)
	return float64(kib) * 1024, heap, err
}

// Profile records a CPU profile of the manager over d into path (pprof's format).
func (m *Manager) Profile(ctx context.Context, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", m.Pprof, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// residentKiB is VmRSS of pid, in KiB.
func residentKiB(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// heapInuse reads go_memstats_heap_inuse_bytes from the metrics endpoint at url.
func heapInuse(url string) (float64, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no go_memstats_heap_inuse_bytes among the metrics")
}
