package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// Runtime is what the driver needs from the producer runtime.
type Runtime interface {
	SendRoute(ctx context.Context, route string, m *producer.Message) (*producer.SendResult, error)
	Isolated(policy string) []fault.Item
	RouteInfo(route string) (producer.RouteInfo, bool)
}

// RunOptions configure Run.
type RunOptions struct {
	Runtime Runtime
	Env     *Env
	// Target is where the demo sends: the RocketMQ topic, the runtime's route (front.TopicTarget
	// of the demo's Topic; a Target with no Route sends by topic) and the scope its brokers are
	// named in, which the live view leaves out of the brokers' names.
	Target front.Target
	// Policy is the runtime policy whose isolations are shown.
	Policy string
	// Victim is the broker the fault script abuses; "" means the second broker.
	Victim string
	// Duration bounds the run; 0 runs until ctx ends.
	Duration time.Duration
	// Phase is how long each step of the fault script lasts; 0 means 10s.
	Phase time.Duration
	// Rate is the total sends per second, Senders the concurrent senders; 0 means 200 and 4.
	Rate, Senders int
	// Out receives the live view and the summary.
	Out io.Writer
}

// sendTimeout bounds one demo send; it is longer than any policy's send timeout in the samples,
// so the runtime's own budget decides.
const sendTimeout = 10 * time.Second

// stepTimeout bounds one step of the fault script (a pod replacement waits for the old pod to go).
const stepTimeout = 30 * time.Second

// Summary is what a run measured.
type Summary struct {
	Phases []PhaseSummary
	Total  PhaseSummary
	// LastError is the text of the last failed send, if any failed.
	LastError string
}

// PhaseSummary is what one step of the fault script (over all its repetitions) measured.
type PhaseSummary struct {
	Name   string
	Sends  int
	OK     int
	P99    time.Duration
	Victim int // sends stored on the victim broker
}

// phase is one step of the fault script.
type phase struct {
	name  string
	apply func(context.Context) error
}

// script is the fault script: a healthy start, then the victim slow, black-holed and with its
// pod terminating, each fault followed by a healthy step so that the next one starts from a
// broker back in service; the cycle repeats from "slow" for as long as the demo runs.
func script(env *Env, victim string) []phase {
	b := env.Broker(victim)
	setFault := func(f brokersim.Fault) func(context.Context) error {
		return func(context.Context) error {
			b.SetFault(f)
			return nil
		}
	}
	return []phase{
		{"all brokers healthy", nil},
		{victim + " slow (800 ms)", setFault(brokersim.Fault{Delay: 800 * time.Millisecond})},
		{victim + " fast again", setFault(brokersim.Fault{})},
		{victim + " black-holed", setFault(brokersim.Fault{BlackHole: true})},
		{victim + " answering again", setFault(brokersim.Fault{})},
		{victim + " pod terminating", func(ctx context.Context) error {
			return env.MarkTerminating(ctx, victim)
		}},
		{victim + " pod replaced", func(ctx context.Context) error {
			return env.ReplacePod(ctx, victim)
		}},
	}
}

// phaseAt is the script step in force during the k-th phase period: the healthy start once,
// then the other steps in a loop.
func phaseAt(k, steps int) int {
	if k == 0 {
		return 0
	}
	return 1 + (k-1)%(steps-1)
}

// Run waits for the topic's route to cover every broker, then sends steady traffic and plays
// the fault script, printing one line per second, until Duration passes or ctx ends. Sends in
// flight are finished, not cancelled, and the summary is printed before Run returns.
func Run(ctx context.Context, o RunOptions) (Summary, error) {
	brokers, err := o.settle()
	if err != nil {
		return Summary{}, err
	}
	route := o.Target.RouteKey()
	if err := waitForRoute(ctx, o.Runtime, route, len(brokers)); err != nil {
		return Summary{}, err
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	steps := script(o.Env, o.Victim)
	st := newStats(brokers, o.Victim, len(steps))
	st.scope = o.Target.Brokers

	wait := startSenders(ctx, &o, route, st)
	fmt.Fprintf(o.Out, "demo: sending %d messages/s with %d senders to topic %s; faults hit %s, one step every %s\n",
		o.Rate, o.Senders, o.Target.Topic, o.Victim, o.Phase)
	scriptErr := runScript(ctx, &o, steps, st, brokers)
	wait()
	sum := st.summary(steps)
	printSummary(o.Out, sum, o.Victim)
	return sum, scriptErr
}

// settle fills in the defaults of o (phase, rate, senders, and the second broker as the victim)
// and returns the environment's broker names, or an error when the victim is not one of them.
func (o *RunOptions) settle() ([]string, error) {
	if o.Phase <= 0 {
		o.Phase = 10 * time.Second
	}
	if o.Rate <= 0 {
		o.Rate = 200
	}
	if o.Senders <= 0 {
		o.Senders = 4
	}
	brokers := make([]string, 0, len(o.Env.brokers))
	for _, b := range o.Env.brokers {
		brokers = append(brokers, b.Name())
	}
	if o.Victim == "" && len(brokers) > 1 {
		o.Victim = brokers[1]
	}
	if o.Env.Broker(o.Victim) == nil {
		return nil, fmt.Errorf("no broker %q to inject faults into", o.Victim)
	}
	return brokers, nil
}

// startSenders starts o.Senders goroutines that together send o.Rate messages a second on route
// until ctx ends, each recorded in st. The returned wait blocks until they have all returned.
func startSenders(ctx context.Context, o *RunOptions, route string, st *stats) (wait func()) {
	var wg sync.WaitGroup
	ticks := time.NewTicker(time.Second / time.Duration(o.Rate))
	var seq atomic.Int64
	for range o.Senders {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticks.C:
				}
				n := seq.Add(1)
				msg := &producer.Message{Topic: o.Target.Topic, Tags: "demo", Keys: fmt.Sprintf("demo-%d", n),
					Body: fmt.Appendf(nil, "detour demo message %d", n)}
				// Not ctx: a send that started finishes even when the demo is stopping.
				sctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
				start := time.Now()
				res, err := o.Runtime.SendRoute(sctx, route, msg)
				cancel()
				st.record(time.Since(start), res, err)
			}
		})
	}
	return func() {
		wg.Wait()
		ticks.Stop()
	}
}

// runScript walks the fault script, one step every o.Phase, and prints a line of what the senders
// saw every second, until ctx ends or a step fails; the error is the failed step's.
func runScript(ctx context.Context, o *RunOptions, steps []phase, st *stats, brokers []string) error {
	start := time.Now()
	current := -1
	view := time.NewTicker(time.Second)
	defer view.Stop()
	for {
		k := int(time.Since(start) / o.Phase)
		if next := phaseAt(k, len(steps)); next != current {
			current = next
			st.setPhase(current)
			fmt.Fprintf(o.Out, "demo: --- %s ---\n", steps[current].name)
			if stop, err := applyStep(ctx, steps[current]); stop {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case now := <-view.C:
			w := st.takeWindow()
			isolated := o.Runtime.Isolated(o.Policy)
			for i := range isolated {
				isolated[i].Broker = o.Target.Brokers.Name(isolated[i].Broker)
			}
			fmt.Fprintln(o.Out, formatLine(now.Sub(start), steps[current].name, w, brokers, isolated))
		}
	}
}

// applyStep runs step's fault, if it has one; stop says the script ends here, because the demo is
// ending (err nil) or the step failed (err says why).
func applyStep(ctx context.Context, step phase) (stop bool, err error) {
	if step.apply == nil {
		return false, nil
	}
	if ctx.Err() != nil {
		return true, nil
	}
	// A step runs to completion on its own clock, even when the demo's end comes while it talks
	// to the API server.
	sctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	err = step.apply(sctx)
	cancel()
	if err != nil {
		return true, fmt.Errorf("fault script step %q: %w", step.name, err)
	}
	return false, nil
}

// waitForRoute waits until the runtime routes topic over the given number of brokers, which
// means the controllers have seen every broker Pod and the Topic.
func waitForRoute(ctx context.Context, rt Runtime, topic string, brokers int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if info, ok := rt.RouteInfo(topic); ok {
			seen := map[string]bool{}
			for _, q := range info.Queues {
				seen[q.Broker] = true
			}
			if len(seen) >= brokers {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s is not routed over %d brokers: %w", topic, brokers, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// window is one second of traffic.
type window struct {
	sends, ok int
	latencies []time.Duration
	perBroker map[string]int
}

// stats collects traffic per second and per script step.
type stats struct {
	mu        sync.Mutex
	victim    string
	scope     scope.Scope // of the runtime's broker names; brokers are counted by their RocketMQ names
	phase     int
	win       window
	phases    []phaseStats
	total     phaseStats
	lastError string
}

type phaseStats struct {
	sends, ok, victim int
	hist              histogram
}

func newStats(brokers []string, victim string, phases int) *stats {
	s := &stats{victim: victim, phases: make([]phaseStats, phases)}
	s.win.perBroker = make(map[string]int, len(brokers))
	return s
}

func (s *stats) setPhase(p int) {
	s.mu.Lock()
	s.phase = p
	s.mu.Unlock()
}

func (s *stats) record(lat time.Duration, res *producer.SendResult, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ph := &s.phases[s.phase]
	s.win.sends++
	ph.sends++
	s.total.sends++
	s.win.latencies = append(s.win.latencies, lat)
	ph.hist.add(lat)
	s.total.hist.add(lat)
	if err != nil {
		s.lastError = err.Error()
		return
	}
	s.win.ok++
	ph.ok++
	s.total.ok++
	broker := s.scope.Name(res.Broker)
	s.win.perBroker[broker]++
	if broker == s.victim {
		ph.victim++
		s.total.victim++
	}
}

func (s *stats) takeWindow() window {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.win
	s.win = window{perBroker: make(map[string]int, len(w.perBroker))}
	return w
}

func (s *stats) summary(steps []phase) Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	conv := func(name string, p *phaseStats) PhaseSummary {
		return PhaseSummary{Name: name, Sends: p.sends, OK: p.ok, P99: p.hist.quantile(0.99), Victim: p.victim}
	}
	sum := Summary{Total: conv("total", &s.total), LastError: s.lastError}
	for i := range s.phases {
		sum.Phases = append(sum.Phases, conv(steps[i].name, &s.phases[i]))
	}
	return sum
}

// formatLine renders one second: sends, success rate, p99, each broker's share of the stored
// messages and the brokers the policy isolates now.
func formatLine(elapsed time.Duration, step string, w window, brokers []string, isolated []fault.Item) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5ds  %-26s  %4d sends  ok %s  p99 %7s |", int(elapsed.Seconds()), step, w.sends,
		percent(w.ok, w.sends), formatLatency(p99(w.latencies)))
	for _, name := range brokers {
		fmt.Fprintf(&b, " %s %3.0f%%", name, share(w.perBroker[name], w.ok))
	}
	b.WriteString(" | isolated: ")
	if len(isolated) == 0 {
		b.WriteString("none")
	}
	for i, it := range isolated {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", it.Broker, it.Reason)
	}
	return b.String()
}

func printSummary(out io.Writer, s Summary, victim string) {
	fmt.Fprintf(out, "demo: summary\n  %-28s %8s %8s %9s %12s\n", "step", "sends", "ok", "p99", "on "+victim)
	rows := append(slices.Clone(s.Phases), s.Total)
	for _, p := range rows {
		if p.Sends == 0 {
			continue
		}
		fmt.Fprintf(out, "  %-28s %8d %8s %9s %11.1f%%\n", p.Name, p.Sends, percent(p.OK, p.Sends),
			formatLatency(p.P99), share(p.Victim, p.OK))
	}
	if s.LastError != "" {
		fmt.Fprintf(out, "  last failed send: %s\n", s.LastError)
	}
}

func percent(ok, n int) string {
	if n == 0 {
		return "     -"
	}
	return fmt.Sprintf("%5.1f%%", 100*float64(ok)/float64(n))
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func p99(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[(len(lat)*99+99)/100-1]
}

func formatLatency(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
}

// histogram counts latencies in buckets growing by 5%, from 1µs to over a minute, so a long
// demo keeps its quantiles in constant memory within 5%.
type histogram struct {
	counts [400]int
	n      int
}

const histGrowth = 1.05

func (h *histogram) add(d time.Duration) {
	us := float64(d) / float64(time.Microsecond)
	i := 0
	if us > 1 {
		i = min(int(math.Log(us)/math.Log(histGrowth))+1, len(h.counts)-1)
	}
	h.counts[i]++
	h.n++
}

// quantile returns the upper bound of the bucket holding the q-quantile.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(h.n)))
	seen := 0
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(math.Pow(histGrowth, float64(i)) * float64(time.Microsecond))
		}
	}
	return time.Duration(math.Pow(histGrowth, float64(len(h.counts)-1)) * float64(time.Microsecond))
}
