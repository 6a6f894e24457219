// Command detour-demo runs the whole system on this machine (what `make demo` does): a control
// plane, three simulated brokers with broker Pods, the samples, the operator, steady traffic and
// a fault script, with a live view.
//
//	detour-demo --local-assets "$(hack/setup-envtest.sh)"
//
// It takes the operator's flags too, with loopback defaults for the ones left alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/detourmq/detour/internal/operator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags: the demo's own and the operator's.
type options struct {
	localAssets      string
	localCRDs        string
	localSamples     string
	demoKubeconfig   string
	demoLog          string
	demoDuration     time.Duration
	demoPhase        time.Duration
	demoRate         int
	demoSenders      int
	demoVictimBroker string

	operator operator.Options
	// gatewayAuth is the operator's --gateway-auth after the local defaults, for the instructions.
	gatewayAuth bool
}

// parseFlags parses the command line: the demo's flags, then the operator's with the local
// defaults for those the user left alone.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("detour-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.localAssets, "local-assets", "", "The folder with kube-apiserver and etcd (printed by hack/setup-envtest.sh).")
	fs.StringVar(&o.localCRDs, "local-crds", "config/crd/bases", "The CRDs to install.")
	fs.StringVar(&o.localSamples, "local-samples", "config/samples", "The resources to apply.")
	fs.StringVar(&o.demoKubeconfig, "demo-kubeconfig", "bin/demo.kubeconfig", "Where to write a kubeconfig for the control plane.")
	fs.StringVar(&o.demoLog, "demo-log", "bin/demo.log", "Where the operator's log goes (the terminal shows the live view); - means stderr.")
	fs.DurationVar(&o.demoDuration, "demo-duration", 0, "Stop after this long; 0 runs until interrupted.")
	fs.DurationVar(&o.demoPhase, "demo-phase", 10*time.Second, "How long each step of the fault script lasts.")
	fs.IntVar(&o.demoRate, "demo-rate", 200, "Messages per second, in total.")
	fs.IntVar(&o.demoSenders, "demo-senders", 4, "Concurrent senders.")
	fs.StringVar(&o.demoVictimBroker, "demo-fault-broker", "broker-b", "The broker the fault script abuses.")
	o.operator.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := localDefaults(fs); err != nil {
		return nil, err
	}
	if err := o.operator.Validate(); err != nil {
		return nil, err
	}
	if o.demoRate <= 0 || o.demoSenders <= 0 || o.demoPhase < time.Second || o.demoDuration < 0 {
		return nil, errors.New("--demo-rate and --demo-senders must be positive, --demo-phase at least 1s, --demo-duration not negative")
	}
	o.gatewayAuth = fs.Lookup("gateway-auth").Value.String() == "true"
	return o, nil
}

// localDefaults adapts the operator's flags the user did not set to a single machine: everything
// on loopback, no leader election, no authentication on the gateway, metrics and probes off.
func localDefaults(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	defaults := map[string]string{
		"gateway-bind-address":      "127.0.0.1:0",
		"gateway-auth":              "false",
		"gateway-secure":            "false",
		"grpc-bind-address":         "127.0.0.1:0",
		"metrics-bind-address":      "0",
		"health-probe-bind-address": "0",
		"leader-elect":              "false",
	}
	for name, value := range defaults {
		if set[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("local default --%s=%s: %w", name, value, err)
		}
	}
	return nil
}

// run parses args and runs the demo until it ends or SIGINT or SIGTERM; a second signal stops
// the control plane and exits at once. It returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "detour-demo:", err)
		return 2
	}
	var force forcedStop
	err = operator.RunUntilInterrupted("detour-demo", stderr, func() { force.run(5 * time.Second) },
		func(ctx context.Context) error { return runLocal(ctx, o, stdout, stderr, &force) })
	if err != nil {
		fmt.Fprintln(stderr, "detour-demo:", err)
		return 1
	}
	return 0
}

// forcedStop is what a second interrupt does before the process exits: the demo's control plane
// runs in process groups of its own, which no terminal signal reaches, so it must be told to stop
// or it outlives the demo.
type forcedStop struct {
	mu sync.Mutex
	fn func()
}

// set registers the function to run on a forced exit.
func (f *forcedStop) set(fn func()) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

// run runs the registered function, waiting at most timeout for it.
func (f *forcedStop) run(timeout time.Duration) {
	f.mu.Lock()
	fn := f.fn
	f.mu.Unlock()
	if fn == nil {
		return
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		fn()
	}()
	select {
	case <-finished:
	case <-time.After(timeout):
	}
}
