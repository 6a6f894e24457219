package operator

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// RunUntilInterrupted runs fn with a context that ends at the first SIGINT or SIGTERM and returns
// fn's error. A second signal exits the process at once with status 1, after running forced
// (when not nil): what must not outlive the process even then.
func RunUntilInterrupted(name string, stderr io.Writer, forced func(), fn func(context.Context) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	done := make(chan struct{})
	defer close(done)
	exiting := make(chan struct{}) // closed when a second interrupt takes over the exit
	go func() {
		select {
		case <-signals:
			fmt.Fprintf(stderr, "%s: stopping (interrupt again to exit at once)\n", name)
			cancel()
		case <-done:
			return
		}
		select {
		case <-signals:
			close(exiting)
			if forced != nil {
				forced()
			}
			os.Exit(1)
		case <-done:
		}
	}()

	err := fn(ctx)
	if ctx.Err() != nil {
		// A second interrupt may race the end of a quick graceful stop; it still means "exit at
		// once with status 1", so give it a moment to land and leave the exit to it.
		select {
		case <-exiting:
			select {} // the signal goroutine exits the process
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}
