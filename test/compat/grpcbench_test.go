package compat_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// doorsTurns is how many turns each side gets in each configuration.
const doorsTurns = 3

// doorsWarmup and doorsMeasure are a turn's warm-up and measured phase.
const (
	doorsWarmup  = 8 * time.Second
	doorsMeasure = 15 * time.Second
	// doorsWarmupPass is the measured length of each side's warm-up pass, which is not counted.
	doorsWarmupPass = 30 * time.Second
)

// grpcTurn is one access point's measured phase at one concurrency: the SDK's sends, and the CPU
// the serving process used over the phase. idleCPU is what the other access point's process
// used meanwhile, sending nothing: the floor of that process's accounting.
type grpcTurn struct {
	via              string
	plaintext        bool
	senders          int
	phase            rmqtest.GRPCLoadPhase
	cpu, idleCPU     time.Duration
	loadBefore, load string
	// threads is how the serving JVM's CPU over the phase split between compiling, collecting
	// and the rest (rmqtest.ThreadsCPU's groups); nil for detour, whose GC shares its threads.
	threads map[string]time.Duration
}

// The sides a gRPC turn is served by: detour's manager, the Proxy as RocketMQ's start script runs
// it, and the Proxy as the shared test support runs it (C1 only, the serial collector, a 256 MiB
// heap), kept to show what those settings cost it.
const (
	sideDetour      = "detour"
	sideProxy       = "proxy"
	sideProxyHarnes = "proxy-harness"
)

// grpcSide is one access point a turn can be served by.
type grpcSide struct {
	addr    string
	cpu     func() (time.Duration, error)
	threads func() (map[string]time.Duration, error)
}

// share is the share of the turn's server CPU its JVM spent in group; -1 when not known.
func (t grpcTurn) share(group string) float64 {
	if t.threads == nil || t.cpu <= 0 {
		return -1
	}
	return float64(t.threads[group]) / float64(t.cpu)
}

// cpuPerMsg is the serving process's CPU per successful send.
func (t grpcTurn) cpuPerMsg() time.Duration {
	if t.phase.Sent == 0 {
		return 0
	}
	return t.cpu / time.Duration(t.phase.Sent)
}

// BenchmarkDoorsAsDeployed measures detour's doors as users run them: the cmd/manager binary
// against an API server holding a Cluster (the real cluster's name servers) and a Topic, which
// every request resolves through the front layer, in front of one real RocketMQ 5.5.0 broker.
//
//   - grpc: RocketMQ 5's Java gRPC SDK 5.2.0 (its defaults but the endpoint), in its own JVM,
//     against the manager's gRPC endpoint and against the real RocketMQ 5.5.0 Proxy (cluster mode,
//     its defaults) in front of the same broker, with TLS on and off, 1 and 64 synchronous senders
//     of 1 KiB messages. The Proxy runs as RocketMQ's start script runs it (ShippedServerJVM: G1,
//     C2, a 4 GiB heap); a second Proxy runs with the shared test support's JVM settings (C1 only,
//     the serial collector, 256 MiB), TLS turns only, to show what those cost it. Every side
//     first gets an unmeasured warm-up pass at 64 senders. Each turn is a fresh producer, a
//     warm-up and a measured phase; the sides alternate, the order reversing every turn. Server
//     CPU per message is the manager's and the Proxy JVM's, from /proc/<pid>/stat over the
//     measured phase, with the Proxy's compiler and collector threads' share.
//   - gateway: 64 lean HTTP/1.1 connections posting one 1 KiB message per request to the
//     manager's gateway (its local mode: plain HTTP, no token), against 64 goroutines calling a
//     runtime in this process directly, interleaved.
//
// Ratios are taken per pair of turns, then the median. With DETOUR_DOORS_PROFILE set to a file
// name, a CPU profile of the manager over a last, unmeasured turn of 64 gRPC senders (TLS) is
// written there. It runs only when asked (-bench), with DETOUR_ROCKETMQ and KUBEBUILDER_ASSETS set:
//
//	KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh) \
//	    go test -run '^$' -bench DoorsAsDeployed -benchtime 1x -timeout 60m -v ./test/compat/
func BenchmarkDoorsAsDeployed(b *testing.B) {
	if os.Getenv(rmqtest.EnvDist) == "" {
		b.Skipf("%s is not set: this benchmark needs a real RocketMQ", rmqtest.EnvDist)
	}
	c := rmqtest.Start(b, rmqtest.V5, rmqtest.BrokerConfig{})
	// TLS with a self-signed certificate, as the Proxy's test mode has, and plaintext on the same
	// port, as the Proxy serves both.
	d := deployManager(b, c, "--grpc-allow-plaintext")
	sides := map[string]grpcSide{sideDetour: {addr: d.GRPC, cpu: d.CPU}}
	for name, jvm := range map[string][]string{sideProxy: rmqtest.ShippedServerJVM, sideProxyHarnes: nil} {
		px := c.StartProxy(rmqtest.ProxyOptions{JVM: jvm})
		sides[name] = grpcSide{addr: px.Addr, cpu: px.CPU, threads: px.ThreadsCPU}
	}
	b.Logf("load average at the start: %s", loadAverage())
	b.Run("grpc", func(b *testing.B) { benchGRPCAgainstProxy(b, sides) })
	b.Run("gateway", func(b *testing.B) { benchGatewayAgainstRuntime(b, c, d) })
	if path := os.Getenv("DETOUR_DOORS_PROFILE"); path != "" {
		profileGRPCTurn(b, d, path)
	}
	b.Logf("load average at the end: %s", loadAverage())
}

// benchGRPCAgainstProxy runs the gRPC turns: TLS on and off, 1 and 64 senders, detour and the
// Proxy as shipped doorsTurns times each, the Proxy as the harness runs it with TLS only.
func benchGRPCAgainstProxy(b *testing.B, sides map[string]grpcSide) {
	dir := b.TempDir()
	turn := func(via string, plaintext bool, senders int, warmup, measure time.Duration) grpcTurn {
		return runGRPCTurn(b, dir, via, plaintext, senders, warmup, measure, sides)
	}
	// A warm-up pass of every side first, at the measured turns' heaviest load and longer than
	// one, so that each JVM has compiled its hot paths (C2 takes tens of seconds) and the broker
	// has written its first store files before anything is measured.
	for _, via := range []string{sideDetour, sideProxy, sideProxyHarnes} {
		w := turn(via, false, 64, doorsWarmup, doorsWarmupPass)
		b.Logf("warm-up pass of %s: %.0f msgs/s, JIT %s of its CPU in the pass", via, w.phase.Rate(), percent(w.share(rmqtest.ThreadsJIT)))
	}
	var turns []grpcTurn
	for i := range doorsTurns {
		order := []string{sideDetour, sideProxy, sideProxyHarnes}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, plaintext := range []bool{false, true} {
			for _, senders := range []int{1, 64} {
				for _, via := range order {
					if via == sideProxyHarnes && plaintext {
						continue
					}
					turns = append(turns, turn(via, plaintext, senders, doorsWarmup, doorsMeasure))
				}
			}
		}
	}
	reportGRPCTurns(b, turns)
}

// profileGRPCTurn records the manager's CPU profile into path over an unmeasured turn of 64 TLS
// senders.
func profileGRPCTurn(b *testing.B, d *deployedManager, path string) {
	l := rmqtest.StartGRPCLoad(b, b.TempDir(), rmqtest.GRPCLoadOptions{Endpoint: d.GRPC, Topic: doorsBenchTopic, Senders: 64,
		Warmup: 2 * time.Second, Duration: 12 * time.Second})
	if _, err := l.Warm(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Profile(ctx, 10*time.Second, path); err != nil {
		b.Fatal(err)
	}
	phase, err := l.Done()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("profiled the manager over 10 s of a turn of 64 senders (%.0f msgs/s) into %s", phase.Rate(), path)
}

// runGRPCTurn runs one SDK producer with senders threads against side via (TLS unless
// plaintext) and samples the serving process's CPU, its JVM's threads, and the other sides' CPU
// (idle) exactly over the measured phase.
func runGRPCTurn(b *testing.B, dir, via string, plaintext bool, senders int, warmup, measure time.Duration, sides map[string]grpcSide) grpcTurn {
	b.Helper()
	side := sides[via]
	l := rmqtest.StartGRPCLoad(b, dir, rmqtest.GRPCLoadOptions{Endpoint: side.addr, Topic: doorsBenchTopic, Senders: senders,
		Warmup: warmup, Duration: measure, Handshake: true, Plaintext: plaintext})
	if _, err := l.Warm(); err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	t := grpcTurn{via: via, plaintext: plaintext, senders: senders, loadBefore: loadAverage()}
	idle := func() (sum time.Duration) {
		for name, s := range sides {
			if name != via {
				sum += mustCPU(b, s.cpu)
			}
		}
		return sum
	}
	cpu0, idle0, threads0 := mustCPU(b, side.cpu), idle(), mustThreads(b, side.threads)
	if err := l.Go(); err != nil {
		b.Fatalf("through %s: start the measured phase: %v", via, err)
	}
	phase, err := l.Done()
	if err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	t.cpu, t.idleCPU = mustCPU(b, side.cpu)-cpu0, idle()-idle0
	if threads0 != nil {
		t.threads = map[string]time.Duration{}
		for g, d := range mustThreads(b, side.threads) {
			t.threads[g] = max(0, d-threads0[g])
		}
	}
	t.phase, t.load = phase, loadAverage()
	if err := l.Close(); err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	if phase.Failed > 0 {
		b.Logf("through %s at c=%d: %d sends failed; first: %s", via, senders, phase.Failed, phase.FirstError)
	}
	return t
}

// mustThreads samples a JVM's threads' CPU by group, failing the benchmark when it cannot; nil
// when the side is no JVM.
func mustThreads(b *testing.B, threads func() (map[string]time.Duration, error)) map[string]time.Duration {
	b.Helper()
	if threads == nil {
		return nil
	}
	m, err := threads()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// percent formats a share, or n/a for an unknown one (-1).
func percent(share float64) string {
	if share < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f %%", 100*share)
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

// tlsName names a turn's transport.
func tlsName(plaintext bool) string {
	if plaintext {
		return "plaintext"
	}
	return "tls"
}

// reportGRPCTurns logs every turn and, per transport and concurrency, the ratios of each pair of
// turns and their medians, which it also reports as the benchmark's metrics: detour against the
// Proxy as shipped, and the Proxy as the harness runs it against the Proxy as shipped.
func reportGRPCTurns(b *testing.B, turns []grpcTurn) {
	b.Helper()
	for _, t := range turns {
		b.Logf("%-13s %-9s c=%-2d %6d sent %3d failed in %5d ms: %8.0f msgs/s, p50 %v p99 %v max %v; CPU %v (%v/msg; JIT %s, GC %s), the other sides %v; load %s -> %s",
			t.via, tlsName(t.plaintext), t.senders, t.phase.Sent, t.phase.Failed, t.phase.ElapsedMs, t.phase.Rate(),
			time.Duration(t.phase.P50Us)*time.Microsecond, t.phase.P99(), time.Duration(t.phase.MaxUs)*time.Microsecond,
			t.cpu, t.cpuPerMsg(), percent(t.share(rmqtest.ThreadsJIT)), percent(t.share(rmqtest.ThreadsGC)), t.idleCPU, t.loadBefore, t.load)
	}
	for _, plaintext := range []bool{false, true} {
		for _, senders := range []int{1, 64} {
			name := fmt.Sprintf("%s c=%d", tlsName(plaintext), senders)
			of := func(via string) []grpcTurn {
				return slices.DeleteFunc(slices.Clone(turns), func(t grpcTurn) bool {
					return t.via != via || t.senders != senders || t.plaintext != plaintext
				})
			}
			reportGRPCPairs(b, name, "detour/Proxy", of(sideDetour), of(sideProxy))
			if !plaintext {
				reportGRPCPairs(b, name, "harness-Proxy/Proxy", of(sideProxyHarnes), of(sideProxy))
			}
		}
	}
}

// reportGRPCPairs logs and reports one configuration's ratios of side a to side b, pairing their
// turns in order.
func reportGRPCPairs(b *testing.B, name, pair string, d, p []grpcTurn) {
	var rate, p50, p99, cpu []float64
	for i := range min(len(d), len(p)) {
		rate = append(rate, d[i].phase.Rate()/p[i].phase.Rate())
		p50 = append(p50, float64(d[i].phase.P50Us)/float64(p[i].phase.P50Us))
		p99 = append(p99, float64(d[i].phase.P99())/float64(p[i].phase.P99()))
		cpu = append(cpu, float64(d[i].cpuPerMsg())/float64(p[i].cpuPerMsg()))
	}
	b.Logf("%s %s per turn: msgs/s %s, p50 %s, p99 %s, CPU/msg %s", name, pair, ratios(rate), ratios(p50), ratios(p99), ratios(cpu))
	b.Logf("%s %s medians: %.0f msgs/s p99 %v CPU/msg %v against %.0f msgs/s p99 %v CPU/msg %v; ratios msgs/s %.2f, p50 %.2f, p99 %.2f, CPU/msg %.2f",
		name, pair, median(d, func(t grpcTurn) float64 { return t.phase.Rate() }),
		time.Duration(median(d, func(t grpcTurn) float64 { return float64(t.phase.P99()) })),
		time.Duration(median(d, func(t grpcTurn) float64 { return float64(t.cpuPerMsg()) })),
		median(p, func(t grpcTurn) float64 { return t.phase.Rate() }),
		time.Duration(median(p, func(t grpcTurn) float64 { return float64(t.phase.P99()) })),
		time.Duration(median(p, func(t grpcTurn) float64 { return float64(t.cpuPerMsg()) })),
		medianOf(rate), medianOf(p50), medianOf(p99), medianOf(cpu))
	unit := strings.ReplaceAll(name+" "+pair, " ", "-")
	b.ReportMetric(medianOf(rate), unit+"-msgs/s-ratio")
	b.ReportMetric(medianOf(cpu), unit+"-cpu/msg-ratio")
	b.ReportMetric(medianOf(p99), unit+"-p99-ratio")
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
