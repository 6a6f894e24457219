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
//     of 1 KiB messages. Each turn is a fresh producer, a warm-up and a measured phase; the sides
//     alternate, the first rotating. Server CPU per message is the manager's and the Proxy JVM's,
//     from /proc/<pid>/stat over the measured phase.
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
	px := c.StartProxy(rmqtest.ProxyOptions{})
	b.Logf("load average at the start: %s", loadAverage())
	b.Run("grpc", func(b *testing.B) { benchGRPCAgainstProxy(b, d, px) })
	b.Run("gateway", func(b *testing.B) { benchGatewayAgainstRuntime(b, c, d) })
	if path := os.Getenv("DETOUR_DOORS_PROFILE"); path != "" {
		profileGRPCTurn(b, d, path)
	}
	b.Logf("load average at the end: %s", loadAverage())
}

// benchGRPCAgainstProxy runs the gRPC turns: TLS on and off, 1 and 64 senders, each side
// doorsTurns times.
func benchGRPCAgainstProxy(b *testing.B, d *deployedManager, px *rmqtest.Proxy) {
	dir := b.TempDir()
	cpuOf := map[string]func() (time.Duration, error){"detour": d.CPU, "proxy": px.CPU}
	addrOf := map[string]string{"detour": d.GRPC, "proxy": px.Addr}
	turn := func(via string, plaintext bool, senders int) grpcTurn {
		return runGRPCTurn(b, dir, via, addrOf[via], plaintext, senders, cpuOf[via], cpuOf[other(via)])
	}
	// One untimed run per access point first, so that neither's first turn pays for the
	// broker's first writes into fresh store files or a JVM's first compilations alone.
	for _, via := range []string{"detour", "proxy"} {
		turn(via, false, 16)
	}
	var turns []grpcTurn
	for i := range doorsTurns {
		order := []string{"detour", "proxy"}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, plaintext := range []bool{false, true} {
			for _, senders := range []int{1, 64} {
				for _, via := range order {
					turns = append(turns, turn(via, plaintext, senders))
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

// other is the access point that is not via.
func other(via string) string {
	if via == "detour" {
		return "proxy"
	}
	return "detour"
}

// runGRPCTurn runs one SDK producer with senders threads against addr (TLS unless plaintext) and
// samples the serving
// process's CPU (cpu) and the idle one's (idle) exactly over the measured phase.
func runGRPCTurn(b *testing.B, dir, via, addr string, plaintext bool, senders int, cpu, idle func() (time.Duration, error)) grpcTurn {
	b.Helper()
	l := rmqtest.StartGRPCLoad(b, dir, rmqtest.GRPCLoadOptions{Endpoint: addr, Topic: doorsBenchTopic, Senders: senders,
		Warmup: doorsWarmup, Duration: doorsMeasure, Handshake: true, Plaintext: plaintext})
	if _, err := l.Warm(); err != nil {
		b.Fatalf("through %s: %v", via, err)
	}
	t := grpcTurn{via: via, plaintext: plaintext, senders: senders, loadBefore: loadAverage()}
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

// tlsName names a turn's transport.
func tlsName(plaintext bool) string {
	if plaintext {
		return "plaintext"
	}
	return "tls"
}

// reportGRPCTurns logs every turn and, per transport and concurrency, the ratios detour/Proxy of
// each pair of turns and their medians, which it also reports as the benchmark's metrics.
func reportGRPCTurns(b *testing.B, turns []grpcTurn) {
	b.Helper()
	for _, t := range turns {
		b.Logf("%-6s %-9s c=%-2d %6d sent %3d failed in %5d ms: %8.0f msgs/s, p50 %v p99 %v max %v; CPU %v (%v/msg), the idle side %v; load %s -> %s",
			t.via, tlsName(t.plaintext), t.senders, t.phase.Sent, t.phase.Failed, t.phase.ElapsedMs, t.phase.Rate(),
			time.Duration(t.phase.P50Us)*time.Microsecond, t.phase.P99(), time.Duration(t.phase.MaxUs)*time.Microsecond,
			t.cpu, t.cpuPerMsg(), t.idleCPU, t.loadBefore, t.load)
	}
	for _, plaintext := range []bool{false, true} {
		for _, senders := range []int{1, 64} {
			var d, p []grpcTurn
			for _, t := range turns {
				switch {
				case t.senders != senders || t.plaintext != plaintext:
				case t.via == "detour":
					d = append(d, t)
				default:
					p = append(p, t)
				}
			}
			reportGRPCPairs(b, fmt.Sprintf("%s c=%d", tlsName(plaintext), senders), d, p)
		}
	}
}

// reportGRPCPairs logs and reports one configuration's ratios, pairing detour's turns with the
// Proxy's in order.
func reportGRPCPairs(b *testing.B, name string, d, p []grpcTurn) {
	var rate, p99, cpu []float64
	for i := range min(len(d), len(p)) {
		rate = append(rate, d[i].phase.Rate()/p[i].phase.Rate())
		p99 = append(p99, float64(d[i].phase.P99())/float64(p[i].phase.P99()))
		cpu = append(cpu, float64(d[i].cpuPerMsg())/float64(p[i].cpuPerMsg()))
	}
	b.Logf("%s detour/Proxy per turn: msgs/s %s, p99 %s, CPU/msg %s", name, ratios(rate), ratios(p99), ratios(cpu))
	b.Logf("%s medians: detour %.0f msgs/s p99 %v CPU/msg %v; Proxy %.0f msgs/s p99 %v CPU/msg %v; ratios msgs/s %.2f (target >= 2), p99 %.2f, CPU/msg %.2f (target <= 0.5)",
		name, median(d, func(t grpcTurn) float64 { return t.phase.Rate() }),
		time.Duration(median(d, func(t grpcTurn) float64 { return float64(t.phase.P99()) })),
		time.Duration(median(d, func(t grpcTurn) float64 { return float64(t.cpuPerMsg()) })),
		median(p, func(t grpcTurn) float64 { return t.phase.Rate() }),
		time.Duration(median(p, func(t grpcTurn) float64 { return float64(t.phase.P99()) })),
		time.Duration(median(p, func(t grpcTurn) float64 { return float64(t.cpuPerMsg()) })),
		medianOf(rate), medianOf(p99), medianOf(cpu))
	unit := strings.ReplaceAll(name, " ", "-")
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
