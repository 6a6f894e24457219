package main

import (
	"fmt"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

// Broker names of every run. The bad broker sits in the middle of the sorted route so that it is
// neither the first nor the last queue block of a round robin.
const (
	brokerA   = "broker-a"
	badBroker = "broker-b"
	brokerC   = "broker-c"
	topic     = "FaultBench"
	queues    = 4
)

var brokerNames = []string{brokerA, badBroker, brokerC}

// actionKind says what a timeline step does to the bad broker.
type actionKind int

const (
	// actFault puts a brokersim fault in force (Fault{} heals).
	actFault actionKind = iota
	// actTerminating marks the bad broker's pod terminating in the runtime (SetBroker).
	actTerminating
)

// action is one step of a scenario's fault schedule, at an offset from the start of the run.
type action struct {
	At    time.Duration
	Kind  actionKind
	Fault brokersim.Fault
	// Unregister also removes the broker from the name server, as a Java name server does when a
	// broker's process (and so its connection to the name server) goes away.
	Unregister bool
	Note       string
}

// window is a span of the run during which the bad broker misbehaves (or is marked).
type window struct{ From, To time.Duration }

func (w window) contains(t time.Duration) bool { return t >= w.From && t < w.To }

// scenario is a fault schedule for the bad broker. Every strategy of a scenario runs against the
// same schedule: it is built from the run duration alone.
type scenario struct {
	Name        string
	Description string
	Onset       time.Duration
	Actions     []action
	// Faulty lists the spans in which the bad broker is not fit to take traffic.
	Faulty []window
	// Heal is when the bad broker becomes healthy again (recovery scenario), 0 if never.
	Heal time.Duration
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

var scenarioNames = []string{"blackhole", "slow", "dead", "flapping", "recovery", "terminating"}

// buildScenario returns the named scenario's schedule for a run of duration d.
func buildScenario(name string, d time.Duration) (scenario, error) {
	frac := func(f float64) time.Duration { return time.Duration(float64(d) * f).Round(time.Millisecond) }
	onset := frac(onsetFrac)
	sc := scenario{Name: name, Onset: onset}
	switch name {
	case "blackhole":
		sc.Description = fmt.Sprintf("%s accepts connections but never answers from %v on", badBroker, onset)
		sc.Actions = []action{{At: onset, Fault: brokersim.Fault{BlackHole: true}, Note: "black hole"}}
		sc.Faulty = []window{{onset, d}}
	case "slow":
		sc.Description = fmt.Sprintf("%s answers every request after %v from %v on", badBroker, slowDelay, onset)
		sc.Actions = []action{{At: onset, Fault: brokersim.Fault{Delay: slowDelay}, Note: "slow"}}
		sc.Faulty = []window{{onset, d}}
	case "dead":
		sc.Description = fmt.Sprintf("%s refuses connections from %v on", badBroker, onset)
		sc.Actions = []action{{At: onset, Fault: brokersim.Fault{Refuse: true}, Unregister: true, Note: "refuse"}}
		sc.Faulty = []window{{onset, d}}
	case "flapping":
		phase := frac(flapFrac)
		sc.Description = fmt.Sprintf("%s alternates %v down (black hole) and %v up from %v on", badBroker, phase, phase, onset)
		down := true
		for t := onset; t < d; t += phase {
			if down {
				sc.Actions = append(sc.Actions, action{At: t, Fault: brokersim.Fault{BlackHole: true}, Note: "down"})
				sc.Faulty = append(sc.Faulty, window{t, min(t+phase, d)})
			} else {
				sc.Actions = append(sc.Actions, action{At: t, Note: "up"})
			}
			down = !down
		}
	case "recovery":
		heal := onset + frac(slowFrac)
		sc.Description = fmt.Sprintf("%s answers after %v from %v to %v, then is healthy", badBroker, slowDelay, onset, heal)
		sc.Actions = []action{
			{At: onset, Fault: brokersim.Fault{Delay: slowDelay}, Note: "slow"},
			{At: heal, Note: "healed"},
		}
		sc.Faulty = []window{{onset, heal}}
		sc.Heal = heal
	case "terminating":
		closeAt := onset + frac(graceFrac)
		sc.Description = fmt.Sprintf("%s's pod is marked terminating at %v; the broker closes (refuses) at %v", badBroker, onset, closeAt)
		sc.Actions = []action{
			{At: onset, Kind: actTerminating, Note: "pod terminating"},
			{At: closeAt, Fault: brokersim.Fault{Refuse: true}, Unregister: true, Note: "closed"},
		}
		sc.Faulty = []window{{onset, d}}
	default:
		return sc, fmt.Errorf("unknown scenario %q (known: %v)", name, scenarioNames)
	}
	return sc, nil
}

// faultyAt reports whether the bad broker is in a faulty span at t.
func (sc *scenario) faultyAt(t time.Duration) bool {
	for _, w := range sc.Faulty {
		if w.contains(t) {
			return true
		}
	}
	return false
}
