// Command pause is the sandbox ("pause") container of the end-to-end node: it holds a pod's
// namespaces open, reaps orphaned children and exits on SIGTERM or SIGINT. It replaces the pause
// image a registry would serve, built from this repository like every image of the node.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child, as the sandbox is PID 1 of a pod that shares its PID namespace.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
