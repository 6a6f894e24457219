package strategy

import (
	"fmt"
	"strings"
	"time"

	"github.com/detourmq/detour/pkg/producer"
)

// Gateway is an HTTP client sending through detour's send gateway, which sends through a
// runtime with the detour strategy's policy.
const Gateway = "gateway+detour"

// Names of the gRPC strategies and the all-knobs Java one.
const (
	GRPCDetour     = "grpc+detour"
	GRPCProxy      = "grpc+proxy"
	GRPCProxyFault = "grpc+proxy-fault"
	// JavaAllKnobsPerAttempt is the all-knobs Java strategy's sendMsgMaxTimeoutPerRequest.
	JavaAllKnobsPerAttempt = time.Second
)

// Facade is RocketMQ's Java producer with default settings pointed at detour's
// name-server facade (pkg/facade), which clears the write bit of isolated brokers' queues in the
// routes it serves, while detour's runtime measures the brokers with a canary trickle.
const Facade = "java-default+facade"

// FacadeWatch is Facade with no traffic through detour at all: its runtime learns
// only by watching the routed brokers (the policy's probe.routedBrokers) and from pod state.
const FacadeWatch = "java-default+facade+watch"

// Settings of the facade strategy: the Java client's route poll (RocketMQ's default is 30 s,
// which a 12 s run would never reach) and the rate of detour's own canary sends, which are what
// detour measures the brokers by when every application sends through its own client.
const (
	FacadeJavaPoll   = 2 * time.Second
	FacadeCanaryRate = 50
)

// Hedging strategies: the detour strategy's policy with hedged sends on (the default budget), on
// detour's runtime and through its gRPC endpoint, each with its oracle.
const (
	DetourHedge     = "detour+hedge"
	OracleHedge     = "oracle+hedge"
	GRPCDetourHedge = "grpc+detour+hedge"
	GRPCOracleHedge = "grpc+oracle+hedge"
)

// IsOracle says whether a strategy never knows the bad broker: it is left out of its route and
// its runtime before the run.
func IsOracle(name string) bool {
	return name == "oracle" || name == OracleHedge || name == GRPCOracleHedge
}

// Hedges says whether a strategy's runtime sends hedges.
func Hedges(name string) bool {
	return name == DetourHedge || name == OracleHedge || name == GRPCDetourHedge || name == GRPCOracleHedge
}

// MatchingOracle is the oracle whose p99 a strategy's slow share is measured against: the oracle
// with hedging for the runtime's hedging rows, the gRPC oracle with hedging for every row through
// a gRPC access point (the SDK's own cost is in both), the oracle for every other row. An oracle
// is matched with itself.
func MatchingOracle(name string) string {
	switch {
	case name == DetourHedge || name == OracleHedge:
		return OracleHedge
	case strings.HasPrefix(name, "grpc+"):
		return GRPCOracleHedge
	}
	return "oracle"
}

// RuntimeStrategy is the runtime strategy behind a gRPC strategy through detour's endpoint.
func RuntimeStrategy(grpc string) string {
	return map[string]string{GRPCDetour: "detour", GRPCDetourHedge: DetourHedge, GRPCOracleHedge: OracleHedge}[grpc]
}

// RealNames are the strategies that can run on real brokers, in report order.
var RealNames = []string{"detour", "oracle", DetourHedge, OracleHedge, "java-5", "java-5-all", "java-4.9", "java-default", Facade,
	FacadeWatch, Gateway, GRPCDetour, GRPCDetourHedge, GRPCOracleHedge, GRPCProxy, GRPCProxyFault, "rocketmq5", "rocketmq4",
	"none", "rocketmq-client-go"}

// DefaultReal run on real brokers unless -real-strategies says otherwise.
var DefaultReal = []string{"detour", "oracle", "java-5", "java-5-all", "java-4.9", "java-default", Facade,
	FacadeWatch, Gateway, GRPCDetour, GRPCProxy, GRPCProxyFault}

// Settings of the detour strategy (and of the oracle, which differs only in its route).
const (
	DetourPerAttempt    = 400 * time.Millisecond
	DetourProbeInterval = 1000 * time.Millisecond
	DetourProbeTimeout  = 200 * time.Millisecond
)

// SimNames are the brokersim strategies, in report order.
var SimNames = []string{"none", "rocketmq4", "rocketmq5", "detour", "oracle", "rocketmq-client-go"}

// Descriptions say what each strategy is, for the report.
var Descriptions = map[string]string{
	"none": "detour's runtime with the Disabled preset, RocketMQ's default producer (sendLatencyFaultEnable=false): " +
		"no broker is isolated, a retry only avoids the previous attempt's broker; 3 attempts in 3000 ms. Its " +
		"selection is proven step by step against RocketMQ 5.x's and 4.9.x's own classes; the index is shared by " +
		"the benchmark's senders where RocketMQ keeps one per thread",
	"rocketmq4": "detour's runtime with the RocketMQ4 preset, RocketMQ 4.9.x's producer with sendLatencyFaultEnable=true: " +
		"its table (a failed broker isolated for 10 minutes), update rules, selection (index walk, previous broker " +
		"not avoided, pickOneAtLeast) and retry codes, proven step by step against the 4.9.8 client's classes; " +
		"no probing, no pod awareness, no per-attempt cap; 3 attempts in 3000 ms; the index is shared by the " +
		"benchmark's senders where RocketMQ keeps one per thread",
	"rocketmq5": "detour's runtime with the RocketMQ5 preset, RocketMQ 5.3.x's producer with sendLatencyFaultEnable=true: " +
		"its table (a failed broker isolated for 10 s), update rules, selection (last pass unfiltered, index reset " +
		"on retries) and retry codes, proven step by step against the 5.x client's classes; no probing, no pod " +
		"awareness, no per-attempt cap (sendMsgMaxTimeoutPerRequest off); 3 attempts in 3000 ms; the index is " +
		"shared by the benchmark's senders where RocketMQ keeps one per thread",
	"detour": fmt.Sprintf("the Detour preset (RocketMQ 5.x's table and rules, probing with follow-ups of suspects and "+
		"a probation of %d fast good probes in a row after silence, a stall or a repeated isolation, after silence spread over "+
		"as long as the trouble lasted (at most %v), growth on repeat, pod health respected, a TOPIC_NOT_EXIST broker held "+
		"out for that topic alone, never every broker isolated) with a per-attempt cap of %v instead of 1 s and probes "+
		"every %v (timeout %v); 3 attempts in 3000 ms",
		producer.DetourProbationProbes, producer.DetourProbationSpan, DetourPerAttempt, DetourProbeInterval, DetourProbeTimeout),
	"oracle": "the detour policy with the bad broker left out of the route before the run",
	DetourHedge: fmt.Sprintf("the detour strategy with hedged sends on (spec.hedge.enabled, the default budget of %d %% of sends): "+
		"a first attempt that waited past its broker's usual latency also sends the same message to another broker, the first "+
		"to store it answers", producer.DefaultHedgeBudgetPercent),
	OracleHedge: "the oracle (the bad broker left out before the run) with the same hedging: the control that separates the " +
		"fault's cost from the machine's own tail",
	GRPCDetourHedge:      "the gRPC SDK through detour's gRPC endpoint (as grpc+detour) whose runtime hedges (the detour+hedge policy)",
	GRPCOracleHedge:      "the gRPC SDK through detour's gRPC endpoint whose runtime is the oracle+hedge one: it never knows the bad broker",
	"rocketmq-client-go": "the real rocketmq-client-go v2 producer through brokersim's name server: default round-robin selector, WithRetry(2), WithSendMsgTimeout(3s); it knows nothing of pod state",
	Gateway: "an HTTP client (Go's net/http, keep-alive) posting each message's body to detour's send " +
		"gateway, which sends it through a runtime with the detour strategy's policy; pod steps reach that runtime, and a send's " +
		"brokers are the ones the gateway's answer lists",
	"java-5": "RocketMQ's own Java DefaultMQProducer 5.5.0 (the newest 5.x), sendLatencyFaultEnable=true and " +
		"the detector as it ships (startDetector off), route refresh every 30 s; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms",
	"java-5-all": fmt.Sprintf("RocketMQ's own Java DefaultMQProducer 5.5.0 with every fault knob it has: "+
		"sendLatencyFaultEnable=true, startDetectorEnable=true (its detector probes isolated brokers and lifts an isolation once one "+
		"answers) and sendMsgMaxTimeoutPerRequest=%d ms; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms", JavaAllKnobsPerAttempt.Milliseconds()),
	GRPCDetour: "RocketMQ 5's Java gRPC SDK 5.2.0 (its defaults: TLS, 3 attempts, 3 s per request) through detour's " +
		"gRPC endpoint, which sends every message through a runtime with the detour strategy's policy; pod steps reach that runtime. " +
		"The SDK does not say where a send went: the share reaching the bad broker is the runtime's attempts on it over the SDK's sends (an upper bound)",
	GRPCProxy: "the same SDK through RocketMQ Proxy 5.5.0 in cluster mode with its defaults (its fault strategy off)",
	GRPCProxyFault: "the same SDK through RocketMQ Proxy 5.5.0 with its own fault strategy on: sendLatencyEnable=true and " +
		"startDetectorEnable=true in its ProxyConfig",
	"java-4.9": "RocketMQ's own Java DefaultMQProducer 4.9.8 with sendLatencyFaultEnable=true on the 5.5.0 brokers; " +
		"retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms",
	"java-default": "RocketMQ's own Java DefaultMQProducer 5.5.0 with default settings (fault tolerance off), " +
		"what most applications run; retryTimesWhenSendFailed=2, sendMsgTimeout=3000 ms",
	Facade: fmt.Sprintf("the same default Java producer (fault tolerance off) with namesrvAddr "+
		"pointed at detour's name-server facade and pollNameServerInterval lowered to %v; the facade forwards to the real "+
		"name server and publishes the queues of brokers detour isolates (the detour strategy's policy, measured by a "+
		"canary of %d msg/s through detour's runtime, plus pod state) without the write bit, so the unmodified client "+
		"stops writing there at its next route poll", FacadeJavaPoll, FacadeCanaryRate),
	FacadeWatch: "the facade strategy with no canary: nothing is sent through detour, whose runtime " +
		"learns only by watching the routed brokers (the detour policy with probe.routedBrokers: GET_MAX_OFFSET to every " +
		"broker each probe interval, spread ±50 %; a broker silent for a send attempt's time counts as a failed attempt, ProbeFailed) " +
		"and from pod state",
}
