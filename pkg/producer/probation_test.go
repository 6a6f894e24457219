package producer

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// isolationEvents returns the isolation changes of one broker the runtime has reported so far.
func (m *recordingMetrics) isolationEvents(broker string) []IsolationEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []IsolationEvent
	for _, ev := range m.isolation {
		if ev.Broker == broker {
			out = append(out, ev)
		}
	}
	return out
}

// readmissions counts the times a broker left isolation.
func readmissions(evs []IsolationEvent) int {
	n := 0
	for _, ev := range evs {
		if !ev.Isolated {
			n++
		}
	}
	return n
}

// TestWatchFindsAPausingBrokerBySlowAnswers proves that a watched broker that answers, but
// slower than the table's first threshold (700 ms against RocketMQ 5's 550 ms), is isolated by
// its probes alone with reason SlowProbe, with no send at all. Before probes measured, only
// silence counted and such a broker stayed in.
func TestWatchFindsAPausingBrokerBySlowAnswers(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
		watchPolicy(true)(p)
		p.Probe.Interval = 300 * time.Millisecond
		p.Retry.PerAttemptTimeout = 2 * time.Second // the answer comes within an attempt's time
	}))
	c.brokers["broker-b"].SetFault(brokersim.Fault{Delay: 700 * time.Millisecond})
	waitFor(t, "broker-b isolated", func() bool { return len(c.rec.isolationEvents("broker-b")) > 0 })
	first := c.rec.isolationEvents("broker-b")[0]
	if !first.Isolated || first.Item.Reason != fault.ReasonSlowProbe {
		t.Fatalf("first change of broker-b %+v, want isolated with reason SlowProbe", first)
	}
	if sent := c.rec.snapshotAttempts(); len(sent) != 0 {
		t.Fatalf("%d send attempts, want none: the probes alone found the broker", len(sent))
	}
	for _, b := range []string{"broker-a", "broker-c"} {
		if evs := c.rec.isolationEvents(b); len(evs) != 0 {
			t.Errorf("healthy %s changed: %+v", b, evs)
		}
	}
}

// TestProbationKeepsAFlappingBrokerOut proves that a broker that is up for 60 ms of every
// 360 ms, too short for three probe rounds (100-300 ms apart), is never readmitted with a
// probation of three good probes (its first isolation is for silence, so it is on probation
// from the start), where with one good probe it comes back in its up phases again and again.
// Growth is off, so probation alone keeps it out.
func TestProbationKeepsAFlappingBrokerOut(t *testing.T) {
	cases := []struct {
		name      string
		probation int
		atMost    int // readmissions while it flaps; -1: at least 2
	}{
		{"one good probe", 1, -1},
		{"probation of three", 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
				watchPolicy(true)(p)
				p.Probe.Interval = 200 * time.Millisecond
				p.Retry.PerAttemptTimeout = 100 * time.Millisecond
				p.GrowOnRepeat = false
				p.Probe.ProbationProbes = tc.probation
			}))
			bad := c.brokers["broker-b"]
			bad.SetFault(brokersim.Fault{FlapUp: 60 * time.Millisecond, FlapDown: 300 * time.Millisecond})
			waitFor(t, "broker-b isolated", func() bool { return len(c.rec.isolationEvents("broker-b")) > 0 })
			start := bad.FlapTransitions()
			waitFor(t, "twenty flaps", func() bool {
				if tc.atMost < 0 && readmissions(c.rec.isolationEvents("broker-b")) >= 2 {
					return true // the control has shown what it shows
				}
				return bad.FlapTransitions()-start >= 20
			})
			got := readmissions(c.rec.isolationEvents("broker-b"))
			if tc.atMost < 0 && got < 2 {
				t.Fatalf("readmitted %d times over twenty flaps with one good probe; the control must come back in its up phases", got)
			}
			if tc.atMost >= 0 && got > tc.atMost {
				t.Fatalf("readmitted %d times over twenty flaps, want at most %d", got, tc.atMost)
			}
		})
	}
}

// TestASuspectProbeBringsTheNextOneForward proves a suspect broker is probed again before the
// next round: follow-ups probe only the suspects, so while a suspect broker gets twelve more
// probes a healthy one, probed only by full rounds, gets at most eight (about three, with
// follow-ups a quarter of an interval apart). Without follow-ups every probe of the suspect
// comes with one of the healthy broker in the same round. A broker is a suspect when its probe
// went unanswered, and also when it was answered late but under every isolating threshold (as a
// probe sent late in a stall is answered when the stall ends): the table here tells 100 ms apart
// from a healthy answer and isolates from 550 ms, and the broker answers in 150 ms.
func TestASuspectProbeBringsTheNextOneForward(t *testing.T) {
	table, err := fault.NewTable([]fault.Rule{{LatencyMillis: 100}, {LatencyMillis: 550, IsolationMillis: 2000}}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		fault   brokersim.Fault
		attempt time.Duration // how long a watched broker may take to answer
	}{
		{"silent", brokersim.Fault{BlackHole: true}, 100 * time.Millisecond},
		{"answered late under every isolating threshold", brokersim.Fault{Delay: 150 * time.Millisecond}, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
				watchPolicy(true)(p)
				p.Table = table
				p.Probe.Interval = 400 * time.Millisecond
				p.Retry.PerAttemptTimeout = tc.attempt
			}))
			bad, good := c.brokers["broker-b"], c.brokers["broker-a"]
			probes := func(b *brokersim.Broker) int64 { return b.Stats().RequestsByCode[remoting.GetMaxOffset] }
			bad.SetFault(tc.fault)
			bad0 := probes(bad)
			waitFor(t, "broker-b probed under its fault", func() bool { return probes(bad)-bad0 >= 2 })
			bad0, good0 := probes(bad), probes(good)
			waitFor(t, "twelve more probes of broker-b", func() bool { return probes(bad)-bad0 >= 12 })
			if n := probes(good) - good0; n > 8 {
				t.Fatalf("broker-a was probed %d times while broker-b was probed 12 times: no follow-ups", n)
			}
		})
	}
}

// TestDetourSendsAroundABusyBroker proves that under the Detour preset a broker refusing sends
// as busy (brokersim answers SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]" as a broker in flow control
// does, and serves probes) costs no send, even with no retry code configured, and stays out with
// reason BrokerBusy while its probes succeed, where a good probe used to readmit it at once.
func TestDetourSendsAroundABusyBroker(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
		watchPolicy(false)(p)
		p.Retry.RetryOnCodes = []int16{} // busy refusals are retried whatever the codes say
	}))
	busy := c.brokers["broker-b"]
	busy.SetFault(brokersim.Fault{Busy: true})
	for i := range 30 {
		if _, err := c.send(t, "m"+strconv.Itoa(i)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if busy.Stats().MessagesStored != 0 {
		t.Fatal("the busy broker stored a message")
	}
	probes := func() int64 { return busy.Stats().RequestsByCode[remoting.GetMaxOffset] }
	p0 := probes()
	waitFor(t, "three probes of the busy broker", func() bool { return probes()-p0 >= 3 })
	items := c.r.Isolated("test")
	if len(items) != 1 || items[0].Broker != "broker-b" || items[0].Reason != fault.ReasonBrokerBusy || !items[0].Reachable {
		t.Fatalf("isolated %+v after good probes, want broker-b alone, BrokerBusy, reachable", items)
	}
}

// TestPressureShiftsSendsBeforeTheBrokerRefuses proves that under the Detour preset a broker
// whose runtime table shows its send queue's head waiting 150 ms (brokersim answers
// GET_BROKER_RUNTIME_INFO under a Java broker's keys) is held out as BrokerPressure before it
// refuses anything, so the sends that follow go elsewhere, that Pressure shows its figures, and
// that it returns once its figures are calm. With the polling off, the same runtime's probe
// rounds pass it by and sends keep reaching it.
func TestPressureShiftsSendsBeforeTheBrokerRefuses(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(map[bool]string{true: "polling", false: "no polling"}[enabled], func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
				watchPolicy(true)(p)
				p.Probe.Interval = 100 * time.Millisecond
				p.Pressure.Enabled = enabled
			}))
			pressed := c.brokers["broker-b"]
			pressed.SetFault(brokersim.Fault{Pressure: &remoting.BrokerPressure{SendQueueSize: 40, SendQueueCapacity: 10000,
				SendQueueHeadWaitMillis: 150, PutLatency99Millis: 1.5}})
			sendMany := func() int64 {
				before := pressed.Stats().MessagesStored
				for i := range 30 {
					if _, err := c.send(t, "m"+strconv.Itoa(i)); err != nil {
						t.Fatal(err)
					}
				}
				return pressed.Stats().MessagesStored - before
			}
			if !enabled {
				probes := func() int64 { return pressed.Stats().RequestsByCode[remoting.GetMaxOffset] }
				waitFor(t, "five probe rounds", func() bool { return probes() >= 5 })
				if n := pressed.Stats().RequestsByCode[remoting.GetBrokerRuntimeInfo]; n != 0 {
					t.Fatalf("%d runtime-info requests with the polling off", n)
				}
				if items := c.r.Isolated("test"); len(items) != 0 || sendMany() == 0 {
					t.Fatalf("held out %+v, or nothing stored on broker-b, with the polling off", items)
				}
				return
			}
			waitFor(t, "broker-b held out for pressure", func() bool {
				items := c.r.Isolated("test")
				return len(items) == 1 && items[0].Broker == "broker-b" && items[0].Reason == fault.ReasonBrokerPressure
			})
			// The figures that put broker-b out are there as soon as it is out; the calm brokers'
			// come with the end of the poll.
			if figs := c.r.Pressure("test"); !slices.ContainsFunc(figs, func(f BrokerPressure) bool {
				return f.Broker == "broker-b" && f.Pressed && f.SendQueueHeadWaitMillis == 150
			}) {
				t.Fatalf("figures %+v while broker-b is held out, want broker-b pressed with a 150 ms head wait", figs)
			}
			waitFor(t, "figures of the three brokers", func() bool { return len(c.r.Pressure("test")) == 3 })
			if figs := c.r.Pressure("test"); figs[1].Broker != "broker-b" || !figs[1].Pressed || figs[0].Pressed || figs[2].Pressed {
				t.Fatalf("figures %+v, want broker-b alone pressed", figs)
			}
			if n := sendMany(); n != 0 {
				t.Fatalf("broker-b stored %d messages while held out for pressure", n)
			}
			pressed.SetFault(brokersim.Fault{})
			waitFor(t, "broker-b back once calm", func() bool { return len(c.r.Isolated("test")) == 0 })
		})
	}
}
