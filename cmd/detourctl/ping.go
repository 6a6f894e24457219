package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// runPing asks a RocketMQ name server or broker for its cluster info and succeeds when it answers
// within the timeout, whatever the answer's code: a broker answers that it does not serve the
// request, which proves as well as a name server's route table that its remoting layer is alive.
// A frozen or overloaded process does not answer, where a TCP connect would still succeed (the
// kernel accepts for a stopped process), so this is the readiness probe of RocketMQ pods:
//
//	detourctl ping --timeout 2s 127.0.0.1:10911
func runPing(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detourctl ping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *timeout <= 0 {
		fmt.Fprintln(stderr, "usage: detourctl ping [--timeout 2s] host:port")
		return 2
	}
	addr := fs.Arg(0)
	client := remoting.NewClient(remoting.ClientOptions{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	resp, err := client.Invoke(ctx, addr, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	if err != nil {
		fmt.Fprintf(stderr, "detourctl ping: %s: %v\n", addr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s answered code %d in %v\n", addr, resp.Code, time.Since(start).Round(time.Millisecond))
	return 0
}
