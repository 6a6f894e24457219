package scenario

import (
	"fmt"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

// Broker names of every run. The bad broker sits in the middle of the sorted route so that it is
// neither the first nor the last queue block of a round robin.
const (
	BrokerA   = "broker-a"
	BadBroker = "broker-b"
	BrokerC   = "broker-c"
	Topic     = "FaultBench"
	Queues    = 4
)

// BrokerNames are the three brokers every run sends to, the bad one in the middle.
var BrokerNames = []string{BrokerA, BadBroker, BrokerC}

// ActionKind says what a timeline step does to the bad broker.
type ActionKind int

const (
	// ActFault puts a brokersim fault in force (Fault{} heals).
	ActFault ActionKind = iota
	// ActTerminating marks the bad broker's pod terminating in the runtime (SetBroker).
	ActTerminating
	// The steps below act on a real broker process (realenv.Env).

	// ActPause stops the broker's JVM (SIGSTOP): the kernel still accepts connections, nothing
	// answers. ActResume continues it (SIGCONT).
	ActPause
	ActResume
	// ActStall pauses the broker for StallPause of every StallPeriod until ActResume: a JVM in
	// long garbage-collection pauses.
	ActStall
	// ActKill ends the broker with SIGKILL.
	ActKill
	// ActStop stops it gracefully (it unregisters from the name server); ActRestart starts it
	// again with the same name, port and store and returns once it is registered.
	ActStop
	ActRestart
	// ActPodReady marks the bad broker's pod ready (not terminating) again.
	ActPodReady
	// ActBusy drives the bad broker into flow control until the run ends (see busyLoad).
	ActBusy
	// ActRestartElsewhere starts the stopped broker again with the same name and store on new
	// ports (a pod back at a new IP) and returns once the name server lists its new address.
	ActRestartElsewhere
	// ActHang arms the hang gate in front of the broker: one send request in HangEvery hangs.
	ActHang
	// ActDropTopic deletes the benchmark topic from the broker, which creates no topic on demand:
	// it refuses every send at once (TOPIC_NOT_EXIST) until restore creates the topic again.
	ActDropTopic
	// ActPauseAll stops every broker's JVM (SIGSTOP) together; ActResumeAll continues them.
	ActPauseAll
	ActResumeAll
)

// Action is one step of a scenario's fault schedule, at an offset from the start of the run.
type Action struct {
	At    time.Duration
	Kind  ActionKind
	Fault brokersim.Fault
	// Unregister also removes the broker from the name server, as a Java name server does when a
	// broker's process (and so its connection to the name server) goes away.
	Unregister bool
	Note       string
	// Chained steps are carried out as soon as the previous step is done (a restart after a
	// graceful stop); At is when they would be due at the earliest.
	Chained bool
}

// Window is a span of the run during which the bad broker misbehaves (or is marked).
type Window struct{ From, To time.Duration }

func (w Window) contains(t time.Duration) bool { return t >= w.From && t < w.To }

// Scenario is a fault schedule for the bad broker. Every strategy of a scenario runs against the
// same schedule: it is built from the run duration alone.
type Scenario struct {
	Name        string
	Description string
	Onset       time.Duration
	Actions     []Action
	// Faulty lists the spans in which the bad broker is not fit to take traffic.
	Faulty []Window
	// Heal is when the bad broker becomes healthy again (recovery scenario), 0 if never.
	Heal time.Duration
	// FaultyUntilDone names the step whose completion ends the last faulty span (the rolling
	// restart is faulty until the new broker is registered, which takes as long as it takes).
	FaultyUntilDone string
	// Gate puts the hang gate in front of the bad broker for the scenario's runs (real brokers);
	// it holds one send request in HangEvery.
	Gate      bool
	HangEvery int
	// NoBadBroker: no broker is singled out (every broker is slow at once); there is no bad share
	// and no oracle to compare with.
	NoBadBroker bool
}

// Fractions of the run duration at which things happen, so that a short run keeps the shape of
// the full one. With the default 20 s: onset at 5 s, 10 s of slowness, 3 s flap phases and a 2 s
// termination grace period.
const (
	onsetFrac = 0.25
	slowFrac  = 0.5
	flapFrac  = 0.15
	graceFrac = 0.1
	slowDelay = 800 * time.Millisecond
)

// SimNames are the brokersim scenarios, in report order.
var SimNames = []string{"blackhole", "slow", "dead", "flapping", "recovery", "terminating"}

// BuildScenario returns the named scenario's schedule for a run of duration d.
func BuildScenario(name string, d time.Duration) (Scenario, error) {
	frac := func(f float64) time.Duration { return time.Duration(float64(d) * f).Round(time.Millisecond) }
	onset := frac(onsetFrac)
	sc := Scenario{Name: name, Onset: onset}
	switch name {
	case "blackhole":
		sc.Description = fmt.Sprintf("%s accepts connections but never answers from %v on", BadBroker, onset)
		sc.Actions = []Action{{At: onset, Fault: brokersim.Fault{BlackHole: true}, Note: "black hole"}}
		sc.Faulty = []Window{{onset, d}}
	case "slow":
		sc.Description = fmt.Sprintf("%s answers every request after %v from %v on", BadBroker, slowDelay, onset)
		sc.Actions = []Action{{At: onset, Fault: brokersim.Fault{Delay: slowDelay}, Note: "slow"}}
		sc.Faulty = []Window{{onset, d}}
	case "dead":
		sc.Description = fmt.Sprintf("%s refuses connections from %v on", BadBroker, onset)
		sc.Actions = []Action{{At: onset, Fault: brokersim.Fault{Refuse: true}, Unregister: true, Note: "refuse"}}
		sc.Faulty = []Window{{onset, d}}
	case "flapping":
		phase := frac(flapFrac)
		sc.Description = fmt.Sprintf("%s alternates %v down (black hole) and %v up from %v on", BadBroker, phase, phase, onset)
		down := true
		for t := onset; t < d; t += phase {
			if down {
				sc.Actions = append(sc.Actions, Action{At: t, Fault: brokersim.Fault{BlackHole: true}, Note: "down"})
				sc.Faulty = append(sc.Faulty, Window{t, min(t+phase, d)})
			} else {
				sc.Actions = append(sc.Actions, Action{At: t, Note: "up"})
			}
			down = !down
		}
	case "recovery":
		heal := onset + frac(slowFrac)
		sc.Description = fmt.Sprintf("%s answers after %v from %v to %v, then is healthy", BadBroker, slowDelay, onset, heal)
		sc.Actions = []Action{
			{At: onset, Fault: brokersim.Fault{Delay: slowDelay}, Note: "slow"},
			{At: heal, Note: "healed"},
		}
		sc.Faulty = []Window{{onset, heal}}
		sc.Heal = heal
	case "terminating":
		closeAt := onset + frac(graceFrac)
		sc.Description = fmt.Sprintf("%s's pod is marked terminating at %v; the broker closes (refuses) at %v", BadBroker, onset, closeAt)
		sc.Actions = []Action{
			{At: onset, Kind: ActTerminating, Note: "pod terminating"},
			{At: closeAt, Fault: brokersim.Fault{Refuse: true}, Unregister: true, Note: "closed"},
		}
		sc.Faulty = []Window{{onset, d}}
	default:
		return sc, fmt.Errorf("unknown scenario %q (known: %v)", name, SimNames)
	}
	return sc, nil
}

// FaultyAt reports whether the bad broker is in a faulty span at t.
func (sc *Scenario) FaultyAt(t time.Duration) bool {
	for _, w := range sc.Faulty {
		if w.contains(t) {
			return true
		}
	}
	return false
}

// Stalls of the real slow scenario: the broker's JVM is stopped for StallPause of every
// StallPeriod, so a request waits up to StallPause, like behind a long garbage-collection pause.
// A delaying proxy was the other way to make a real broker slow, but RocketMQ registers its own
// listen port with the name server, so a proxy would need its own broker port and would leave
// the broker itself fast; the stall slows the broker process, which is what a slow broker is.
const (
	StallPause  = 800 * time.Millisecond
	StallPeriod = time.Second
	// restartGrace is how long the pod is marked terminating before the broker is stopped in the
	// rolling restart (Kubernetes' preStop and termination grace), as a fraction of the run.
	rollingGraceFrac = 0.1
)

// RealNames are the real-broker scenarios, in report order.
var RealNames = []string{"blackhole", "slow", "dead", "flapping", "recovery", "rolling", "busy", "readdress", "failfast", "hang",
	"hang-100", "all-slow"}

// DefaultReal are the real-broker scenarios a run without -real-scenarios runs: every one but
// those made for hedging (hang-100, all-slow), which a judged run of the hedging strategies names.
var DefaultReal = RealNames[:len(RealNames)-2]

// BuildRealScenario returns a scenario on real brokers for a run of duration d. The schedules are
// those of BuildScenario, carried out on the broker's JVM.
func BuildRealScenario(name string, d time.Duration) (Scenario, error) {
	frac := func(f float64) time.Duration { return time.Duration(float64(d) * f).Round(time.Millisecond) }
	onset := frac(onsetFrac)
	sc := Scenario{Name: name, Onset: onset}
	switch name {
	case "blackhole":
		sc.Description = fmt.Sprintf("%s's JVM is stopped (SIGSTOP) from %v on: the kernel still accepts connections, nothing answers", BadBroker, onset)
		sc.Actions = []Action{{At: onset, Kind: ActPause, Note: "SIGSTOP"}}
		sc.Faulty = []Window{{onset, d}}
	case "slow":
		sc.Description = fmt.Sprintf("%s's JVM is stopped for %v of every %v from %v on (long GC-like stalls)", BadBroker, StallPause, StallPeriod, onset)
		sc.Actions = []Action{{At: onset, Kind: ActStall, Note: "stalls"}}
		sc.Faulty = []Window{{onset, d}}
	case "dead":
		sc.Description = fmt.Sprintf("%s is killed (SIGKILL) at %v: connections reset, its port refuses, the name server drops it", BadBroker, onset)
		sc.Actions = []Action{{At: onset, Kind: ActKill, Note: "SIGKILL"}}
		sc.Faulty = []Window{{onset, d}}
	case "flapping":
		phase := frac(flapFrac)
		sc.Description = fmt.Sprintf("%s alternates %v stopped (SIGSTOP) and %v running from %v on", BadBroker, phase, phase, onset)
		down := true
		for t := onset; t < d; t += phase {
			if down {
				sc.Actions = append(sc.Actions, Action{At: t, Kind: ActPause, Note: "down"})
				sc.Faulty = append(sc.Faulty, Window{t, min(t+phase, d)})
			} else {
				sc.Actions = append(sc.Actions, Action{At: t, Kind: ActResume, Note: "up"})
			}
			down = !down
		}
	case "recovery":
		heal := onset + frac(slowFrac)
		sc.Description = fmt.Sprintf("%s stalls %v of every %v from %v to %v, then runs normally", BadBroker, StallPause, StallPeriod, onset, heal)
		sc.Actions = []Action{
			{At: onset, Kind: ActStall, Note: "stalls"},
			{At: heal, Kind: ActResume, Note: "healed"},
		}
		sc.Faulty = []Window{{onset, heal}}
		sc.Heal = heal
	case "busy":
		sc.Description = fmt.Sprintf("%s is driven into flow control from %v on: updateBrokerConfig lowers its "+
			"waitTimeMillsInSendQueue from 200 ms to %s and %d senders of its own load it directly (each sending again as soon as answered), so the sends "+
			"waiting in its send queue are refused as `[TIMEOUT_CLEAN_QUEUE] broker busy` (SYSTEM_BUSY) by the "+
			"broker's fast-failure sweep every 10 ms", BadBroker, onset, BusyWaitMillis+" ms", BusyLoadSenders)
		sc.Actions = []Action{{At: onset, Kind: ActBusy, Note: "flow control"}}
		sc.Faulty = []Window{{onset, d}}
	case "rolling":
		stopAt := onset + frac(rollingGraceFrac)
		sc.Description = fmt.Sprintf("rolling restart of %s: its pod is marked terminating at %v, the broker is stopped gracefully at %v "+
			"(it unregisters), a new broker starts at once under the same name, port and store, and its pod is marked ready "+
			"once it is registered", BadBroker, onset, stopAt)
		rollingRestart(&sc, onset, stopAt, d, ActRestart)
	case "readdress":
		stopAt := onset + frac(rollingGraceFrac)
		sc.Description = fmt.Sprintf("rolling restart of %s to a new address: its pod is marked terminating at %v, the broker is "+
			"stopped gracefully at %v (it unregisters), a new broker starts at once under the same name and store on new ports "+
			"(a pod back at a new IP: nothing answers at the old address), and its pod is marked ready at the new address once "+
			"it is registered", BadBroker, onset, stopAt)
		rollingRestart(&sc, onset, stopAt, d, ActRestartElsewhere)
	case "hang", "hang-100":
		hang(&sc, map[string]int{"hang": HangEvery, "hang-100": HangEveryRare}[name], d)
	case "all-slow":
		allSlow(&sc, frac(0.5))
	case "failfast":
		sc.Description = fmt.Sprintf("%s fails fast from %v on: the benchmark topic is deleted from it (DELETE_TOPIC_IN_BROKER; "+
			"it creates no topic on demand), so it refuses every send at once with TOPIC_NOT_EXIST while it answers everything "+
			"else, and the name server keeps publishing its queues until its next registration (30 s). A broker's write "+
			"permission would not do: a 5.x broker withdrawn of it still stores every send to a topic that is not ordered "+
			"and only publishes its queues read-only", BadBroker, onset)
		sc.Actions = []Action{{At: onset, Kind: ActDropTopic, Note: "topic deleted"}}
		sc.Faulty = []Window{{onset, d}}
	default:
		return sc, fmt.Errorf("unknown real-broker scenario %q (known: %v)", name, RealNames)
	}
	return sc, nil
}

// hang gives sc a hang scenario's schedule for a run of duration d: from the onset, the gate in
// front of the bad broker holds one send request in every.
func hang(sc *Scenario, every int, d time.Duration) {
	sc.HangEvery, sc.Gate = every, true
	sc.Description = fmt.Sprintf("one attempt in %d on %s hangs from %v on: a relay in front of the broker holds every "+
		"%dth send request %v before the broker sees it, and passes everything else at once", every, BadBroker, sc.Onset,
		every, HangFor)
	sc.Actions = []Action{{At: sc.Onset, Kind: ActHang, Note: fmt.Sprintf("one send in %d hangs", every)}}
	sc.Faulty = []Window{{sc.Onset, d}}
}

// allSlow gives sc the all-slow schedule: at 'at' every broker's JVM is stopped together for one
// stall of the slow scenario (StallPause; the slow scenario stalls StallPause of every StallPeriod),
// so for that second every attempt anywhere waits. No broker is the bad one: a hedge finds every
// other broker as slow, and only the budget keeps hedging from doubling the load.
func allSlow(sc *Scenario, at time.Duration) {
	sc.Onset = at
	sc.NoBadBroker = true
	sc.Description = fmt.Sprintf("every broker's JVM is stopped (SIGSTOP) together at %v for %v (one stall of the slow "+
		"scenario), then continued: for that second every broker is slow; no broker is the bad one, there is no oracle, "+
		"and only success and extra sends are judged", at, StallPause)
	sc.Actions = []Action{
		{At: at, Kind: ActPauseAll, Note: "every broker stopped"},
		{At: at + StallPause, Kind: ActResumeAll, Note: "every broker continued"},
	}
}

// rollingRestart gives sc a rolling restart's schedule for a run of duration d: the pod marked
// terminating at onset, a graceful stop at stopAt, then at once the new broker (started by
// restart: on the same ports, or elsewhere) and its pod ready. The broker is faulty until the
// restart is done, which SettleFaulty fixes up from the applied times after each run.
func rollingRestart(sc *Scenario, onset, stopAt, d time.Duration, restart ActionKind) {
	sc.Actions = []Action{
		{At: onset, Kind: ActTerminating, Note: "pod terminating"},
		{At: stopAt, Kind: ActStop, Note: "graceful stop"},
		{At: stopAt, Kind: restart, Note: "new broker registered", Chained: true},
		{At: stopAt, Kind: ActPodReady, Note: "pod ready", Chained: true},
	}
	sc.Faulty = []Window{{onset, d}}
	sc.FaultyUntilDone = "new broker registered"
}

// SettleFaulty moves the scenario's faulty spans to when their steps were actually carried out
// (a step applied late on a busy machine must not count sends before it as sent while faulty),
// and ends the last span at the completion of the step that ends it, when the scenario says so.
func (d *RunData) SettleFaulty() {
	sc := &d.Scenario
	if len(sc.Faulty) == 0 || len(d.Applied) == 0 {
		return
	}
	applied := map[time.Duration]time.Duration{}
	for _, a := range d.Applied {
		if _, ok := applied[a.Scheduled]; !ok && !a.Chained {
			applied[a.Scheduled] = a.Applied
		}
	}
	ws := append([]Window(nil), sc.Faulty...)
	for i := range ws {
		if t, ok := applied[ws[i].From]; ok {
			ws[i].From = t
		}
		if t, ok := applied[ws[i].To]; ok {
			ws[i].To = t
		}
	}
	if sc.FaultyUntilDone != "" {
		for _, a := range d.Applied {
			if a.Note == sc.FaultyUntilDone {
				ws[len(ws)-1].To = min(a.Done, d.Params.Duration)
				break
			}
		}
	}
	sc.Faulty = ws
}
