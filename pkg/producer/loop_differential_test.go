package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/detourmq/detour/pkg/remoting"
)

// The loop differential runs seeded random scripts of whole sync sends through RocketMQ's own
// DefaultMQProducer (client 5.5.0 and 4.9.8, its client classes on a clock the script moves;
// the LoopScript driver in hack/rocketmq) and through Runtime.Send, both over scripted brokers
// that answer, answer slowly, store with a "stored but" status, refuse with each code, reset the
// connection, refuse connections or hang, with budgets that run out. After every send both sides
// must agree on how it ended, the queue of every attempt, the queue index, and every broker's
// availability, reachability and isolation end. Routes may name a broker without an address,
// which RocketMQ 4.x's last resort can pick.
//
// The brokers are scripted the same way on both sides (scriptedWire here, LoopScript's remoting
// client there), at the level of the remoting client: everything above it, from the send call to
// the fault table, is the product's and RocketMQ's own code. Async and oneway sends are not in it:
// RocketMQ retries async sends in callbacks on other threads, whose thread-local indexes no script
// can hold, and a oneway send makes one attempt; the retry-rules differential covers both.
//
// A mismatch names the episode's seed; replay it alone with
//
//	DETOUR_LOOP_DIFF_REPLAY=<preset>:<seed> go test -run TestDifferentialSendLoop ./pkg/producer/
//
// DETOUR_LOOP_DIFF_SEED fixes the seed the episodes' seeds are drawn from (random and logged
// otherwise); DETOUR_LOOP_DIFF_STEPS raises the steps per run, which never go below loopDiffSteps.

// loopDiffSteps is the fewest steps each preset runs against each Java line.
const loopDiffSteps = 10000

// loopRuns are the presets checked and the RocketMQ line each is: Disabled is the 5.x line's
// default (4.9.x does not retry SYSTEM_BUSY).
var loopRuns = []diffRun{
	{PresetRocketMQ5, rmqtest.V5},
	{PresetRocketMQ4, rmqtest.V4},
	{PresetDisabled, rmqtest.V5},
}

// Both drivers run RocketMQ's classes on a clock they rewrite; a class that must run on it but
// has no clock call to rewrite fails the run instead of leaving its time real.
func TestClockRewriteFailsOnAClassWithoutAClock(t *testing.T) {
	for _, driver := range []string{"FaultScript", "LoopScript"} {
		t.Run(driver, func(t *testing.T) {
			dist := rmqtest.Locate(t, rmqtest.V5)
			home := t.TempDir()
			argv := append([]string{"-Xmx256m"}, rmqtest.JVMFlags...)
			argv = append(argv, "-Duser.home="+home, "-Drocketmq.client.logRoot="+filepath.Join(home, "logs"),
				"-Ddetour.clocked=org.apache.rocketmq.client.latency.LatencyFaultTolerance",
				"-cp", dist.ClientClassPath, "dev.detour.rmqdriver."+driver)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "java", argv...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "found no call of System.currentTimeMillis() in org.apache.rocketmq.client.latency.LatencyFaultTolerance") {
				t.Fatalf("%s ran with a clocked class it cannot rewrite: %v\n%s", driver, err, tail(string(out), 2000))
			}
		})
	}
}

func TestDifferentialSendLoopMatchesRocketMQsProducer(t *testing.T) {
	steps, err := minimumSteps("DETOUR_LOOP_DIFF_STEPS", loopDiffSteps)
	if err != nil {
		t.Fatal(err)
	}
	master, err := masterSeed(t, "DETOUR_LOOP_DIFF_SEED")
	if err != nil {
		t.Fatal(err)
	}
	replayPreset, replaySeed, replay := strings.Cut(os.Getenv("DETOUR_LOOP_DIFF_REPLAY"), ":")
	for _, run := range loopRuns {
		if replay && run.preset != Preset(replayPreset) {
			continue
		}
		t.Run(fmt.Sprintf("%s/%s", run.preset, run.line), func(t *testing.T) {
			s := newScript()
			if replay {
				seed, err := strconv.ParseUint(replaySeed, 10, 64)
				if err != nil {
					t.Fatalf("DETOUR_LOOP_DIFF_REPLAY seed %q: %v", replaySeed, err)
				}
				s.loopEpisode(run.preset, seed)
			} else {
				rng := rand.New(rand.NewPCG(master, uint64(len(run.preset))<<8|uint64(run.line[0])))
				for s.actions < steps {
					s.loopEpisode(run.preset, rng.Uint64())
				}
			}
			start := time.Now()
			javaOut, version := runJavaDriver(t, run.line, "LoopScript", s.text())
			javaTime := time.Since(start)
			start = time.Now()
			goOut := runGoLoopScript(t, s, nil)
			t.Logf("%d steps (%d sends: %s) in %d episodes: RocketMQ client %s took %v (one JVM), detour %v",
				s.actions, s.sends, outcomeCounts(javaOut), len(s.episodes), version, javaTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			if replay {
				t.Logf("script:\n%s\nRocketMQ:\n%s\ndetour:\n%s", s.text(), strings.Join(javaOut, "\n"), strings.Join(goOut, "\n"))
			}
			if d := firstDivergence(t, javaOut, goOut); d != nil {
				t.Fatal(d.describe(s, run.preset, "DETOUR_LOOP_DIFF_REPLAY"))
			}
			if run.preset == PresetRocketMQ5 && !replay {
				// The canary: the loop as it was before it followed sendDefaultImpl's order
				// (the budget checked before the selection). The harness must see it.
				old := func(rr retryRules) retryRules { rr.selectBeforeBudget = false; return rr }
				if firstDivergence(t, javaOut, runGoLoopScript(t, s, old)) == nil {
					t.Fatal("canary: a loop that checks the budget before it selects matched RocketMQ on every step; the differential cannot see the order of its steps")
				}
			}
		})
	}
}

// minimumSteps reads the steps a differential runs from env (floor when unset) and refuses fewer
// than floor: a differential that checks nothing must not pass.
func minimumSteps(env string, floor int) (int, error) {
	v := os.Getenv(env)
	if v == "" {
		return floor, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", env, v, err)
	}
	if n < floor {
		return 0, fmt.Errorf("%s=%d: a run checks at least %d steps; fewer would prove too little", env, n, floor)
	}
	return n, nil
}

// masterSeed reads the seed episodes' seeds are drawn from, or draws and logs one.
func masterSeed(t *testing.T, env string) (uint64, error) {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: %v", env, v, err)
		}
		return n, nil
	}
	n := rand.Uint64()
	t.Logf("episode seeds drawn from %s=%d", env, n)
	return n, nil
}

// Scripted broker behaviours: latencies around the tables' thresholds and the budgets, every
// response code a broker refuses a send with, and the "stored but" codes.
var (
	loopLatencies = []int64{0, 1, 49, 50, 99, 100, 549, 550, 999, 1000, 1799, 1800, 1999, 2000, 2999, 3000, 4999, 5000}
	loopRefusals  = []int16{remoting.SystemError, remoting.SystemBusy, remoting.MessageIllegal, remoting.ServiceNotAvailable,
		remoting.NoPermission, remoting.TopicNotExist, remoting.FlowControl, remoting.InvalidParameter, 19, 205, 206}
	loopStored = []int16{remoting.FlushDiskTimeout, remoting.SlaveNotAvailable, remoting.FlushSlaveTimeout}
	loopNames  = []string{"broker-a", "broker-b", "broker-c", "broker-d", "AaAa", "BBBB"}
)

// loopEpisode appends one episode drawn from seed: a producer under p with its budget and
// attempts, a route, the thread index (and 4.x's pickOneAtLeast index), the draws of index
// resets, broker behaviours, and sends among behaviour changes and clock steps.
func (s *script) loopEpisode(p Preset, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x100b))
	s.episodes = append(s.episodes, episodeMark{seed: seed, first: len(s.lines) + 1})
	s.add("begin %s %d %d", p, []int64{300, 1000, 3000, 5000}[rng.IntN(4)], 1+rng.IntN(4))
	names := slices.Clone(loopNames)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	routed := slices.Clone(names[:1+rng.IntN(4)])
	slices.Sort(routed)
	var route strings.Builder
	route.WriteString("route")
	for i, b := range routed {
		fmt.Fprintf(&route, " %s:%d", b, 1+rng.IntN(4))
		if len(routed) > 1 && i == 0 && rng.IntN(3) == 0 {
			route.WriteString(":noaddr")
		}
	}
	s.add("%s", route.String())
	s.add("index %d", drawIndex(rng))
	if p == PresetRocketMQ4 {
		s.add("worst %d", drawIndex(rng))
	}
	s.add("draws %d", rng.Int64())
	for _, b := range routed {
		s.add("fault %s", drawBehaviour(rng, b))
	}
	addressed := slices.Clone(routed)
	if strings.Contains(route.String(), ":noaddr") {
		addressed = addressed[1:]
	}
	for range 60 + rng.IntN(200) {
		s.actions++
		switch k := rng.IntN(100); {
		case k < 2 && len(addressed) > 1:
			// A broker's master leaves the route (its queues stay named): what it learnt stays
			// in the fault table, where RocketMQ 4.x's last resort can find it. A new route
			// brings RocketMQ a new thread index, which the script sets on both sides.
			i := rng.IntN(len(addressed))
			s.add("unaddress %s", addressed[i])
			addressed = slices.Delete(addressed, i, i+1)
			s.add("index %d", drawIndex(rng))
		case k < 45:
			s.add("send")
			s.sends++
		case k < 75:
			s.add("fault %s", drawBehaviour(rng, routed[rng.IntN(len(routed))]))
		default:
			s.add("advance %d", diffAdvances[rng.IntN(len(diffAdvances))])
		}
	}
}

// drawBehaviour draws how broker answers: "<broker> <kind> <code> <latency> <late>".
func drawBehaviour(rng *rand.Rand, broker string) string {
	latency := loopLatencies[rng.IntN(len(loopLatencies))]
	if rng.IntN(4) == 0 {
		latency = rng.Int64N(6000)
	}
	late := []int64{0, 0, 1, 7}[rng.IntN(4)]
	switch k := rng.IntN(100); {
	case k < 40:
		return fmt.Sprintf("%s ok 0 %d %d", broker, latency, late)
	case k < 48:
		return fmt.Sprintf("%s stored %d %d %d", broker, loopStored[rng.IntN(len(loopStored))], latency, late)
	case k < 70:
		return fmt.Sprintf("%s code %d %d %d", broker, loopRefusals[rng.IntN(len(loopRefusals))], latency, late)
	case k < 78:
		return fmt.Sprintf("%s reset 0 %d %d", broker, latency, late)
	case k < 84:
		return fmt.Sprintf("%s refuse 0 0 0", broker)
	}
	return fmt.Sprintf("%s hang 0 0 %d", broker, late)
}

// loopDraw is the k-th value an episode's index resets draw from seed (both sides compute it):
// splitmix64's output, reduced to what Math.abs(random.nextInt(Integer.MAX_VALUE)) can return.
func loopDraw(seed int64, k int64) uint32 {
	z := uint64(seed) + uint64(k+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return uint32((z >> 33) % 0x7fffffff)
}

// loopState is the Go side's state within one episode.
type loopState struct {
	r       *Runtime
	rt      *route
	clk     *fault.ManualClock
	w       *scriptedWire
	brokers []string
}

// runGoLoopScript runs the script through Runtime.Send on a virtual clock over scripted brokers;
// tweak, when set, alters the loop's rules (the canary).
func runGoLoopScript(t *testing.T, s *script, tweak func(retryRules) retryRules) []string {
	t.Helper()
	var (
		out   []string
		st    loopState
		nowMs int64 = javaEpoch
		begin []string
	)
	defer func() {
		if st.r != nil {
			st.r.Close()
		}
	}()
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
			begin = f
		case "route":
			if st.r != nil {
				st.r.Close()
			}
			st = startLoopEpisode(t, begin, f[1:], nowMs, tweak)
		case "index":
			st.rt.next.n.Store(uint32(int32(num(1))))
		case "worst":
			st.r.tolerance("p").SeedPickIndex(int32(num(1)))
		case "draws":
			seed, k := num(1), int64(0)
			st.rt.next.seed = func() uint32 { v := loopDraw(seed, k); k++; return v }
		case "fault":
			code, _ := strconv.ParseInt(f[3], 10, 16)
			st.w.behave[f[1]] = wireBehaviour{kind: f[2], code: int16(code), latency: num(4), late: num(5)}
		case "unaddress":
			st.r.SetBroker(Broker{Name: f[1], Ready: true})
			st.rt = st.r.state.Load().index.get("T")
		case "send":
			out = append(out, st.send(step)...)
		case "advance":
			st.clk.Advance(time.Duration(num(1)) * time.Millisecond)
		default:
			t.Fatalf("step %d: unknown command %q", step, line)
		}
		if st.clk != nil {
			nowMs = st.clk.Now().UnixMilli()
		}
	}
	return out
}

// startLoopEpisode starts the runtime of an episode: begin is "begin <preset> <timeoutMs>
// <attempts>", route the route's brokers.
func startLoopEpisode(t *testing.T, begin, route []string, nowMs int64, tweak func(retryRules) retryRules) loopState {
	t.Helper()
	timeout, _ := strconv.ParseInt(begin[2], 10, 64)
	attempts, _ := strconv.Atoi(begin[3])
	clk := fault.NewManualClock(time.UnixMilli(nowMs))
	w := newScriptedWire(clk)
	r, rt := scriptedRuntime(t, Preset(begin[1]), timeout, attempts, clk, w, route...)
	r.tweakRules = tweak
	st := loopState{r: r, rt: rt, clk: clk, w: w}
	for _, b := range route {
		name, _, _ := strings.Cut(b, ":")
		st.brokers = append(st.brokers, name)
	}
	return st
}

// send makes one send and renders how it ended, its attempts, the index and every broker's state.
func (st *loopState) send(step int) []string {
	res, err := st.r.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")})
	var (
		outcome string
		se      *SendError
		be      *BrokerError
	)
	switch {
	case err == nil:
		outcome = fmt.Sprintf("ok %s %s/%d", res.Status, res.Broker, res.QueueID)
	case errors.As(err, &se) && se.Timeout:
		outcome = "timeout"
	case errors.As(err, &be):
		outcome = fmt.Sprintf("refused %d", be.Code)
	default:
		outcome = "failed"
	}
	out := []string{fmt.Sprintf(`{"step":%d,"send":"%s","tried":"%s","index":%d}`,
		step, outcome, strings.Join(st.w.take(), ","), int32(st.rt.next.n.Load()))}
	tol := st.r.tolerance("p")
	for _, b := range st.brokers {
		var until int64
		if it, known := tol.Lookup(b); known && !it.Until.IsZero() {
			until = it.Until.UnixMilli()
		}
		out = append(out, fmt.Sprintf(`{"step":%d,"broker":"%s","available":%v,"reachable":%v,"until":%d}`,
			step, b, tol.Available(b), tol.Reachable(b), until))
	}
	return out
}

// divergence is the first step where the two sides differ.
type divergence struct {
	step               int
	javaKey, goKey     string
	javaCount, goCount int
}

// firstDivergence compares both sides' outputs decision by decision.
func firstDivergence(t *testing.T, javaOut, goOut []string) *divergence {
	t.Helper()
	parse := func(side, line string) decision {
		var d decision
		if err := json.Unmarshal([]byte(line), &d); err != nil || (d.Pick == "" && d.Send == "" && d.Available == nil) {
			t.Fatalf("%s output %q: %v", side, line, err)
		}
		return d
	}
	for i := 0; i < max(len(javaOut), len(goOut)); i++ {
		if i >= len(javaOut) || i >= len(goOut) {
			return &divergence{javaCount: len(javaOut), goCount: len(goOut)}
		}
		j, g := parse("RocketMQ", javaOut[i]), parse("detour", goOut[i])
		if j.Step != g.Step || j.key() != g.key() {
			return &divergence{step: j.Step, javaKey: j.key(), goKey: g.key()}
		}
	}
	return nil
}

// describe names the divergence's step, episode and replay.
func (d *divergence) describe(s *script, p Preset, replayEnv string) string {
	if d.step == 0 {
		return fmt.Sprintf("RocketMQ made %d decisions, detour %d", d.javaCount, d.goCount)
	}
	ep := s.episodes[0]
	for _, e := range s.episodes {
		if e.first <= d.step {
			ep = e
		}
	}
	from := max(ep.first, d.step-16)
	return fmt.Sprintf("step %d (%q) differs:\n  RocketMQ: %s\n  detour:   %s\nepisode seed %d; replay with %s=%s:%d\nscript lines %d..%d:\n%s",
		d.step, s.lines[d.step-1], d.javaKey, d.goKey, ep.seed, replayEnv, p, ep.seed, from, d.step,
		strings.Join(s.lines[from-1:d.step], "\n"))
}

// outcomeCounts tells how the sends of an output ended, by kind, so a log shows what a run covered.
func outcomeCounts(out []string) string {
	counts := map[string]int{}
	for _, line := range out {
		var d decision
		if json.Unmarshal([]byte(line), &d) == nil && d.Send != "" {
			kind, _, _ := strings.Cut(d.Send, " ")
			if d.Send == "ok SEND_OK" || strings.HasPrefix(d.Send, "ok SEND_OK ") {
				kind = "stored"
			} else if kind == "ok" {
				kind = "stored-but"
			}
			counts[kind]++
		}
	}
	var parts []string
	for _, k := range []string{"stored", "stored-but", "refused", "failed", "timeout"} {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}
