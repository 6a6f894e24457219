package compat_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/gateway"
	"github.com/detourmq/detour/internal/testsupport/leanhttp"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// gatewayBenchSenders is how many connections post to the gateway, and how many goroutines call
// the runtime directly.
const gatewayBenchSenders = 64

// gatewayTurn is one side's measured phase: successful and failed sends over its length.
type gatewayTurn struct {
	via          string
	sent, failed int64
	elapsed      time.Duration
	cpu          time.Duration // the manager's CPU over the phase (gateway turns only)
	load         string
}

// rate is the turn's successful sends per second.
func (t gatewayTurn) rate() float64 { return float64(t.sent) / t.elapsed.Seconds() }

// benchGatewayAgainstRuntime runs the gateway turns: the deployed manager's gateway from lean
// connections against a runtime in this process called directly, both sending 1 KiB messages to
// the same broker, interleaved for doorsTurns turns each.
func benchGatewayAgainstRuntime(b *testing.B, c *rmqtest.Cluster, d *deployedManager) {
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	rt := newRuntime(b, c, doorsBenchTopic, doorsBenchQueues, detourPolicy("direct"))
	direct := func() func() error {
		return func() error {
			_, err := rt.Send(context.Background(), &producer.Message{Topic: doorsBenchTopic, Tags: "tag", Body: body})
			return err
		}
	}
	url := fmt.Sprintf("http://%s/v1/namespaces/%s/topics/%s/messages", d.Gateway, deployedNamespace, deployedTopic)
	viaGateway := func() func() error {
		cl, err := leanhttp.Dial(url, "application/octet-stream", body, map[string]string{gateway.HeaderTags: "tag"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return cl.Post
	}
	var turns []gatewayTurn
	for i := range doorsTurns {
		order := []string{"gateway", "runtime"}
		if i%2 == 1 {
			order = []string{"runtime", "gateway"}
		}
		for _, via := range order {
			if via == "gateway" {
				turns = append(turns, runSendTurn(b, via, viaGateway, d.CPU))
			} else {
				turns = append(turns, runSendTurn(b, via, direct, nil))
			}
		}
	}
	reportGatewayTurns(b, turns)
}

// runSendTurn runs gatewayBenchSenders senders, each made by newSender, for a warm-up and a
// measured phase, counting the measured phase's sends; cpu, when set, is sampled over it.
func runSendTurn(b *testing.B, via string, newSender func() func() error, cpu func() (time.Duration, error)) gatewayTurn {
	b.Helper()
	var measuring atomic.Bool
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range gatewayBenchSenders {
		send := newSender()
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := send()
				if !measuring.Load() {
					continue
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				sent.Add(1)
			}
		})
	}
	time.Sleep(doorsWarmup) // the warm-up's length is the measure, not a synchronisation
	t := gatewayTurn{via: via}
	var cpu0 time.Duration
	if cpu != nil {
		cpu0 = mustCPU(b, cpu)
	}
	start := time.Now()
	measuring.Store(true)
	time.Sleep(doorsMeasure)
	measuring.Store(false)
	t.elapsed = time.Since(start)
	t.sent, t.failed = sent.Load(), failed.Load()
	if cpu != nil {
		t.cpu = mustCPU(b, cpu) - cpu0
	}
	close(stop)
	wg.Wait()
	t.load = loadAverage()
	if t.failed > 0 {
		b.Logf("%s: %d sends failed; first: %v", via, t.failed, firstErr.Load())
	}
	return t
}

// reportGatewayTurns logs every turn and the ratios gateway/runtime of each pair and their
// median, which it also reports as the benchmark's metric.
func reportGatewayTurns(b *testing.B, turns []gatewayTurn) {
	var g, r []gatewayTurn
	for _, t := range turns {
		perMsg := time.Duration(0)
		if t.sent > 0 {
			perMsg = t.cpu / time.Duration(t.sent)
		}
		b.Logf("%-7s c=%d %7d sent %3d failed in %v: %8.0f msgs/s; manager CPU %v (%v/msg); load %s",
			t.via, gatewayBenchSenders, t.sent, t.failed, t.elapsed.Round(time.Millisecond), t.rate(), t.cpu, perMsg, t.load)
		if t.via == "gateway" {
			g = append(g, t)
		} else {
			r = append(r, t)
		}
	}
	var rate []float64
	for i := range min(len(g), len(r)) {
		rate = append(rate, g[i].rate()/r[i].rate())
	}
	b.Logf("gateway/runtime per turn: msgs/s %s, median %.2f (target >= 0.5)", ratios(rate), medianOf(rate))
	b.ReportMetric(medianOf(rate), "gateway/runtime-msgs/s-ratio")
}
