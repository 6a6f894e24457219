package producer

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestPressureThresholdsTightenToHalfTheBrokersOwnLimit proves the Detour thresholds (100 ms of
// head wait, 500 ms of page-cache lock) are tightened to half of a broker's own limit when that is
// sooner, never loosened by a larger one, and that a limit of 0 counts any wait, yet leaves a
// quiet broker unpressed; an unknown limit leaves the policy's thresholds alone.
func TestPressureThresholdsTightenToHalfTheBrokersOwnLimit(t *testing.T) {
	pol, err := PresetPolicy("p", PresetDetour)
	if err != nil {
		t.Fatal(err)
	}
	quiet := remoting.BrokerPressure{SendQueueCapacity: 10000, PutLatency99Millis: 0.5}
	with := func(f func(*remoting.BrokerPressure)) remoting.BrokerPressure {
		p := quiet
		f(&p)
		return p
	}
	limits := func(wait, lock int64) remoting.BrokerLimits {
		return remoting.BrokerLimits{SendQueueWaitMillis: wait, PageCacheBusyMillis: lock}
	}
	cases := []struct {
		name   string
		p      remoting.BrokerPressure
		l      remoting.BrokerLimits
		policy func(*PressurePolicy)
		want   bool
	}{
		{"a quiet broker with limits of 0", quiet, limits(0, 0), nil, false},
		{"a queued send with a wait limit of 0", with(func(p *remoting.BrokerPressure) { p.SendQueueSize = 1 }), limits(0, 1000), nil, true},
		{"a 1 ms head wait with a wait limit of 0", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 1 }), limits(0, 1000), nil, true},
		{"a 1 ms lock with a page-cache limit of 0", with(func(p *remoting.BrokerPressure) { p.PageCacheLockMillis = 1 }), limits(200, 0), nil, true},
		{"a 10 ms head wait, halfway to a 20 ms limit", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 10 }), limits(20, 1000), nil, true},
		{"a 9 ms head wait, short of halfway to a 20 ms limit", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 9 }), limits(20, 1000), nil, false},
		{"a 12 ms head wait under the default limits", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 12 }), limits(200, 1000), nil, false},
		{"a 150 ms head wait with unknown limits", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 150 }), unknownLimits, nil, true},
		{"a 150 ms head wait with a limit of an hour: the policy's is sooner", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 150 }), limits(3600000, 1000), nil, true},
		{"a 150 ms head wait with a limit near the int64 bound", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 150 }), limits(1<<63-1, 1<<63-1), nil, true},
		{"a 5 ms head wait with a limit near the int64 bound", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 5 }), limits(1<<63-1, 1<<63-1), nil, false},
		{"a 300 ms lock, halfway to a 600 ms limit", with(func(p *remoting.BrokerPressure) { p.PageCacheLockMillis = 300 }), limits(200, 600), nil, true},
		{"a head wait the policy does not judge, limit 0", with(func(p *remoting.BrokerPressure) { p.SendQueueHeadWaitMillis = 50; p.SendQueueSize = 3 }), limits(0, 1000),
			func(pp *PressurePolicy) { pp.SendQueueHeadWait = 0 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pp := pol.Pressure
			if tc.policy != nil {
				tc.policy(&pp)
			}
			if got := pp.pressed(tc.p, tc.l); got != tc.want {
				t.Fatalf("pressed(%+v, %v) = %v, want %v", tc.p, tc.l, got, tc.want)
			}
		})
	}
}

// pressureOf returns broker's figures from the runtime's last poll, if any.
func pressureOf(r *Runtime, policy, broker string) (BrokerPressure, bool) {
	for _, f := range r.Pressure(policy) {
		if f.Broker == broker {
			return f, true
		}
	}
	return BrokerPressure{}, false
}

// TestPressureLearnsEachBrokersOwnLimits proves the poll reads every routed broker's busy limits
// (GET_BROKER_CONFIG, brokersim answering as a Java broker does) and shows them with the figures;
// that a broker whose send queue's head waits 12 ms is left alone under RocketMQ's default 200 ms
// limit but held out as BrokerPressure once its limit is lowered to 20 ms at run time (as
// updateBrokerConfig does); and that a quiet broker whose limit is 0 is not pressed.
func TestPressureLearnsEachBrokersOwnLimits(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
		watchPolicy(true)(p)
		p.Probe.Interval = 50 * time.Millisecond
		p.Pressure.Enabled = true
	}))
	zero := remoting.BrokerLimits{SendQueueWaitMillis: 0, PageCacheBusyMillis: 0}
	c.brokers["broker-a"].SetLimits(zero)
	waiting := c.brokers["broker-b"]
	waiting.SetFault(brokersim.Fault{Pressure: &remoting.BrokerPressure{SendQueueSize: 2, SendQueueCapacity: 10000, SendQueueHeadWaitMillis: 12}})
	polls := func() int64 { return waiting.Stats().RequestsByCode[remoting.GetBrokerRuntimeInfo] }
	waitFor(t, "the limits of every broker", func() bool {
		a, okA := pressureOf(c.r, "test", "broker-a")
		b, okB := pressureOf(c.r, "test", "broker-b")
		return okA && okB && a.Limits == zero && b.Limits.SendQueueWaitMillis == 200 && polls() >= 5
	})
	if items := c.r.Isolated("test"); len(items) != 0 {
		t.Fatalf("held out %+v: a quiet broker with limit 0 and a 12 ms wait under a 200 ms limit press nothing", items)
	}
	if a, _ := pressureOf(c.r, "test", "broker-a"); a.Pressed {
		t.Fatalf("quiet broker-a pressed: %+v", a)
	}

	lowered := remoting.BrokerLimits{SendQueueWaitMillis: 20, PageCacheBusyMillis: 1000}
	waiting.SetLimits(lowered)
	waitFor(t, "broker-b held out for pressure under its lowered limit", func() bool {
		items := c.r.Isolated("test")
		return len(items) == 1 && items[0].Broker == "broker-b" && items[0].Reason == fault.ReasonBrokerPressure
	})
	if b, ok := pressureOf(c.r, "test", "broker-b"); !ok || !b.Pressed || b.Limits != lowered {
		t.Fatalf("figures %+v, want broker-b pressed with its lowered limits %v", b, lowered)
	}
}

// configHostileBroker answers GET_MAX_OFFSET as a healthy broker, GET_BROKER_RUNTIME_INFO with a
// table whose head wait the test sets, and GET_BROKER_CONFIG as config says: an answer, or none
// (answer nil). Each request is answered on its own goroutine, so an unanswered one holds up no
// other.
type configHostileBroker struct {
	ln       net.Listener
	headWait atomic.Int64
	asked    atomic.Int64 // runtime-info requests
	silent   atomic.Bool  // leave runtime-info requests unanswered
	config   func(resp *remoting.Command) bool
}

func startConfigHostileBroker(t *testing.T, config func(resp *remoting.Command) bool) *configHostileBroker {
	t.Helper()
	h := &configHostileBroker{config: config}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.ln = ln
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go h.serve(nc)
		}
	}()
	return h
}

func (h *configHostileBroker) serve(nc net.Conn) {
	defer nc.Close()
	var wmu sync.Mutex
	fr := remoting.NewFrameReader(bufio.NewReader(nc), 4096, 1<<20)
	for {
		req, err := fr.ReadCommand()
		if err != nil {
			return
		}
		go func() {
			resp := remoting.NewResponse(req, remoting.Success, "")
			switch req.Code {
			case remoting.GetMaxOffset:
				resp.ExtFields = map[string]string{"offset": "0"}
			case remoting.GetBrokerRuntimeInfo:
				resp.Body = fmt.Appendf(nil, `{"table":{"sendThreadPoolQueueSize":"1","sendThreadPoolQueueCapacity":"10000",`+
					`"sendThreadPoolQueueHeadWaitTimeMills":"%d","pageCacheLockTimeMills":"0","putLatency99":"0.00"}}`, h.headWait.Load())
				h.asked.Add(1)
				if h.silent.Load() {
					return
				}
			case remoting.GetBrokerConfig:
				if !h.config(resp) {
					return
				}
			}
			frame, err := remoting.Encode(resp)
			if err != nil {
				return
			}
			wmu.Lock()
			defer wmu.Unlock()
			_, _ = nc.Write(frame)
		}()
	}
}

// TestHostileBrokerConfigsLeaveThePolicysThresholds proves a broker that answers GET_BROKER_CONFIG
// with a body or a configuration beyond the bounds, garbage, limits that do not parse or that
// overflow, a refusal, or nothing at all, neither stops the poll nor changes what presses it:
// its limits stay unknown (or as large as it says), the policy's own 100 ms head-wait threshold
// applies, so a 5 ms wait holds nothing out and a 150 ms one holds the broker out.
func TestHostileBrokerConfigsLeaveThePolicysThresholds(t *testing.T) {
	body := func(s string) func(*remoting.Command) bool {
		return func(resp *remoting.Command) bool { resp.Body = []byte(s); return true }
	}
	var many strings.Builder
	for i := range remoting.MaxBrokerConfigEntries + 1 {
		fmt.Fprintf(&many, "k%d=%d\n", i, i)
	}
	cases := []struct {
		name   string
		config func(*remoting.Command) bool
	}{
		{"a body over 256 KiB", body("waitTimeMillsInSendQueue=0\n" + strings.Repeat("x", remoting.MaxBrokerConfigBody))},
		{"more entries than the bound", body("waitTimeMillsInSendQueue=0\n" + many.String())},
		{"garbage", body("\x00\xff{\"table\":[1,2]}\n==\n")},
		{"limits that do not parse", body("waitTimeMillsInSendQueue=soon\nosPageCacheBusyTimeOutMills=1e3\n")},
		{"limits that overflow", body("waitTimeMillsInSendQueue=9223372036854775807\nosPageCacheBusyTimeOutMills=99999999999999999999\n")},
		{"a refusal", func(resp *remoting.Command) bool { resp.Code = remoting.SystemError; resp.Remark = "no"; return true }},
		{"no answer", func(*remoting.Command) bool { return false }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hostile := startConfigHostileBroker(t, tc.config)
			hostile.headWait.Store(5)
			c := startCluster(t, 2, []string{"broker-a", "broker-c"}, withPolicy(func(p *Policy) {
				watchPolicy(true)(p)
				p.Probe.Interval = 50 * time.Millisecond
				p.Pressure.Enabled = true
			}))
			routeBesideHostile(t, c, hostile.ln.Addr().String())
			waitFor(t, "five polls of the hostile broker", func() bool {
				_, ok := pressureOf(c.r, "test", "broker-h")
				return ok && hostile.asked.Load() >= 5
			})
			if items := c.r.Isolated("test"); len(items) != 0 {
				t.Fatalf("held out %+v for a 5 ms wait", items)
			}
			h, _ := pressureOf(c.r, "test", "broker-h")
			if h.Limits.SendQueueWaitMillis == 0 || h.Limits.PageCacheBusyMillis == 0 {
				t.Fatalf("limits %v taken from a hostile answer", h.Limits)
			}
			hostile.headWait.Store(150)
			waitFor(t, "broker-h held out by the policy's own threshold", func() bool {
				items := c.r.Isolated("test")
				return len(items) == 1 && items[0].Broker == "broker-h" && items[0].Reason == fault.ReasonBrokerPressure
			})
		})
	}
}

// TestPressedBrokerStaysHeldUntilCalmPollsInARow proves a broker found pressed has its hold
// extended by every poll until pressureCalmPolls polls in a row find it calm, that polls it leaves
// unanswered do not count as calm, and that a broker never pressed is never held for being calm
// or silent.
func TestPressedBrokerStaysHeldUntilCalmPollsInARow(t *testing.T) {
	cases := []struct {
		name  string
		polls []bool // pressed, per poll
		held  []bool
	}{
		{"never pressed", []bool{false, false, false}, []bool{false, false, false}},
		{"pressed once", []bool{true, false, false, false, false}, []bool{true, true, true, false, false}},
		{"a pressed poll between calm ones starts the count again", []bool{true, false, true, false, false, false}, []bool{true, true, true, true, true, false}},
	}
	// An unanswered poll keeps a recently pressed broker held without counting as calm.
	var b polledBroker
	if b.recentlyPressed() {
		t.Fatal("a broker never pressed is held when a poll goes unanswered")
	}
	b.stillHeld(true)
	b.stillHeld(false)
	for range 5 {
		if !b.recentlyPressed() {
			t.Fatal("a broker pressed a poll ago is released by unanswered polls")
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b polledBroker
			for i, p := range tc.polls {
				if got := b.stillHeld(p); got != tc.held[i] {
					t.Fatalf("poll %d (pressed %v): held %v, want %v", i, p, got, tc.held[i])
				}
			}
		})
	}
}

// TestBrokerWithALimitOfZeroIsSampledSeveralTimesAPoll proves a broker whose send-queue limit is
// 0 has its runtime table read up to zeroLimitSamples times a poll while its figures are calm (a
// broker that sweeps its queue every 10 ms shows its waits only at instants), at least twice on a
// loaded machine whose poll may time out early, and one with RocketMQ's default limit once a poll,
// its configuration every other poll: the polls are counted against the watch's probes, one a
// round for each.
func TestBrokerWithALimitOfZeroIsSampledSeveralTimesAPoll(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-c"}, withPolicy(func(p *Policy) {
		watchPolicy(true)(p)
		p.Probe.Interval = 100 * time.Millisecond
		p.Pressure.Enabled = true
	}))
	zero, dflt := c.brokers["broker-a"], c.brokers["broker-c"]
	zero.SetLimits(remoting.BrokerLimits{SendQueueWaitMillis: 0, PageCacheBusyMillis: 1000})
	count := func(b *brokersim.Broker, code int16) int64 { return b.Stats().RequestsByCode[code] }
	waitFor(t, "twenty watch rounds", func() bool {
		return count(dflt, remoting.GetMaxOffset) >= 20 && count(zero, remoting.GetMaxOffset) >= 20
	})
	zeroPolls, zeroRounds := count(zero, remoting.GetBrokerRuntimeInfo), count(zero, remoting.GetMaxOffset)
	dfltConfigs := count(dflt, remoting.GetBrokerConfig)
	dfltPolls, dfltRounds := count(dflt, remoting.GetBrokerRuntimeInfo), count(dflt, remoting.GetMaxOffset)
	if lo, hi := dfltRounds/2-3, dfltRounds/2+3; dfltConfigs < lo || dfltConfigs > hi {
		t.Errorf("calm broker: its configuration read %d times in %d rounds, want every other round (%d to %d)", dfltConfigs, dfltRounds, lo, hi)
	}
	if zeroPolls < 2*zeroRounds {
		t.Errorf("broker with limit 0: %d runtime tables in %d rounds, want about %d a round", zeroPolls, zeroRounds, zeroLimitSamples)
	}
	if dfltPolls > dfltRounds+1 {
		t.Errorf("broker with the default limit: %d runtime tables in %d rounds, want one a round", dfltPolls, dfltRounds)
	}
	// A watch probe a loaded machine answers late holds a broker out as ProbeFailed, which is the
	// watch's business; pressure is this test's.
	for _, it := range c.r.Isolated("test") {
		if it.Reason == fault.ReasonBrokerPressure {
			t.Fatalf("held out %+v: calm brokers press nothing", it)
		}
	}
}

// TestPressedBrokerLeavingPollsUnansweredStaysHeld proves a broker held out for pressure that then
// leaves its runtime table unanswered (as a broker short of CPU does) stays held through polls
// spanning several holds, instead of being let back when its hold runs out.
func TestPressedBrokerLeavingPollsUnansweredStaysHeld(t *testing.T) {
	hostile := startConfigHostileBroker(t, func(resp *remoting.Command) bool {
		resp.Body = []byte("waitTimeMillsInSendQueue=200\nosPageCacheBusyTimeOutMills=1000\n")
		return true
	})
	hostile.headWait.Store(150)
	c := startCluster(t, 2, []string{"broker-a", "broker-c"}, withPolicy(func(p *Policy) {
		watchPolicy(true)(p)
		// A poll waits for an answer as long as an attempt: well inside the hold (two intervals,
		// 1 s), as in the Detour preset (1 s of a 4 s hold), so an unanswered poll ends, and
		// renews the hold, before the hold runs out, with room for a loaded machine's late
		// timers.
		p.Probe.Interval = 500 * time.Millisecond
		p.Retry.PerAttemptTimeout = 20 * time.Millisecond
		p.Pressure.Enabled = true
	}))
	routeBesideHostile(t, c, hostile.ln.Addr().String())
	// Only broker-h's hold is judged: the other broker's watch probes, which wait no longer than
	// a poll (20 ms), may go unanswered on a loaded machine and hold it out as ProbeFailed.
	heldOut := func() bool {
		return slices.ContainsFunc(c.r.Isolated("test"), func(it fault.Item) bool {
			return it.Broker == "broker-h" && it.Reason == fault.ReasonBrokerPressure
		})
	}
	waitFor(t, "broker-h held out for pressure", heldOut)
	hostile.silent.Store(true)
	from := hostile.asked.Load()
	// A hold is two intervals; ten polls are about ten intervals, with each checked on the way.
	poll.Until(t, 30*time.Second, 5*time.Millisecond, "ten unanswered pressure polls", func() error {
		if !heldOut() {
			t.Fatalf("broker-h let back after %d unanswered polls: %+v", hostile.asked.Load()-from, c.r.Isolated("test"))
		}
		if n := hostile.asked.Load() - from; n < 10 {
			return fmt.Errorf("%d polls so far", n)
		}
		return nil
	})
}
