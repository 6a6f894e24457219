package report

import (
	"fmt"
	"strings"

	"github.com/detourmq/detour/hack/faultbench/internal/analysis"
	"github.com/detourmq/detour/hack/faultbench/internal/strategy"
)

// doorStrategies are detour's ways in that the targets judge: the runtime itself, the send
// gateway and the gRPC endpoint.
var doorStrategies = []string{"detour", strategy.Gateway, strategy.GRPCDetour}

// writeDoors judges each of detour's doors against the targets, scenario by scenario (medians):
// 100 % success, at most analysis.TargetBadSharePct of sends reaching the bad broker while it is faulty,
// p99 within analysis.TargetP99Factor of the oracle's.
func writeDoors(b *strings.Builder, rep *Report, mode string) {
	var rows []string
	for _, sc := range rep.Scenarios {
		if sc.Mode != mode {
			continue
		}
		oracle := findMedian(rep, mode, sc.Name, "oracle")
		for _, st := range doorStrategies {
			d := findMedian(rep, mode, sc.Name, st)
			if d == nil {
				continue
			}
			vsOracle := "—"
			if oracle != nil && oracle.P99Ms.Median > 0 {
				ratio := d.P99Ms.Median / oracle.P99Ms.Median
				vsOracle = fmt.Sprintf("%.2f× %s", ratio, mark(ratio <= analysis.TargetP99Factor))
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s %s | %s %s | %s | %s |", sc.Name, st,
				analysis.FmtStat(d.SuccessPct, analysis.FmtPct), mark(d.SuccessPct.Median >= 100),
				analysis.FmtStat(d.BadShareWhileFaultyPct, analysis.FmtPct), mark(analysis.ShareWithin(d.BadShareWhileFaultyPct.Median, analysis.TargetBadSharePct)),
				analysis.FmtStat(d.P99Ms, fmtMs), vsOracle))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### detour's doors against the targets (medians)\n\n"+
		"`detour` is the runtime called directly, `%s` an HTTP client through the send gateway, `%s` RocketMQ's Java gRPC "+
		"SDK through the gRPC endpoint. Targets: 100 %% success, at most %.1f %% of sends reaching the bad broker while it "+
		"is faulty, p99 within %.1f× the oracle's. Through the endpoint the share is the runtime's attempts on the bad "+
		"broker over the SDK's sends (an upper bound: the SDK does not say where a send went).\n\n",
		strategy.Gateway, strategy.GRPCDetour, analysis.TargetBadSharePct, analysis.TargetP99Factor)
	b.WriteString("| scenario | door | success % | bad while faulty % | p99 ms | p99 × oracle |\n|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n")
}

// writeGRPC sets RocketMQ's gRPC SDK through detour's endpoint beside the same SDK through
// RocketMQ's Proxy, with its defaults and with its fault strategy on (medians).
func writeGRPC(b *strings.Builder, rep *Report, mode string) {
	var rows []string
	for _, sc := range rep.Scenarios {
		if sc.Mode != mode {
			continue
		}
		cells := []string{sc.Name}
		found := 0
		for _, st := range []string{strategy.GRPCDetour, strategy.GRPCProxy, strategy.GRPCProxyFault} {
			m := findMedian(rep, mode, sc.Name, st)
			if m == nil {
				cells = append(cells, "—", "—", "—")
				continue
			}
			found++
			cells = append(cells, analysis.FmtStat(m.IssuedPct, analysis.FmtPct), analysis.FmtStat(m.SuccessPct, analysis.FmtPct), analysis.FmtStat(m.P99Ms, fmtMs))
		}
		if found > 1 {
			rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### RocketMQ's gRPC SDK: detour's endpoint beside the Proxy (medians)\n\n"+
		"The same SDK and schedule through `%s`, `%s` (Proxy 5.5.0, its defaults) and `%s` (its fault strategy on). "+
		"*issued*: sends issued of those scheduled (the SDK's senders stuck in slow sends issue fewer).\n\n",
		strategy.GRPCDetour, strategy.GRPCProxy, strategy.GRPCProxyFault)
	b.WriteString("| scenario | detour issued % | detour success % | detour p99 ms | Proxy issued % | Proxy success % | Proxy p99 ms | " +
		"Proxy+fault issued % | Proxy+fault success % | Proxy+fault p99 ms |\n|---|---|---|---|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n")
}

// writeFacade compares RocketMQ's default Java producer directly against the name server and
// through detour's name-server facade, scenario by scenario.
func writeFacade(b *strings.Builder, rep *Report, mode string) {
	var rows []string
	for _, sc := range rep.Scenarios {
		if sc.Mode != mode {
			continue
		}
		direct, through := findMedian(rep, mode, sc.Name, "java-default"), findMedian(rep, mode, sc.Name, strategy.Facade)
		if direct == nil || through == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s → %s | %s → %s | %s → %s | %s → %s |", sc.Name,
			analysis.FmtStat(direct.IssuedPct, analysis.FmtPct), analysis.FmtStat(through.IssuedPct, analysis.FmtPct),
			analysis.FmtStat(direct.SuccessPct, analysis.FmtPct), analysis.FmtStat(through.SuccessPct, analysis.FmtPct),
			analysis.FmtStat(direct.P99Ms, fmtMs), analysis.FmtStat(through.P99Ms, fmtMs),
			analysis.FmtStat(direct.BadShareWhileFaultyPct, analysis.FmtPct), analysis.FmtStat(through.BadShareWhileFaultyPct, analysis.FmtPct)))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### The unmodified Java producer through the name-server facade (medians)\n\n"+
		"`java-default` (RocketMQ's producer with default settings, against the name server) → `%s` (the same "+
		"producer, its namesrvAddr pointed at detour's facade, route poll %v). Nothing in the application changes; "+
		"the facade publishes the queues of brokers detour isolates without the write bit. `java-default` keeps "+
		"RocketMQ's 30 s poll: where the name server itself drops the broker (dead: the broker's connection closes; "+
		"rolling: it unregisters), part of the gain is the shorter poll alone; in blackhole, slow and flapping the name "+
		"server keeps publishing the broker, and only the facade hides it.\n\n", strategy.Facade, strategy.FacadeJavaPoll)
	b.WriteString("| scenario | issued % | success % | p99 ms | bad while faulty % |\n|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n")
}
