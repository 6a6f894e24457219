package rmqtest

import (
	"fmt"
	"os"
	"sync"
)

// TB is what the harness needs from its owner: a place for files, cleanup at the end, a log and a
// way to give up. testing.TB satisfies it, and so does a Runner, which lets a command (the fault
// benchmark) start real clusters outside a test.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

// Runner is a TB for commands. Fatal and Fatalf panic with a *Fatal, which Run turns back into an
// error; Close runs the cleanups, last registered first, and removes the temporary folders.
type Runner struct {
	// Log receives Logf lines; nil discards them.
	Log func(format string, args ...any)

	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   bool
}

// Fatal is the panic value of Runner.Fatal: the harness gave up on an operation.
type Fatal struct{ Msg string }

func (f *Fatal) Error() string { return f.Msg }

// Helper does nothing: there is no test to attribute lines to.
func (r *Runner) Helper() {}

// Logf writes a line to Log.
func (r *Runner) Logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// Fatal marks the runner failed and panics with a *Fatal.
func (r *Runner) Fatal(args ...any) { r.fail(fmt.Sprint(args...)) }

// Fatalf marks the runner failed and panics with a *Fatal.
func (r *Runner) Fatalf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }

func (r *Runner) fail(msg string) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	panic(&Fatal{Msg: msg})
}

// Failed reports whether Fatal was called.
func (r *Runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Cleanup registers f for Close.
func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

// TempDir creates a new temporary folder that Close removes; it calls Fatal when it cannot.
func (r *Runner) TempDir() string {
	d, err := os.MkdirTemp("", "rmqtest-")
	if err != nil {
		r.Fatal(err)
	}
	r.mu.Lock()
	r.dirs = append(r.dirs, d)
	r.mu.Unlock()
	return d
}

// Close runs the registered cleanups, last first, then removes the temporary folders. When the
// runner failed, the folders are kept for their logs.
func (r *Runner) Close() {
	r.mu.Lock()
	cs, dirs, failed := r.cleanups, r.dirs, r.failed
	r.cleanups, r.dirs = nil, nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	if failed {
		if len(dirs) > 0 {
			r.Logf("rmqtest: kept %v for their logs", dirs)
		}
		return
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Run calls f and returns the *Fatal that a harness call in it panicked with, as an error; other
// panics pass through. Only calls made on f's own goroutine are covered.
func Run(f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if ft, ok := v.(*Fatal); ok {
				err = ft
				return
			}
			panic(v)
		}
	}()
	f()
	return nil
}
