// Command scalemanager measures the manager as users run it (the cmd/manager binary, against a
// kubeconfig) with many Topics: an envtest API server, brokersim brokers behind brokersim name
// servers (-clusters Clusters of -brokers each), -topics Topics spread evenly over the Clusters
// in one namespace. It reports how long the manager takes from its start until every Topic is
// Ready, its resident memory (VmRSS) and its Go heap in use (go_memstats_heap_inuse_bytes from
// its metrics endpoint) then and after a settling pause, and the same after a restart: the
// manager is stopped, every Topic's status cleared (so Ready must be written again), and started
// again.
//
//	KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go run ./hack/scalemanager -topics 10000
//
// It prints one line per measurement; run it from the repository's root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/detourmq/detour/internal/testsupport/managertest"
)

// config is the command line.
type config struct {
	topics, clusters, brokers int
	settle                    time.Duration
	restarts                  int
}

func main() {
	var c config
	flag.IntVar(&c.topics, "topics", 10000, "Topics, spread evenly over the Clusters")
	flag.IntVar(&c.clusters, "clusters", 10, "Clusters, each with brokersim name servers of its own")
	flag.IntVar(&c.brokers, "brokers", 10, "brokersim brokers per Cluster, each holding every topic of its Cluster")
	flag.DurationVar(&c.settle, "settle", 20*time.Second, "pause after every Topic is Ready before memory is read again")
	flag.IntVar(&c.restarts, "restarts", 1, "restarts measured after the first start")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "scalemanager:", err)
		os.Exit(1)
	}
}

// run builds the manager, starts the control plane and the brokers, creates the objects, and
// measures the manager's first start and each restart.
func run(c config) error {
	if c.topics < c.clusters || c.clusters < 1 || c.brokers < 1 {
		return fmt.Errorf("need at least one broker and one Cluster, and a Topic per Cluster")
	}
	dir, err := os.MkdirTemp("", "scalemanager-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "manager")
	if err := managertest.Build(".", bin); err != nil {
		return fmt.Errorf("%w (run from the repository's root)", err)
	}
	cp, err := managertest.StartControlPlane(".", dir)
	if err != nil {
		return fmt.Errorf("%w (run from the repository's root)", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	fleet, err := startFleet(c)
	if err != nil {
		return err
	}
	defer fleet.close()
	// The readiness cache stops before envtest does (defers run last first).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	if err := createObjects(ctx, cp, fleet, c); err != nil {
		return err
	}
	fmt.Printf("created %d Clusters of %d brokers and %d Topics in %v\n", c.clusters, c.brokers, c.topics, since(start))
	ready, err := watchReady(ctx, cp, c.topics)
	if err != nil {
		return err
	}
	for turn := 0; turn <= c.restarts; turn++ {
		what := "first start"
		if turn > 0 {
			what = fmt.Sprintf("restart %d", turn)
			if err := clearStatuses(ctx, cp, ready); err != nil {
				return err
			}
		}
		if err := measure(what, bin, cp, ready, c); err != nil {
			return err
		}
	}
	return nil
}

// measure starts the manager, waits until every Topic is Ready, reads its memory then and after
// the settling pause, and stops it.
func measure(what, bin string, cp *managertest.ControlPlane, ready *readiness, c config) error {
	m, err := managertest.Start(bin, cp.Kubeconfig)
	if err != nil {
		return err
	}
	defer m.Stop()
	took, err := ready.waitAll(m, 20*time.Minute)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	mem, err := memory(m)
	if err != nil {
		return err
	}
	fmt.Printf("%s: every one of %d Topics Ready %v after the manager started; %s\n", what, c.topics, took.Round(10*time.Millisecond), mem)
	<-time.After(c.settle)
	if mem, err = memory(m); err != nil {
		return err
	}
	fmt.Printf("%s: %v later: %s\n", what, c.settle, mem)
	return nil
}

// memory is the manager's resident set and Go heap in use, for printing.
func memory(m *managertest.Manager) (string, error) {
	rss, heap, err := m.Memory()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("RSS %.1f MiB, heap in use %.1f MiB", rss/(1<<20), heap/(1<<20)), nil
}

// since is the time since start, rounded for printing.
func since(start time.Time) time.Duration { return time.Since(start).Round(time.Millisecond) }
