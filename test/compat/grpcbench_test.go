package compat_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/grpcfront"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
)

// grpcBenchTopic is the benchmark's topic; the benchmark's endpoint serves it (DetourGRPC prefix).
const grpcBenchTopic = "DetourGRPCBench"

// grpcBenchTurns is how many turns each access point gets at each concurrency.
const grpcBenchTurns = 3

// grpcBenchWarmup and grpcBenchMeasure are a turn's warm-up and measured phase.
const (
	grpcBenchWarmup  = 2 * time.Second
	grpcBenchMeasure = 5 * time.Second
)

// grpcTurn is one access point's measured phase at one concurrency: the SDK's sends, and the CPU
// the serving process used over the phase. idleCPU is what the other access point's process
// used meanwhile, sending nothing: the floor of that process's accounting.
type grpcTurn struct {
	via              string
	senders          int
	phase            rmqtest.GRPCLoadPhase
	cpu, idleCPU     time.Duration
	loadBefore, load string
}

// cpuPerMsg is the serving process's CPU per successful send.
func (t grpcTurn) cpuPerMsg() time.Duration {
	if t.phase.Sent == 0 {
		return 0
	}
	return t.cpu / time.Duration(t.phase.Sent)
}

// BenchmarkGRPCEndpointAgainstProxy runs RocketMQ 5's gRPC SDK (rocketmq-client-java 5.2.0, its
// defaults but the endpoint: TLS on) in its own JVM against two access points in front of the
// same one real RocketMQ 5.5.0 broker: detour's gRPC endpoint (the Detour policy) and the real
// RocketMQ 5.5.0 Proxy in cluster mode (its defaults). Each turn is a fresh SDK producer with 1
// or 64 synchronous senders of 1 KiB messages, a warm-up and a measured phase; the access points
// alternate, the first of each turn rotating, for grpcBenchTurns turns each. It reports msgs/s,
// p99 latency and the serving process's CPU per message: the Proxy JVM's from /proc/<pid>/stat;
// detour's endpoint serves from this test process (the SDK, the broker and the name server are
// JVMs of their own), so detour's is this process's. Ratios are taken per turn, then the median.
// It runs only when asked (-bench) and with DETOUR_ROCKETMQ set:
//
//	DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) go test -run '^$' -bench GRPCEndpointAgainstProxy -benchtime 1x -timeout 20m ./test/compat/
func BenchmarkGRPCEndpointAgainstProxy(b *testing.B) {
	if os.Getenv(rmqtest.EnvDist) == "" {
		b.Skipf("%s is not set: this benchmark needs a real RocketMQ", rmqtest.EnvDist)
	}
	c := rmqtest.Start(b, rmqtest.V5, rmqtest.BrokerConfig{})
	rt := newRuntime(b, c, grpcBenchTopic, 8, detourPolicy("detour"))
	detourAddr := serveGRPCQuiet(b, rt)
	px := c.StartProxy(rmqtest.ProxyOptions{})
	dir := b.TempDir()
	self := os.Getpid()
	cpuOf := map[string]func() (time.Duration, error){
		"detour": func() (time.Duration, error) { return rmqtest.ProcessCPU(self) },
		"proxy":  px.CPU,
	}
	addrOf := map[string]string{"detour": detourAddr, "proxy": px.Addr}
	b.Logf("load average at the start: %s", loadAverage())

	// One untimed run per access point first, so that neither's first turn pays for the
	// broker's first writes into fresh store files or the Proxy JVM's first compilations alone.
	for _, via := range []string{"detour", "proxy"} {
		runGRPCTurn(b, dir, via, addrOf[via], 16, cpuOf[via], cpuOf[other(via)])
	}
	var turns []grpcTurn
	for i := range grpcBenchTurns {
		order := []string{"detour", "proxy"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, senders := range []int{1, 64} {
			for _, via := range order {
				turns = append(turns, runGRPCTurn(b, dir, via, addrOf[via], senders, cpuOf[via], cpuOf[other(via)]))
			}
		}
	}
	b.Logf("load average at the end: %s", loadAverage())
	reportGRPCTurns(b, turns)
}

// other is the access point that is not via.
func other(via string) string {
	if via == "detour" {
		return "proxy"
	}
	return "detour"
}

// serveGRPCQuiet serves detour's gRPC endpoint around rt over TLS (a self-signed certificate, as
// the Proxy's test mode has) without logging, until the benchmark ends.
func serveGRPCQuiet(b *testing.B, rt *producer.Runtime) string {
	srv, err := grpcfront.New(grpcfront.Options{Addr: "127.0.0.1:0", Runtime: rt, Logger: logr.Discard(),
		TLS: selfSignedTLS(b),
		Topics: front.TopicResolverFunc(func(_ context.Context, _, topic string) (front.Target, error) {
			if !strings.HasPrefix(topic, "DetourGRPC") {
				return front.Target{}, fmt.Errorf("%w: %s", front.ErrTopicNotFound, topic)
			}
			return front.Target{Topic: topic}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("gRPC endpoint: %v", err)
		}
	})
	return srv.Addr().String()
}

// runGRPCTurn runs one SDK producer with senders threads against addr and samples the serving
// process's CPU (cpu) and the idle one's (idle) exactly over the measured phase.
func runGRPCTurn(b *testing.B, dir, via, addr string, senders int, cpu, idle func() (time.Duration, error)) grpcTurn {
	b.Helper()
	l := rmqtest.StartGRPCLoad(b, dir, rmqtest.GRPCLoadOptions{Endpoint: addr, Topic: grpcBenchTopic, Senders: senders,
		Warmup: grpcBenchWarmup, Duration: grpcBenchMeasure, Handshake: true})
	if _, err := l.Warm(); err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	t := grpcTurn{via: via, senders: senders, loadBefore: loadAverage()}
	cpu0, idle0 := mustCPU(b, cpu), mustCPU(b, idle)
	if err := l.Go(); err != nil {
		b.Fatalf("through %s: start the measured phase: %v", via, err)
	}
	phase, err := l.Done()
	if err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	t.cpu, t.idleCPU = mustCPU(b, cpu)-cpu0, mustCPU(b, idle)-idle0
	t.phase, t.load = phase, loadAverage()
	if err := l.Close(); err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	if phase.Failed > 0 {
		b.Logf("through %s at c=%d: %d sends failed; first: %s", via, senders, phase.Failed, phase.FirstError)
	}
	return t
}

// mustCPU samples a process's CPU time, failing the benchmark when it cannot.
func mustCPU(b *testing.B, cpu func() (time.Duration, error)) time.Duration {
	b.Helper()
	d, err := cpu()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return strings.TrimSpace(string(raw))
	}
	return strings.Join(f[:3], " ")
}

// reportGRPCTurns logs every turn and, per concurrency, the ratios detour/Proxy of each pair of
// turns and their medians, which it also reports as the benchmark's metrics.
func reportGRPCTurns(b *testing.B, turns []grpcTurn) {
	b.Helper()
	for _, t := range turns {
		b.Logf("%-6s c=%-2d %6d sent %3d failed in %5d ms: %8.0f msgs/s, p50 %v p99 %v max %v; CPU %v (%v/msg), the idle side %v; load %s -> %s",
			t.via, t.senders, t.phase.Sent, t.phase.Failed, t.phase.ElapsedMs, t.phase.Rate(),
			time.Duration(t.phase.P50Us)*time.Microsecond, t.phase.P99(), time.Duration(t.phase.MaxUs)*time.Microsecond,
			t.cpu, t.cpuPerMsg(), t.idleCPU, t.loadBefore, t.load)
	}
	for _, senders := range []int{1, 64} {
		var d, p []grpcTurn
		for _, t := range turns {
			if t.senders != senders {
				continue
			}
			if t.via == "detour" {
				d = append(d, t)
			} else {
				p = append(p, t)
			}
		}
		var rate, p99, cpu []float64
		for i := range min(len(d), len(p)) {
			rate = append(rate, d[i].phase.Rate()/p[i].phase.Rate())
			p99 = append(p99, float64(d[i].phase.P99())/float64(p[i].phase.P99()))
			cpu = append(cpu, float64(d[i].cpuPerMsg())/float64(p[i].cpuPerMsg()))
		}
		b.Logf("c=%d detour/Proxy per turn: msgs/s %s, p99 %s, CPU/msg %s", senders, ratios(rate), ratios(p99), ratios(cpu))
		b.Logf("c=%d medians: detour %.0f msgs/s p99 %v CPU/msg %v; Proxy %.0f msgs/s p99 %v CPU/msg %v; ratios msgs/s %.2f (target >= 2), p99 %.2f, CPU/msg %.2f (target <= 0.5)",
			senders, median(d, func(t grpcTurn) float64 { return t.phase.Rate() }),
			time.Duration(median(d, func(t grpcTurn) float64 { return float64(t.phase.P99()) })),
			time.Duration(median(d, func(t grpcTurn) float64 { return float64(t.cpuPerMsg()) })),
			median(p, func(t grpcTurn) float64 { return t.phase.Rate() }),
			time.Duration(median(p, func(t grpcTurn) float64 { return float64(t.phase.P99()) })),
			time.Duration(median(p, func(t grpcTurn) float64 { return float64(t.cpuPerMsg()) })),
			medianOf(rate), medianOf(p99), medianOf(cpu))
		b.ReportMetric(medianOf(rate), fmt.Sprintf("c%d-msgs/s-ratio", senders))
		b.ReportMetric(medianOf(cpu), fmt.Sprintf("c%d-cpu/msg-ratio", senders))
		b.ReportMetric(medianOf(p99), fmt.Sprintf("c%d-p99-ratio", senders))
		b.ReportMetric(median(d, func(t grpcTurn) float64 { return t.phase.Rate() }), fmt.Sprintf("c%d-detour-msgs/s", senders))
		b.ReportMetric(median(p, func(t grpcTurn) float64 { return t.phase.Rate() }), fmt.Sprintf("c%d-proxy-msgs/s", senders))
	}
}

// ratios formats per-turn ratios.
func ratios(r []float64) string {
	s := make([]string, len(r))
	for i, v := range r {
		s[i] = fmt.Sprintf("%.2f", v)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// median is the median of f over turns.
func median(turns []grpcTurn, f func(grpcTurn) float64) float64 {
	v := make([]float64, len(turns))
	for i, t := range turns {
		v[i] = f(t)
	}
	return medianOf(v)
}

// medianOf is the median of v (the mean of the middle two for an even count); 0 for none.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
