// Command faultbench is detour's fault benchmark. For each scenario (a broker that goes bad in
// one way) and each strategy (how the producer copes), it sends the same paced workload to three
// brokers, records every send and attempt, and writes results.json, results.md and PNG charts
// into the output directory. It has two modes: brokersim (fresh in-process brokers per run, the
// fast mode) and real (one real Apache RocketMQ 5.x cluster started by internal/testsupport/rmqtest, with
// RocketMQ's own Java producers among the strategies; needs DETOUR_ROCKETMQ, see
// hack/setup-rocketmq.sh). Every scenario × strategy is repeated -reps times, interleaved, and
// reported as median with min-max.
//
// The full run (make bench) takes about two hours on 2 cores:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go run ./hack/faultbench -out bench
//
// The quick mode (under 5 minutes) and a quick look at one brokersim scenario:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go run ./hack/faultbench -quick -out /some/dir
//	go run ./hack/faultbench -out /some/dir -modes sim -reps 1 -duration 5s -scenarios blackhole
//
// This package keeps the command line (flags.go), the order of the runs (bench.go) and -rewrite
// (rewrite.go). The rooms under internal/ hold the rest: scenario, strategy, drivers, running,
// realenv, analysis and report.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/detourmq/detour/hack/faultbench/internal/realenv"
	"github.com/detourmq/detour/hack/faultbench/internal/report"
)

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "faultbench:", err)
		os.Exit(2)
	}
	if c.Rewrite {
		var merge []string
		if c.Merge != "" {
			merge = strings.Split(c.Merge, ",")
		}
		if err := rewrite(c.Out, merge, c.Note, c.RewriteCommand); err != nil {
			fmt.Fprintln(os.Stderr, "faultbench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "faultbench:", err)
		os.Exit(1)
	}
}

// run runs every selected mode, scenario, repetition and strategy and writes the outputs after
// each scenario, so a long run that is interrupted still leaves the scenarios it finished.
func run(ctx context.Context, c config, w interface{ Write([]byte) (int, error) }) error {
	// rocketmq-client-go logs every retry at warn level to stdout; its outcomes are recorded here.
	rlog.SetLogLevel("fatal")
	var logMu sync.Mutex
	log := realenv.Logf(func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	})
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	b := &bench{c: c, log: log, charts: map[string][]string{}, started: time.Now(), loadStart: report.LoadAvg()}
	for _, mode := range c.Modes {
		var err error
		if mode == "sim" {
			err = b.runSim(ctx)
		} else {
			err = b.runReal(ctx)
		}
		if err != nil {
			return err
		}
	}
	log("wrote %s in %v", filepath.Join(c.Out, "results.json"), time.Since(b.started).Round(time.Second))
	if len(b.failed) > 0 {
		return fmt.Errorf("fairness checks failed:\n  %s", strings.Join(b.failed, "\n  "))
	}
	return nil
}
