// Command manager is the detour operator: the Topic, FaultPolicy and broker-pod controllers, the
// embedded producer runtime they keep current, and the HTTP send gateway in front of it.
//
//	manager --leader-elect --metrics-bind-address=:8443 --gateway-bind-address=:8080
//
// The local demo (`make demo`) is a command of its own, detour-demo, so this one links neither a
// control plane nor simulated brokers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/detourmq/detour/internal/operator"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// parseFlags parses the command line in the kubebuilder style: the operator's flags, the
// kubeconfig and the zap logging flags.
func parseFlags(args []string, stderr io.Writer) (*operator.Options, error) {
	o := &operator.Options{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.BindFlags(fs)
	config.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// run parses args and runs the operator until SIGINT or SIGTERM; a second signal exits at once.
// It returns the exit status.
func run(args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "manager:", err)
		return 2
	}
	err = operator.RunUntilInterrupted("manager", stderr, nil, func(ctx context.Context) error {
		return runCluster(ctx, o, stderr)
	})
	if err != nil {
		fmt.Fprintln(stderr, "manager:", err)
		return 1
	}
	return 0
}

// runCluster runs the operator against the cluster of the kubeconfig (or in-cluster config).
func runCluster(ctx context.Context, o *operator.Options, stderr io.Writer) error {
	log := o.Logger(stderr)
	ctrl.SetLogger(log)
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	op, err := operator.New(cfg, o, log)
	if err != nil {
		return err
	}
	return op.Run(ctx)
}
