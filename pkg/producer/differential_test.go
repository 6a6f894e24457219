package producer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/detourmq/detour/internal/rmqtest"
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
// otherwise), and DETOUR_DIFF_STEPS sets the steps per run (default diffSteps).

// diffSteps is the number of steps each preset runs against each Java line, at least.
const diffSteps = 12000

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
	steps := diffSteps
	if v := os.Getenv("DETOUR_DIFF_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("DETOUR_DIFF_STEPS=%q: %v", v, err)
		}
		steps = n
	}
	var master uint64
	if v := os.Getenv("DETOUR_DIFF_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DETOUR_DIFF_SEED=%q: %v", v, err)
		}
		master = n
	} else {
		master = rand.Uint64()
	}
	replayPreset, replaySeed, replay := strings.Cut(os.Getenv("DETOUR_DIFF_REPLAY"), ":")
	if replay {
		// A replay runs only the named preset's runs; the others are not run at all.
		runs = slices.DeleteFunc(runs, func(r diffRun) bool { return r.preset != Preset(replayPreset) })
		if len(runs) == 0 {
			t.Fatalf("DETOUR_DIFF_REPLAY names preset %q, which no run uses", replayPreset)
		}
	} else {
		t.Logf("episode seeds drawn from DETOUR_DIFF_SEED=%d", master)
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
			javaOut, version := runJavaScript(t, run.line, s.text())
			javaTime := time.Since(start)
			start = time.Now()
			goOut := runGoScript(t, s)
			t.Logf("%d steps in %d episodes: RocketMQ client %s's classes took %v (one JVM), detour's %v",
				s.actions, len(s.episodes), version, javaTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if replay {
				t.Logf("script:\n%s\nRocketMQ:\n%s\ndetour:\n%s", s.text(), strings.Join(javaOut, "\n"), strings.Join(goOut, "\n"))
			}
			compareDecisions(t, run.preset, s, javaOut, goOut)
		})
	}
}

// script is the text of a run and where its episodes start.
type script struct {
	lines    []string
	episodes []episodeMark
	actions  int // steps other than the set-up of an episode
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

// runJavaScript runs the script through RocketMQ's classes of line in one JVM and returns its
// decisions and the client version.
func runJavaScript(t *testing.T, line rmqtest.Line, text string) ([]string, string) {
	t.Helper()
	dist := rmqtest.Locate(t, line)
	home := t.TempDir()
	argv := append([]string{"-Xmx256m"}, rmqtest.JVMFlags...)
	argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
		"-Drocketmq.client.logLevel=ERROR", "-cp", dist.ClientClassPath, "dev.detour.rmqdriver.FaultScript")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", argv...)
	cmd.Stdin = strings.NewReader(text)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("FaultScript on RocketMQ client %s: %v\nstderr:\n%s", dist.ClientVersion, err, tail(stderr.String(), 4000))
	}
	var out []string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if len(out) == 0 || !strings.HasPrefix(out[len(out)-1], `{"done":true`) {
		t.Fatalf("FaultScript output ends without done: %q\nstderr:\n%s", tail(stdout.String(), 2000), tail(stderr.String(), 4000))
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
// route's selection, on a manual clock that moves as the driver's does.
func runGoScript(t *testing.T, s *script) []string {
	t.Helper()
	var (
		out   []string
		nowMs int64 = javaEpoch
		r     *Runtime
		clk   *fault.ManualClock
		rt    *route
		tol   *fault.Tolerance
	)
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	outcomes := map[string]fault.Outcome{"ok": fault.Success, "client": fault.ClientError,
		"interrupted": fault.Interrupted, "transport": fault.TransportError, "broker": fault.BrokerError}
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
			if r != nil {
				r.Close()
			}
			clk = fault.NewManualClock(time.UnixMilli(nowMs))
			r = New(Options{Clock: clk, ExpiryInterval: time.Hour})
			if err := r.SetPolicy(mustPresetPolicy(t, "", Preset(f[1]))); err != nil {
				t.Fatal(err)
			}
			tol = r.tolerance("")
		case "route":
			spec := Route{Topic: "T"}
			for k, bq := range f[1:] {
				name, q, _ := strings.Cut(bq, ":")
				n, _ := strconv.Atoi(q)
				r.SetBroker(Broker{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", 1+k), Ready: true})
				spec.Brokers = append(spec.Brokers, BrokerQueues{Broker: name, WriteQueues: n})
			}
			if err := r.SetRoute(spec); err != nil {
				t.Fatal(err)
			}
			rt = r.state.Load().index.get("T")
		case "index":
			rt.next.n.Store(uint32(int32(num(1))))
		case "worst":
			tol.SeedPickIndex(int32(num(1)))
		case "attempt":
			tol.Update(f[1], time.Duration(num(2))*time.Millisecond, outcomes[f[3]])
		case "record":
			tol.UpdateFaultItem(f[1], time.Duration(num(2))*time.Millisecond, f[3] == "1", f[4] == "1")
		case "select":
			last := f[1]
			if last == "-" {
				last = ""
			}
			reset := f[2] != "-"
			if reset {
				draw := uint32(num(2))
				rt.next.seed = func() uint32 { return draw }
			}
			q := rt.pick(last, reset)
			out = append(out, fmt.Sprintf(`{"step":%d,"pick":"%s/%d","index":%d}`, step, q.b.name, q.id, int32(rt.next.n.Load())))
		case "advance":
			clk.Advance(time.Duration(num(1)) * time.Millisecond)
			nowMs += num(1)
		case "state":
			var until int64
			it, known := tol.Lookup(f[1])
			if known && !it.Until.IsZero() {
				until = it.Until.UnixMilli()
			}
			out = append(out, fmt.Sprintf(`{"step":%d,"broker":"%s","available":%v,"reachable":%v,"until":%d}`,
				step, f[1], tol.Available(f[1]), tol.Reachable(f[1]), until))
		default:
			t.Fatalf("step %d: unknown command %q", step, line)
		}
	}
	return out
}

// decision is one line of either side's output.
type decision struct {
	Step      int    `json:"step"`
	Pick      string `json:"pick"`
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
	if d.Pick != "" {
		return fmt.Sprintf("pick %s index %d", d.Pick, *d.Index)
	}
	until := int64(0)
	if !*d.Available {
		until = d.Until
	}
	return fmt.Sprintf("%s available %v reachable %v until %d", d.Broker, *d.Available, *d.Reachable, until)
}

func compareDecisions(t *testing.T, p Preset, s *script, javaOut, goOut []string) {
	t.Helper()
	parse := func(side, line string) decision {
		var d decision
		if err := json.Unmarshal([]byte(line), &d); err != nil || (d.Pick == "" && d.Available == nil) {
			t.Fatalf("%s output %q: %v", side, line, err)
		}
		return d
	}
	for i := 0; i < max(len(javaOut), len(goOut)); i++ {
		if i >= len(javaOut) || i >= len(goOut) {
			t.Fatalf("RocketMQ made %d decisions, detour %d", len(javaOut), len(goOut))
		}
		j, g := parse("RocketMQ", javaOut[i]), parse("detour", goOut[i])
		if j.Step != g.Step || j.key() != g.key() {
			ep := s.episodes[0]
			for _, e := range s.episodes {
				if e.first <= j.Step {
					ep = e
				}
			}
			from := max(ep.first, j.Step-12)
			t.Fatalf("step %d (%q) differs:\n  RocketMQ: %s\n  detour:   %s\nepisode seed %d; replay with DETOUR_DIFF_REPLAY=%s:%d\nscript lines %d..%d:\n%s",
				j.Step, s.lines[j.Step-1], j.key(), g.key(), ep.seed, p, ep.seed, from, j.Step,
				strings.Join(s.lines[from-1:j.Step], "\n"))
		}
	}
}
