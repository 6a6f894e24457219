package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildManager builds cmd/manager into bin, as the image builds it.
func buildManager(bin string) error {
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building cmd/manager (run from the repository's root): %w", err)
	}
	return nil
}

// manager is one run of the manager binary.
type manager struct {
	cmd     *exec.Cmd
	started time.Time
	metrics string // the metrics endpoint's URL
	logPath string
	done    chan error
}

// freePort is a loopback address with a port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startManager runs bin against kubeconfig with its doors on free loopback ports, plain HTTP
// metrics, and the local-use gateway (no TLS, no token), its log beside bin.
func startManager(bin, kubeconfig string) (*manager, error) {
	var addrs [4]string
	for i := range addrs {
		a, err := freePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	m := &manager{metrics: "http://" + addrs[0] + "/metrics", logPath: filepath.Join(filepath.Dir(bin), "manager.log"),
		done: make(chan error, 1)}
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, "--kubeconfig="+kubeconfig,
		"--metrics-bind-address="+addrs[0], "--metrics-secure=false",
		"--health-probe-bind-address="+addrs[1],
		"--gateway-bind-address="+addrs[2], "--gateway-secure=false", "--gateway-auth=false",
		"--grpc-bind-address="+addrs[3])
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.started = time.Now()
	if err := m.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait(); logFile.Close() }()
	return m, nil
}

// exited is an error once the manager has exited on its own.
func (m *manager) exited() error {
	select {
	case err := <-m.done:
		m.done <- err
		return fmt.Errorf("the manager exited: %v (log: %s)", err, m.logPath)
	default:
		return nil
	}
}

// stop sends SIGTERM, as the kubelet does, and waits for the manager to exit.
func (m *manager) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(time.Minute):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// memory reads the manager's resident set (VmRSS) and its Go heap in use.
func (m *manager) memory() (string, error) {
	rss, err := residentKiB(m.cmd.Process.Pid)
	if err != nil {
		return "", err
	}
	heap, err := heapInuse(m.metrics)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("RSS %.1f MiB, heap in use %.1f MiB", float64(rss)/1024, heap/(1<<20)), nil
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

// heapInuse reads go_memstats_heap_inuse_bytes from the metrics endpoint.
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
