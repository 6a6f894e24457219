// Command scalemanager measures the manager as users run it (the cmd/manager binary, against a
// kubeconfig) with many Topics: an envtest API server, brokersim brokers behind brokersim name
// servers (-clusters Clusters of -brokers each), -topics Topics spread evenly over the Clusters
// in one namespace. It reports how long the manager takes from its start until every Topic is
// Ready, its resident memory (VmRSS) and its Go heap in use (go_memstats_heap_inuse_bytes from
// its metrics endpoint) then and after a settling pause, and the same after a restart: the
// manager is stopped, every Topic's status cleared (so Ready must be written again), and started
// again. Before the manager's first start it measures the API server alone taking one status
// write of every Topic (the write the manager makes when a Topic turns Ready, from one client
// with the manager's client settings) and prints it on a line beginning "API server:"; each
// Ready time is then also given as a ratio to it. It counts every write of a Topic it sees while
// the manager runs, and with -profile it records the manager's CPU profile over its first
// -profile-for after each start. With -before it measures another manager binary in the same
// run too, its starts taking turns with this tree's manager's. With -undeclared it then starts
// the manager once more beside a Cluster that serves its undeclared topics, asks its gRPC
// endpoint for that many topics' routes, and gives the memory they take per topic.
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
	"strings"
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
	// apiWriters are the goroutines the API server's own measurement writes from.
	apiWriters int
	// before is a manager binary measured beside this tree's, turn about ("" measures none).
	before string
	// profile is where the manager's CPU profiles go ("" records none); profileFor their span.
	profile    string
	profileFor time.Duration
	// undeclared is how many undeclared topics' routes a last start of the manager keeps (0: no
	// such start).
	undeclared int
}

func main() {
	var c config
	flag.IntVar(&c.topics, "topics", 10000, "Topics, spread evenly over the Clusters")
	flag.IntVar(&c.clusters, "clusters", 10, "Clusters, each with brokersim name servers of its own")
	flag.IntVar(&c.brokers, "brokers", 10, "brokersim brokers per Cluster, each holding every topic of its Cluster")
	flag.DurationVar(&c.settle, "settle", 20*time.Second, "pause after every Topic is Ready before memory is read again")
	flag.IntVar(&c.restarts, "restarts", 1, "restarts measured after the first start")
	flag.IntVar(&c.apiWriters, "api-writers", 16, "goroutines the API server's own measurement writes from, sharing one client")
	flag.StringVar(&c.before, "before", "", "a manager binary (e.g. built from the commit before a change) measured in the same run, its starts taking turns with this tree's")
	flag.StringVar(&c.profile, "profile", "", "a directory for the manager's CPU profiles, one per start; empty records none")
	flag.DurationVar(&c.profileFor, "profile-for", 30*time.Second, "how long each CPU profile records from the manager's start")
	flag.IntVar(&c.undeclared, "undeclared", 0, "after the Topics' measurements, start the manager once more with a Cluster serving its undeclared topics and ask its gRPC endpoint for this many topics' routes, reading its memory before and after (0: skip)")
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
	if c.topics < c.clusters || c.clusters < 1 || c.brokers < 1 || c.apiWriters < 1 {
		return fmt.Errorf("need at least one broker and one Cluster, and a Topic per Cluster")
	}
	dir, err := os.MkdirTemp("", "scalemanager-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if c.profile != "" {
		if err := os.MkdirAll(c.profile, 0o755); err != nil {
			return fmt.Errorf("the profiles' directory: %w", err)
		}
	}
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
	apiTook, err := measureAPIServer(ctx, cp, fleet, ready, c, "API server")
	if err != nil {
		return fmt.Errorf("the API server's own measurement: %w", err)
	}
	took, err := measureManagers(ctx, cp, ready, apiTook, bin, c)
	if err != nil {
		return err
	}
	if err := measureAPIServerAgain(ctx, cp, fleet, ready, c, took); err != nil {
		return err
	}
	if c.undeclared > 0 {
		return measureUndeclared(ctx, cp, ready, bin, c)
	}
	return nil
}

// measureManagers measures the first start and each restart of the manager bin and, with
// -before, of that binary too, the two taking turns: each start, of either, begins from Topics
// without status, so a turn differs from the next only in the binary and the machine's load.
func measureManagers(ctx context.Context, cp *managertest.ControlPlane, ready *readiness, apiTook time.Duration,
	bin string, c config) ([]measured, error) {
	type manager struct{ label, bin string }
	managers := []manager{{"", bin}}
	if c.before != "" {
		managers = append(managers, manager{"before, ", c.before})
	}
	var took []measured
	for turn := 0; turn <= c.restarts; turn++ {
		for i, m := range managers {
			what := m.label + "first start"
			if turn > 0 {
				what = fmt.Sprintf("%srestart %d", m.label, turn)
			}
			if turn > 0 || i > 0 {
				if err := clearStatuses(ctx, cp, ready); err != nil {
					return nil, err
				}
			}
			d, err := measure(what, m.bin, cp, ready, apiTook, c)
			if err != nil {
				return nil, err
			}
			took = append(took, measured{what, d})
		}
	}
	return took, nil
}

// measured is the time one start of the manager took to Ready.
type measured struct {
	what  string
	ready time.Duration
}

// measureAPIServerAgain measures the API server alone once more, after the manager's runs, so
// that a change in the machine's load over the run shows, and gives each Ready time as a ratio to
// that measurement too.
func measureAPIServerAgain(ctx context.Context, cp *managertest.ControlPlane, f *fleet, ready *readiness, c config,
	took []measured) error {
	if err := clearStatuses(ctx, cp, ready); err != nil {
		return err
	}
	again, err := measureAPIServer(ctx, cp, f, ready, c, "API server again, after the manager")
	if err != nil {
		return fmt.Errorf("the API server's own measurement: %w", err)
	}
	for _, m := range took {
		fmt.Printf("%s: Ready %v, %.2f× the API server's %v after the manager's runs\n",
			m.what, m.ready.Round(10*time.Millisecond), m.ready.Seconds()/again.Seconds(), again.Round(10*time.Millisecond))
	}
	return nil
}

// measure starts the manager, waits until every Topic is Ready, reads its memory then and after
// the settling pause, and stops it; it returns the time to Ready. apiTook is the API server's
// own time for the writes.
func measure(what, bin string, cp *managertest.ControlPlane, ready *readiness, apiTook time.Duration, c config) (time.Duration, error) {
	ready.resetWrites()
	m, err := managertest.Start(bin, cp.Kubeconfig)
	if err != nil {
		return 0, err
	}
	defer m.Stop()
	profiled := profile(m, what, c)
	took, err := ready.waitAll(what, m, 20*time.Minute)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	writes := ready.writesSeen()
	cpu, err := m.CPU()
	if err != nil {
		return 0, err
	}
	mem, err := memory(m, c.topics)
	if err != nil {
		return 0, err
	}
	fmt.Printf("%s: every one of %d Topics Ready %v after the manager started, %.2f× the API server's %v; the manager used %v of CPU; %s\n",
		what, c.topics, took.Round(10*time.Millisecond), took.Seconds()/apiTook.Seconds(), apiTook.Round(10*time.Millisecond),
		cpu.Round(100*time.Millisecond), mem)
	fmt.Printf("%s: %s\n", what, writes)
	<-time.After(c.settle)
	if mem, err = memory(m, c.topics); err != nil {
		return 0, err
	}
	fmt.Printf("%s: %v later: %s; %s\n", what, c.settle, mem, ready.writesSeen())
	if err := <-profiled; err != nil {
		fmt.Fprintf(os.Stderr, "%s: CPU profile: %v\n", what, err)
	}
	return took, nil
}

// profile records the manager's CPU profile over c.profileFor from now into c.profile, when
// asked; the channel gives the outcome (at once when none is asked for).
func profile(m *managertest.Manager, what string, c config) <-chan error {
	done := make(chan error, 1)
	if c.profile == "" {
		done <- nil
		return done
	}
	path := filepath.Join(c.profile, strings.NewReplacer(", ", "-", " ", "-").Replace(what)+".pprof")
	go func() {
		// The endpoint listens a moment after the process starts.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := m.Profile(context.Background(), c.profileFor, path)
			if err == nil || time.Now().After(deadline) {
				done <- err
				return
			}
			<-time.After(50 * time.Millisecond)
		}
	}()
	return done
}

// memory is the manager's resident set and Go heap in use, in all and per Topic, for printing.
func memory(m *managertest.Manager, topics int) (string, error) {
	rss, heap, err := m.Memory()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("RSS %.1f MiB (%.1f KiB per Topic), heap in use %.1f MiB (%.1f KiB per Topic)",
		rss/(1<<20), rss/1024/float64(topics), heap/(1<<20), heap/1024/float64(topics)), nil
}

// since is the time since start, rounded for printing.
func since(start time.Time) time.Duration { return time.Since(start).Round(time.Millisecond) }
