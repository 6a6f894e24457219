package producer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/fault"
)

// The differential tests run seeded random scripts of fault-tolerance steps through RocketMQ's own
// classes (MQFaultStrategy, LatencyFaultToleranceImpl and TopicPublishInfo of client 5.5.0, whose
// code for these classes is that of 5.3.3, and of client 4.9.8, driven by the FaultScript driver
// in hack/rocketmq on a clock the script moves) and through this package's selection and fault
// table, and require the same decision at every step: every selected queue, the index after it,
// and every broker's availability, reachability and isolation end when asked.
//
// A script is a sequence of episodes; each episode starts a fresh strategy and route from its own
// seed. A mismatch names the episode's seed; replay it alone, with its script and both sides'
// output in the log, with
//
//	DETOUR_DIFF_REPLAY=<preset>:<seed> go test -run TestDifferential ./pkg/producer/
//
// DETOUR_DIFF_SEED fixes the seed the episodes' seeds are drawn from (it is random and logged
// otherwise), and DETOUR_DIFF_STEPS raises the steps per run (default diffSteps; fewer than
// diffFloor are refused, so a run can never pass having checked nothing). The RocketMQ5 run also
// replays its script through a canary, a selection that forgets the previous broker, which must
// diverge.

// diffSteps is the number of steps each preset runs against each Java line by default;
// DETOUR_DIFF_STEPS may raise it, and never below diffFloor.
const (
	diffSteps = 12000
	diffFloor = 10000
)

// javaEpoch is where the driver's clock starts (FaultScript.VirtualClock).
const javaEpoch = 1_700_000_000_000

// diffRun is one preset checked against one Java line.
type diffRun struct {
	preset Preset
	line   rmqtest.Line
}

func TestDifferentialSelectionAndFaultUpdatesMatchRocketMQsClasses(t *testing.T) {
	runs := []diffRun{
		{PresetRocketMQ5, rmqtest.V5},
		{PresetRocketMQ4, rmqtest.V4},
		{PresetDisabled, rmqtest.V5},
		{PresetDisabled, rmqtest.V4},
	}
	steps, err := minimumSteps("DETOUR_DIFF_STEPS", diffFloor)
	if err != nil {
		t.Fatal(err)
	}
	steps = max(steps, diffSteps)
	master, err := masterSeed(t, "DETOUR_DIFF_SEED")
	if err != nil {
		t.Fatal(err)
	}
	replayPreset, replaySeed, replay := strings.Cut(os.Getenv("DETOUR_DIFF_REPLAY"), ":")
	if replay {
		// A replay runs only the named preset's runs; the others are not run at all.
		runs = slices.DeleteFunc(runs, func(r diffRun) bool { return r.preset != Preset(replayPreset) })
		if len(runs) == 0 {
			t.Fatalf("DETOUR_DIFF_REPLAY names preset %q, which no run uses", replayPreset)
		}
	}
	for _, run := range runs {
		t.Run(fmt.Sprintf("%s/%s", run.preset, run.line), func(t *testing.T) {
			var s *script
			if replay {
				seed, err := strconv.ParseUint(replaySeed, 10, 64)
				if err != nil {
					t.Fatalf("DETOUR_DIFF_REPLAY seed %q: %v", replaySeed, err)
				}
				s = newScript()
				s.episode(run.preset, run.line, seed)
			} else {
				s = generateScript(run.preset, run.line, master, steps)
			}
			start := time.Now()
			javaOut, version := runJavaDriver(t, run.line, "FaultScript", s.text())
			javaTime := time.Since(start)
			start = time.Now()
			goOut := runGoScript(t, s, false)
			t.Logf("%d steps in %d episodes: RocketMQ client %s's classes took %v (one JVM), detour's %v",
				s.actions, len(s.episodes), version, javaTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if replay {
				t.Logf("script:\n%s\nRocketMQ:\n%s\ndetour:\n%s", s.text(), strings.Join(javaOut, "\n"), strings.Join(goOut, "\n"))
			}
			if d := firstDivergence(t, javaOut, goOut); d != nil {
				t.Fatal(d.describe(s, run.preset, "DETOUR_DIFF_REPLAY"))
			}
			if run.preset == PresetRocketMQ5 && !replay && firstDivergence(t, javaOut, runGoScript(t, s, true)) == nil {
				t.Fatal("canary: a selection that forgets the previous broker matched RocketMQ on every step; the differential cannot see a retry's filter")
			}
		})
	}
}

// script is the text of a run and where its episodes start.
type script struct {
	lines    []string
	episodes []episodeMark
	actions  int // steps other than the set-up of an episode
	sends    int // the loop differential's sends among them
}

type episodeMark struct {
	seed  uint64
	first int // step (1-based line number) of its begin
}

func newScript() *script { return &script{} }

func (s *script) add(format string, args ...any) {
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

func (s *script) text() string { return strings.Join(s.lines, "\n") + "\n" }

// generateScript draws episodes from master until the run has at least steps actions.
func generateScript(p Preset, line rmqtest.Line, master uint64, steps int) *script {
	rng := rand.New(rand.NewPCG(master, uint64(len(p))<<8|uint64(line[0])))
	s := newScript()
	for s.actions < steps {
		s.episode(p, line, rng.Uint64())
	}
	return s
}

// Broker names: a few ordinary ones and some whose Java hash codes collide ("Aa" and "BB" hash
// alike), so that RocketMQ's item map keeps several names in one bin.
var diffBrokers = []string{"broker-a", "broker-b", "broker-c", "broker-d", "AaAa", "AaBB", "BBAa", "BBBB", "q"}

// Latencies and clock steps around every threshold and isolation of both tables.
var (
	diffLatencies = []int64{0, 1, 10, 49, 50, 99, 100, 549, 550, 551, 999, 1000, 1001, 1799, 1800, 1999, 2000,
		2999, 3000, 3001, 4999, 5000, 14999, 15000, 30000}
	diffAdvances = []int64{0, 1, 2, 49, 50, 550, 999, 1000, 1999, 2000, 2001, 4999, 5000, 5999, 6000, 9999,
		10000, 10001, 29999, 30000, 30001, 59999, 60000, 119999, 120000, 179999, 180000, 599999, 600000, 600001}
	diffOutcomes = []string{"ok", "ok", "ok", "ok", "client", "interrupted", "transport", "transport", "broker"}
)

// episode appends one episode drawn from seed.
func (s *script) episode(p Preset, line rmqtest.Line, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s.episodes = append(s.episodes, episodeMark{seed: seed, first: len(s.lines) + 1})
	s.add("begin %s", p)

	names := slices.Clone(diffBrokers)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	routed := slices.Clone(names[:2+rng.IntN(4)])
	slices.Sort(routed) // the order detour compiles routes in, which the driver takes as given
	var route strings.Builder
	route.WriteString("route")
	for _, b := range routed {
		fmt.Fprintf(&route, " %s:%d", b, 1+rng.IntN(4))
	}
	s.add("%s", route.String())
	s.add("index %d", drawIndex(rng))
	if p == PresetRocketMQ4 {
		s.add("worst %d", drawIndex(rng))
	}
	broker := func() string {
		if rng.IntN(12) == 0 {
			return names[len(names)-1-rng.IntN(len(names)-len(routed))] // one the route does not use
		}
		return routed[rng.IntN(len(routed))]
	}
	latency := func() int64 {
		if rng.IntN(4) == 0 {
			return rng.Int64N(20000)
		}
		return diffLatencies[rng.IntN(len(diffLatencies))]
	}
	n := 100 + rng.IntN(300)
	for range n {
		s.actions++
		switch k := rng.IntN(100); {
		case k < 4:
			// Brokers failing together, as concurrent sends see an outage: equal latencies and
			// isolation ends, which only the item map's order tells apart.
			lat, outcome := latency(), diffOutcomes[rng.IntN(len(diffOutcomes))]
			for _, b := range routed {
				if rng.IntN(4) != 0 {
					s.add("attempt %s %d %s", b, lat, outcome)
				}
			}
		case k < 28:
			s.add("attempt %s %d %s", broker(), latency(), diffOutcomes[rng.IntN(len(diffOutcomes))])
		case k < 36:
			s.add("record %s %d %d %d", broker(), latency(), rng.IntN(2), rng.IntN(2))
		case k < 68:
			last := "-"
			if rng.IntN(2) == 0 {
				last = broker()
			}
			draw := "-"
			if last != "-" && line == rmqtest.V5 && rng.IntN(4) != 0 {
				// a sync retry: the index is reset to Math.abs(random.nextInt(Integer.MAX_VALUE))
				v := rng.Int32N(math.MaxInt32)
				if rng.IntN(8) == 0 {
					v = math.MaxInt32 - 1 - rng.Int32N(40)
				}
				draw = strconv.Itoa(int(v))
			}
			s.add("select %s %s", last, draw)
		case k < 90:
			if rng.IntN(3) == 0 {
				s.add("advance %d", rng.Int64N(40000))
			} else {
				s.add("advance %d", diffAdvances[rng.IntN(len(diffAdvances))])
			}
		default:
			s.add("state %s", broker())
		}
	}
}

// drawIndex draws a thread index: anywhere, or just below the points where its masked value wraps.
func drawIndex(rng *rand.Rand) int32 {
	switch rng.IntN(4) {
	case 0:
		return math.MaxInt32 - rng.Int32N(30)
	case 1:
		return -1 - rng.Int32N(30)
	case 2:
		return rng.Int32N(100)
	}
	return int32(rng.Uint32())
}

// runJavaDriver runs the script through driver (FaultScript or LoopScript, in hack/rocketmq) on
// RocketMQ's classes of line in one JVM and returns its decisions and the client version.
func runJavaDriver(t *testing.T, line rmqtest.Line, driver, text string) ([]string, string) {
	t.Helper()
	dist := rmqtest.Locate(t, line)
	home := t.TempDir()
	argv := append([]string{"-Xmx256m"}, rmqtest.JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
		"-Drocketmq.client.logLevel=ERROR", "-cp", dist.ClientClassPath, "dev.detour.rmqdriver."+driver)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.Stdin = strings.NewReader(text)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s on RocketMQ client %s: %v\nstderr:\n%s", driver, dist.ClientVersion, err, tail(stderr.String(), 4000))
	}
	var out []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if len(out) == 0 || !strings.HasPrefix(out[len(out)-1], `{"done":true`) {
		t.Fatalf("%s output ends without done: %q\nstderr:\n%s", driver, tail(stdout.String(), 2000), tail(stderr.String(), 4000))
	}
	return out[:len(out)-1], dist.ClientVersion
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// runGoScript runs the script through a Runtime: its fault table (Update, UpdateFaultItem) and its
// route's selection, on a manual clock that moves as the driver's does. canary makes every
// selection forget the previous broker, a deliberate error the comparison must catch.
func runGoScript(t *testing.T, s *script, canary bool) []string {
	t.Helper()
	st := faultState{nowMs: javaEpoch, canary: canary}
	defer st.close()
	for i, line := range s.lines {
		step := i + 1
		f := strings.Fields(line)
		num := func(k int) int64 {
			n, err := strconv.ParseInt(f[k], 10, 64)
			if err != nil {
				t.Fatalf("step %d %q: %v", step, line, err)
			}
			return n
		}
		switch f[0] {
		case "begin":
			st.begin(t, Preset(f[1]))
		case "route":
			st.route(t, f[1:])
		case "index":
			st.rt.next.n.Store(uint32(int32(num(1))))
		case "worst":
			st.tol.SeedPickIndex(int32(num(1)))
		case "attempt":
			st.tol.Update(f[1], time.Duration(num(2))*time.Millisecond, diffOutcome[f[3]])
		case "record":
			st.tol.UpdateFaultItem(f[1], time.Duration(num(2))*time.Millisecond, f[3] == "1", f[4] == "1")
		case "select":
			st.out = append(st.out, st.selectAfter(step, f[1], f[2], num))
		case "advance":
			st.clk.Advance(time.Duration(num(1)) * time.Millisecond)
			st.nowMs += num(1)
		case "state":
			st.out = append(st.out, st.state(step, f[1]))
		default:
			t.Fatalf("step %d: unknown command %q", step, line)
		}
	}
	return st.out
}

// diffOutcome maps the script's outcomes to the fault table's.
var diffOutcome = map[string]fault.Outcome{"ok": fault.Success, "client": fault.ClientError,
	"interrupted": fault.Interrupted, "transport": fault.TransportError, "broker": fault.BrokerError}

// faultState is the Go side of a fault script within one episode.
type faultState struct {
	out    []string
	nowMs  int64
	canary bool
	r      *Runtime
	clk    *fault.ManualClock
	rt     *route
	tol    *fault.Tolerance
}

func (st *faultState) close() {
	if st.r != nil {
		st.r.Close()
	}
}

// begin starts an episode's runtime under p, on a clock where the last one's stopped.
func (st *faultState) begin(t *testing.T, p Preset) {
	st.close()
	st.clk = fault.NewManualClock(time.UnixMilli(st.nowMs))
	st.r = New(Options{Clock: st.clk, ExpiryInterval: time.Hour})
	if err := st.r.SetPolicy(mustPresetPolicy(t, "", p)); err != nil {
		t.Fatal(err)
	}
	st.tol = st.r.tolerance("")
}

// route sets the episode's route from broker:queues fields.
func (st *faultState) route(t *testing.T, brokers []string) {
	spec := Route{Topic: "T"}
	for k, bq := range brokers {
		name, q, _ := strings.Cut(bq, ":")
		n, _ := strconv.Atoi(q)
		st.r.SetBroker(Broker{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", 1+k), Ready: true})
		spec.Brokers = append(spec.Brokers, BrokerQueues{Broker: name, WriteQueues: n})
	}
	if err := st.r.SetRoute(spec); err != nil {
		t.Fatal(err)
	}
	st.rt = st.r.state.Load().index.get("T")
}

// selectAfter selects after last ("-": none), resetting the index to draw first unless it is "-".
func (st *faultState) selectAfter(step int, last, draw string, num func(int) int64) string {
	if last == "-" || st.canary {
		last = ""
	}
	reset := draw != "-"
	if reset {
		v := uint32(num(2))
		st.rt.next.seed = func() uint32 { return v }
	}
	q := st.rt.pick(last, reset)
	return fmt.Sprintf(`{"step":%d,"pick":"%s/%d","index":%d}`, step, q.b.name, q.id, int32(st.rt.next.n.Load()))
}

// state renders broker's item.
func (st *faultState) state(step int, broker string) string {
	var until int64
	if it, known := st.tol.Lookup(broker); known && !it.Until.IsZero() {
		until = it.Until.UnixMilli()
	}
	return fmt.Sprintf(`{"step":%d,"broker":"%s","available":%v,"reachable":%v,"until":%d}`,
		step, broker, st.tol.Available(broker), st.tol.Reachable(broker), until)
}

// decision is one line of either side's output.
type decision struct {
	Step int    `json:"step"`
	Pick string `json:"pick"`
	// Send and Tried are how a send of the loop differential ended and its attempts' queues.
	Send      string `json:"send"`
	Tried     string `json:"tried"`
	Index     *int32 `json:"index"`
	Broker    string `json:"broker"`
	Available *bool  `json:"available"`
	Reachable *bool  `json:"reachable"`
	Until     int64  `json:"until"`
}

// key renders what must be equal: the queue and index of a selection; a broker's availability and
// reachability, and its isolation end while it is unavailable (RocketMQ 4.x moves the end of an
// available item to now on every update; detour keeps it where it was, which is as available).
func (d decision) key() string {
	if d.Send != "" {
		return fmt.Sprintf("send %s tried [%s] index %d", d.Send, d.Tried, *d.Index)
	}
	if d.Pick != "" {
		return fmt.Sprintf("pick %s index %d", d.Pick, *d.Index)
	}
	until := int64(0)
	if !*d.Available {
		until = d.Until
	}
	return fmt.Sprintf("%s available %v reachable %v until %d", d.Broker, *d.Available, *d.Reachable, until)
}
