package rmqtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// process is one JVM the harness started: a name server, a broker or a proxy.
type process struct {
	name    string   // for messages and log file names
	dir     string   // its home: logs, config, store
	argv    []string // java and its arguments
	logPath string   // stdout and stderr

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
	err  error         // cmd's exit, valid after done
	runs int
}

// start launches the process (again, after a stop). ROCKETMQ_HOME and user.home point at its own
// folder, so RocketMQ's logs and defaults land there and nowhere else.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exited() {
		return fmt.Errorf("%s is already running", p.name)
	}
	p.runs++
	out, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==== start %d: %v\n", p.runs, p.argv)
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "ROCKETMQ_HOME="+p.dir)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so signals reach the JVM and nothing else; killed with the test binary,
	// so an interrupted run leaves no broker behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		out.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited reports whether the current run ended; p.mu must be held.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running returns the current run's done channel, or an error when it already ended.
func (p *process) running() (*exec.Cmd, chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil, nil, fmt.Errorf("%s was never started", p.name)
	}
	if p.exited() {
		return nil, nil, fmt.Errorf("%s is not running (%v)", p.name, p.err)
	}
	return p.cmd, p.done, nil
}

// signal sends sig to the process group of the current run.
func (p *process) signal(sig syscall.Signal) error {
	cmd, _, err := p.running()
	if err != nil {
		return err
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// stop sends sig (after SIGCONT, so a paused JVM can act on it) and waits up to grace for the
// exit; then it kills the process.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	cmd, done, err := p.running()
	if err != nil {
		return err
	}
	pgid := -cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGCONT)
	_ = syscall.Kill(pgid, sig)
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("%s did not exit within %v of %v; killed", p.name, grace, sig)
	}
}

// alive reports whether the current run has not exited, and its exit error when it has.
func (p *process) alive() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false, errors.New("never started")
	}
	if p.exited() {
		return false, p.err
	}
	return true, nil
}

// logTail returns the last n bytes of the process's output and of RocketMQ's own main log.
func (p *process) logTail(n int) string {
	var b bytes.Buffer
	for _, f := range append([]string{p.logPath}, p.rocketmqLogs()...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(data) > n {
			data = data[len(data)-n:]
		}
		fmt.Fprintf(&b, "---- %s (last %d bytes) ----\n%s\n", f, len(data), data)
	}
	return b.String()
}

// logContains reports whether the process's output or RocketMQ's own logs contain s.
func (p *process) logContains(s string) bool {
	for _, f := range append([]string{p.logPath}, p.rocketmqLogs()...) {
		if data, err := os.ReadFile(f); err == nil && bytes.Contains(data, []byte(s)) {
			return true
		}
	}
	return false
}

// rocketmqLogs are the log files RocketMQ writes under its user.home: 5.x's logs/rocketmqlogs (the
// Proxy's too) and
// the harness's own logback configuration for 4.x.
func (p *process) rocketmqLogs() []string {
	var files []string
	for _, name := range []string{"logs/rocketmqlogs/broker.log", "logs/rocketmqlogs/namesrv.log", "logs/rocketmqlogs/proxy.log", "logs/rocketmq.log"} {
		f := filepath.Join(p.dir, name)
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	return files
}
