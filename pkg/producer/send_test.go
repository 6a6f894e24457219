package producer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

func TestSendSpreadsRoundRobinWithinOnePerQueue(t *testing.T) {
	c := startCluster(t, 4, []string{"broker-a", "broker-b", "broker-c"}, withSlowNeverIsolating(t))
	const n = 12*20 + 7
	got := map[Queue]int{}
	for i := 0; i < n; i++ {
		res, err := c.send(t, fmt.Sprint("m", i))
		if err != nil {
			t.Fatal(err)
		}
		if res.Attempts != 1 || len(res.BrokersTried) != 1 || res.BrokersTried[0] != res.Broker {
			t.Fatalf("healthy send: %+v", res)
		}
		got[Queue{testTopic, res.Broker, res.QueueID}]++
	}
	if len(got) != 12 {
		t.Fatalf("%d queues used, want 12", len(got))
	}
	for q, k := range got {
		if k != n/12 && k != n/12+1 {
			t.Errorf("%v got %d messages, want %d or %d", q, k, n/12, n/12+1)
		}
	}
	// The brokers hold exactly what the results claim.
	for name, b := range c.brokers {
		for q := 0; q < 4; q++ {
			if stored := len(b.Messages(testTopic, q)); stored != got[Queue{testTopic, name, q}] {
				t.Errorf("%s queue %d stores %d, results say %d", name, q, stored, got[Queue{testTopic, name, q}])
			}
		}
	}
}

// sendUntilFirstAttemptOn sends until a send's first attempt goes to broker (round robin over one
// queue per broker reaches it within len(brokers) sends) and returns that send's outcome.
func sendUntilFirstAttemptOn(t *testing.T, c *simCluster, broker string) (*SendResult, error) {
	t.Helper()
	for i := 0; i < 2*len(c.names); i++ {
		res, err := c.send(t, fmt.Sprint("probe-", i))
		var tried []string
		var se *SendError
		switch {
		case err == nil:
			tried = res.BrokersTried
		case errors.As(err, &se):
			tried = se.BrokersTried
		default:
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
		if tried[0] == broker {
			return res, err
		}
	}
	t.Fatalf("no send started on %s", broker)
	return nil, nil
}

func TestRetryCodesAreRetriedOnAnotherBrokerAndOthersAreNot(t *testing.T) {
	cases := []struct {
		code  int16
		retry bool
	}{
		{remoting.TopicNotExist, true}, {remoting.ServiceNotAvailable, true}, {remoting.SystemError, true},
		{remoting.SystemBusy, true}, {remoting.NoPermission, true}, {remoting.NoBuyerID, true},
		{remoting.NotInCurrentUnit, true}, {remoting.GoAway, true},
		// Under the Detour preset a broker's MESSAGE_ILLEGAL is tried on a broker that has not
		// refused the message (see TestMessagesOneBrokerRefusesAreStoredElsewhere).
		{remoting.MessageIllegal, true}, {remoting.InvalidParameter, false}, {remoting.FlowControl, false},
		{remoting.RequestCodeNotSupported, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-%d", remoting.ResponseCodeName(tc.code), tc.code), func(t *testing.T) {
			c := startCluster(t, 1, []string{"broker-a", "broker-b"})
			c.brokers["broker-a"].SetFault(brokersim.Fault{Code: tc.code})
			res, err := sendUntilFirstAttemptOn(t, c, "broker-a")
			if tc.retry {
				if err != nil {
					t.Fatalf("retryable code %d: %v", tc.code, err)
				}
				if res.Attempts != 2 || fmt.Sprint(res.BrokersTried) != "[broker-a broker-b]" || res.Broker != "broker-b" {
					t.Fatalf("result %+v", res)
				}
				return
			}
			var se *SendError
			var be *BrokerError
			if !errors.As(err, &se) || !errors.As(err, &be) {
				t.Fatalf("non-retryable code %d: got %v", tc.code, err)
			}
			if se.Attempts != 1 || be.Code != tc.code || be.Broker != "broker-a" {
				t.Fatalf("attempts %d, broker error %+v", se.Attempts, be)
			}
		})
	}
}

func TestRetriesNeverRepeatTheLastBroker(t *testing.T) {
	// Every broker refuses with a retryable code, so each send makes all three attempts.
	c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"})
	for _, b := range c.brokers {
		b.SetFault(brokersim.Fault{Code: remoting.SystemBusy})
	}
	for i := 0; i < 20; i++ {
		_, err := c.send(t, "x")
		var se *SendError
		if !errors.As(err, &se) {
			t.Fatalf("send %d: %v", i, err)
		}
		if se.Attempts != 3 {
			t.Fatalf("send %d: %d attempts", i, se.Attempts)
		}
		for k := 1; k < len(se.BrokersTried); k++ {
			if se.BrokersTried[k] == se.BrokersTried[k-1] {
				t.Fatalf("send %d retried on the same broker: %v", i, se.BrokersTried)
			}
		}
	}
}

func TestFinalErrorNamesAttemptsCostTopicAndBrokers(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"})
	for _, b := range c.brokers {
		b.SetFault(brokersim.Fault{Code: remoting.SystemError})
	}
	_, err := c.send(t, "x")
	if err == nil {
		t.Fatal("send succeeded")
	}
	re := regexp.MustCompile(`^Send \[3\] times, still failed, cost \[\d+\]ms, Topic: TopicTest, BrokersSent: \[(broker-a, broker-b, broker-a|broker-b, broker-a, broker-b)\]: CODE: 1  DESC: .* BROKER: 127\.0\.0\.1:\d+$`)
	if !re.MatchString(err.Error()) {
		t.Fatalf("error text %q", err.Error())
	}
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != remoting.SystemError {
		t.Fatalf("errors.As BrokerError: %v", err)
	}
	if errors.Is(err, ErrSendTimeout) {
		t.Fatal("a refused send is not a timeout")
	}

	// Transport failures: the last cause is remoting's connect error, and unused slots print null
	// as RocketMQ's array does when the budget ends the loop early.
	c2 := startCluster(t, 1, []string{"broker-a", "broker-b"})
	for _, b := range c2.brokers {
		b.SetFault(brokersim.Fault{Refuse: true})
	}
	_, err = c2.send(t, "x")
	if !errors.Is(err, remoting.ErrConnect) {
		t.Fatalf("refused everywhere: %v", err)
	}
	if !regexp.MustCompile(`^Send \[3\] times, still failed, cost \[\d+\]ms, Topic: TopicTest, BrokersSent: \[broker-., broker-., broker-.\]: `).MatchString(err.Error()) {
		t.Fatalf("error text %q", err.Error())
	}
}

func TestAttemptDeadlineLetsASecondBrokerAnswerWithinTheBudget(t *testing.T) {
	for _, capped := range []bool{true, false} {
		t.Run(fmt.Sprintf("capped=%v", capped), func(t *testing.T) {
			// Two attempts: the capped first one and the last, which gets the rest of the budget.
			c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withPolicy(func(p *Policy) {
				p.Retry.Attempts = 2
				p.Retry.SendTimeout = 600 * time.Millisecond
				if capped {
					p.Retry.PerAttemptTimeout = 100 * time.Millisecond
				}
			}))
			c.brokers["broker-a"].SetFault(brokersim.Fault{BlackHole: true})
			res, err := sendUntilFirstAttemptOn(t, c, "broker-a")
			if !capped {
				// Without the cap the black hole eats the whole budget: RocketMQ's known complaint.
				var se *SendError
				if !errors.As(err, &se) || !errors.Is(err, ErrSendTimeout) || !errors.Is(err, remoting.ErrTimeout) || se.Attempts != 1 {
					t.Fatalf("uncapped: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("capped: %v", err)
			}
			if res.Attempts != 2 || res.Broker != "broker-b" || res.Latency >= 600*time.Millisecond {
				t.Fatalf("capped: %+v", res)
			}
			// The black-holed attempt was recorded with its own latency (the cap) as a transport error.
			var sawA bool
			for _, a := range c.rec.snapshotAttempts() {
				if a.broker == "broker-a" {
					sawA = true
					if a.outcome != fault.TransportError || a.latency < 100*time.Millisecond {
						t.Fatalf("attempt on broker-a recorded as %+v", a)
					}
				}
			}
			if !sawA {
				t.Fatal("no attempt on broker-a recorded")
			}
		})
	}
}

func TestEveryAttemptUpdatesTheFaultTableWithItsOwnOutcome(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"})
	c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.SystemError, Delay: 60 * time.Millisecond})
	res, err := sendUntilFirstAttemptOn(t, c, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	atts := c.rec.snapshotAttempts()
	last2 := atts[len(atts)-2:]
	if last2[0].broker != "broker-a" || last2[0].outcome != fault.BrokerError || last2[0].latency < 60*time.Millisecond {
		t.Fatalf("first attempt recorded as %+v", last2[0])
	}
	if last2[1].broker != "broker-b" || last2[1].outcome != fault.Success || last2[1].policy != "test" {
		t.Fatalf("second attempt recorded as %+v", last2[1])
	}
	if res.Attempts != 2 {
		t.Fatalf("result %+v", res)
	}
	iso := c.r.Isolated("test")
	if len(iso) != 1 || iso[0].Broker != "broker-a" || iso[0].Reason != fault.ReasonBrokerError || iso[0].Reachable ||
		iso[0].Latency != last2[0].latency {
		t.Fatalf("fault table: %+v, first attempt latency %v", iso, last2[0].latency)
	}
	// Further sends avoid the isolated broker.
	for i := 0; i < 10; i++ {
		res, err := c.send(t, "y")
		if err != nil || res.Broker != "broker-b" || res.Attempts != 1 {
			t.Fatalf("send after isolation: %+v %v", res, err)
		}
	}
}

func TestValidationRefusesBeforeAnyIO(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"})
	before := c.brokers["broker-a"].Stats()
	bad := []*Message{nil, {Topic: "", Body: []byte("x")}, {Topic: "bad topic", Body: []byte("x")},
		{Topic: "SCHEDULE_TOPIC_XXXX", Body: []byte("x")}, {Topic: testTopic}, {Topic: testTopic, Body: []byte{}},
		{Topic: testTopic, Body: make([]byte, MaxMessageSize+1)},
		{Topic: testTopic, Body: []byte("x"), Properties: map[string]string{"big": string(make([]byte, MaxPropertiesSize))}},
		{Topic: testTopic, Body: []byte("x"), Properties: map[string]string{"TRAN_MSG": "true"}},
		{Topic: testTopic, Body: []byte("x"), Properties: map[string]string{"a": ""}},
		{Topic: testTopic, Body: []byte("x"), Properties: map[string]string{"a": "x\x02DELAY\x013"}},
		{Topic: testTopic, Body: []byte("x"), Tags: "\xff"}}
	for i, m := range bad {
		var ve *ValidationError
		if _, err := c.r.Send(context.Background(), m); !errors.As(err, &ve) {
			t.Errorf("sync %d: %v", i, err)
		}
		if err := c.r.SendOneway(context.Background(), m); !errors.As(err, &ve) {
			t.Errorf("oneway %d: %v", i, err)
		}
		done := make(chan error, 1)
		c.r.SendAsync(context.Background(), m, func(_ *SendResult, err error) { done <- err })
		if err := <-done; !errors.As(err, &ve) {
			t.Errorf("async %d: %v", i, err)
		}
	}
	if after := c.brokers["broker-a"].Stats(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("broker saw traffic: before %+v after %+v", before, after)
	}
	if c.rec.sends != 0 || len(c.rec.attempts) != 0 {
		t.Fatalf("metrics recorded refused sends: %+v", c.rec)
	}
}

func TestSendToUnknownTopicFailsWithNoRoute(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"})
	_, err := c.r.Send(context.Background(), &Message{Topic: "Other", Body: []byte("x")})
	if !errors.Is(err, ErrNoRoute) || err.Error() != "No route info of this topic: Other" {
		t.Fatalf("got %v", err)
	}
}

func TestPodNotReadyOrTerminatingBrokersGetNoTraffic(t *testing.T) {
	for _, pod := range []Broker{{Ready: false}, {Ready: true, Terminating: true}} {
		t.Run(fmt.Sprintf("ready=%v,terminating=%v", pod.Ready, pod.Terminating), func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"})
			a := c.brokers["broker-a"]
			c.r.SetBroker(Broker{Name: "broker-a", Addr: a.Addr(), Ready: pod.Ready, Terminating: pod.Terminating})
			for i := 0; i < 60; i++ {
				res, err := c.send(t, "x")
				if err != nil {
					t.Fatal(err)
				}
				if res.Broker == "broker-a" || res.Attempts != 1 {
					t.Fatalf("send %d: %+v", i, res)
				}
			}
			if n := len(a.Messages(testTopic, 0)) + len(a.Messages(testTopic, 1)); n != 0 {
				t.Fatalf("broker-a stored %d messages while its pod was unhealthy", n)
			}
			c.r.SetBroker(Broker{Name: "broker-a", Addr: a.Addr(), Ready: true})
			seen := false
			for i := 0; i < 6 && !seen; i++ {
				res, err := c.send(t, "x")
				if err != nil {
					t.Fatal(err)
				}
				seen = res.Broker == "broker-a"
			}
			if !seen {
				t.Fatal("broker-a got no traffic after its pod became ready")
			}
		})
	}
}

func TestRemovedBrokerLeavesTheRoute(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"})
	c.r.RemoveBroker("broker-a")
	for i := 0; i < 10; i++ {
		res, err := c.send(t, "x")
		if err != nil || res.Broker != "broker-b" {
			t.Fatalf("%+v %v", res, err)
		}
	}
}

func TestSameUniqKeyOnEveryAttempt(t *testing.T) {
	// broker-a answers late (after its attempt deadline) but still stores: the retry on broker-b
	// carries the same UNIQ_KEY, so both copies are one message to a deduplicating consumer.
	c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withPolicy(func(p *Policy) {
		p.Retry.Attempts = 2
		p.Retry.PerAttemptTimeout = 50 * time.Millisecond
	}))
	c.brokers["broker-a"].SetFault(brokersim.Fault{Delay: 200 * time.Millisecond})
	res, err := sendUntilFirstAttemptOn(t, c, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 {
		t.Fatalf("%+v", res)
	}
	waitFor(t, "broker-a to store the late copy", func() bool { return len(c.storedByUniq()[res.MsgID]) == 2 })
	if got := c.storedByUniq()[res.MsgID]; fmt.Sprint(sortedCopy(got)) != "[broker-a broker-b]" {
		t.Fatalf("copies of %s on %v", res.MsgID, got)
	}
}

func TestSuccessfulSendsAreStoredExactlyOnce(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"})
	c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.SystemBusy})
	c.brokers["broker-b"].SetFault(brokersim.Fault{Refuse: true})
	var ok []string
	for i := 0; i < 100; i++ {
		if i == 50 {
			c.brokers["broker-a"].SetFault(brokersim.Fault{})
			c.brokers["broker-b"].SetFault(brokersim.Fault{})
		}
		m := &Message{Topic: testTopic, Body: []byte(fmt.Sprint("m", i))}
		if i%10 == 0 {
			m.Properties = map[string]string{remoting.PropertyUniqKey: fmt.Sprintf("CALLER%026d", i)}
		}
		res, err := c.r.Send(context.Background(), m)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if m.Properties != nil && res.MsgID != m.Properties[remoting.PropertyUniqKey] {
			t.Fatalf("caller's UNIQ_KEY replaced: %s", res.MsgID)
		}
		ok = append(ok, res.MsgID)
	}
	stored := c.storedByUniq()
	for _, id := range ok {
		if len(stored[id]) != 1 {
			t.Fatalf("%s stored %d times", id, len(stored[id]))
		}
	}
	if len(stored) != len(ok) {
		t.Fatalf("%d distinct messages stored, %d sends succeeded", len(stored), len(ok))
	}
}

func TestCancelledContextEndsTheSendPromptly(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"}, withPolicy(func(p *Policy) { p.Retry.SendTimeout = time.Minute }))
	c.brokers["broker-a"].SetFault(brokersim.Fault{BlackHole: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.r.Send(ctx, &Message{Topic: testTopic, Body: []byte("x")})
		done <- err
	}()
	waitFor(t, "the request to reach the broker", func() bool { return c.brokers["broker-a"].Stats().SendsReceived > 0 })
	cancel()
	select {
	case err := <-done:
		var se *SendError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.Attempts != 1 {
			t.Fatalf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("send still running half a minute after its context was cancelled (budget: one minute)")
	}
	// A caller giving up says nothing about the broker.
	if iso := c.r.Isolated("test"); len(iso) != 0 {
		t.Fatalf("cancellation isolated %+v", iso)
	}
}

func TestAsyncSendsCompleteThroughCallbacks(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"})
	c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.SystemBusy})
	const n = 50
	type outcome struct {
		res *SendResult
		err error
	}
	out := make(chan outcome, n)
	for i := 0; i < n; i++ {
		c.r.SendAsync(context.Background(), &Message{Topic: testTopic, Body: []byte(fmt.Sprint("a", i))},
			func(res *SendResult, err error) { out <- outcome{res, err} })
	}
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		o := <-out
		if o.err != nil {
			t.Fatalf("async send: %v", o.err)
		}
		if o.res.Broker != "broker-b" {
			t.Fatalf("async send stored on %s", o.res.Broker)
		}
		ids[o.res.MsgID] = true
	}
	stored := c.storedByUniq()
	for id := range ids {
		if len(stored[id]) != 1 {
			t.Fatalf("%s stored %d times", id, len(stored[id]))
		}
	}
	if len(ids) != n || c.stored() != n {
		t.Fatalf("%d ids, %d stored", len(ids), c.stored())
	}
}

func TestOnewaySendsReachTheBrokers(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withSlowNeverIsolating(t))
	const n = 40
	for i := 0; i < n; i++ {
		if err := c.r.SendOneway(context.Background(), &Message{Topic: testTopic, Body: []byte(fmt.Sprint("o", i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "oneway messages to be stored", func() bool { return c.stored() == n })
	for name, b := range c.brokers {
		if k := len(b.Messages(testTopic, 0)) + len(b.Messages(testTopic, 1)); k != n/2 {
			t.Errorf("%s stored %d oneway messages, want %d", name, k, n/2)
		}
	}
	// A oneway write to a refusing broker fails over to the other one.
	c.brokers["broker-a"].SetFault(brokersim.Fault{Refuse: true})
	c.r.client.CloseConn(c.brokers["broker-a"].Addr())
	for i := 0; i < 4; i++ {
		if err := c.r.SendOneway(context.Background(), &Message{Topic: testTopic, Body: []byte("late")}); err != nil {
			t.Fatalf("oneway with broker-a refusing: %v", err)
		}
	}
	waitFor(t, "fail-over oneway messages", func() bool { return c.stored() == n+4 })
}

func TestIsolationEventsAndExpiry(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b"}, withManualClock(), withSlowNeverIsolating(t))
	c.brokers["broker-a"].SetFault(brokersim.Fault{Code: remoting.SystemError})
	if _, err := sendUntilFirstAttemptOn(t, c, "broker-a"); err != nil {
		t.Fatal(err)
	}
	ev := recvEvent(t, c.r.Events())
	if ev.Policy != "test" || ev.Broker != "broker-a" || !ev.Isolated || ev.Item.Reason != fault.ReasonBrokerError {
		t.Fatalf("event %+v", ev)
	}
	// The fault table's clock runs out the 10s isolation; the runtime's expiry timer reports it
	// without any send touching broker-a.
	c.clock.Advance(10*time.Second + time.Millisecond)
	ev = recvEvent(t, c.r.Events())
	if ev.Broker != "broker-a" || ev.Isolated {
		t.Fatalf("event %+v", ev)
	}
}

func TestProbeLoopRecoversHealedBrokersAndKeepsDeadOnesOut(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a", "broker-b", "broker-c"}, withManualClock(), withPolicy(func(p *Policy) {
		p.Probe = ProbePolicy{Enabled: true, Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond}
		p.Retry.PerAttemptTimeout = 100 * time.Millisecond
	}))
	c.brokers["broker-a"].SetFault(brokersim.Fault{BlackHole: true})
	c.brokers["broker-b"].SetFault(brokersim.Fault{BlackHole: true})
	// Send until both bad brokers have failed once; every send still succeeds on broker-c.
	for i := 0; len(c.r.Isolated("test")) < 2; i++ {
		if i > 20 {
			t.Fatalf("bad brokers never isolated: %+v", c.r.Isolated("test"))
		}
		if _, err := c.send(t, "x"); err != nil {
			t.Fatal(err)
		}
	}
	// Failed probes keep both out (the manual clock never ends their timers).
	waitFor(t, "failed probes", func() bool {
		iso := c.r.Isolated("test")
		return len(iso) == 2 && iso[0].Reason == fault.ReasonProbeFailed && iso[1].Reason == fault.ReasonProbeFailed
	})
	c.brokers["broker-a"].SetFault(brokersim.Fault{})
	waitFor(t, "broker-a to be probed back", func() bool {
		iso := c.r.Isolated("test")
		return len(iso) == 1 && iso[0].Broker == "broker-b"
	})
	seenA := false
	for i := 0; i < 6; i++ {
		res, err := c.send(t, "y")
		if err != nil {
			t.Fatal(err)
		}
		if res.Broker == "broker-b" || res.Attempts != 1 {
			t.Fatalf("send went to %s after %v", res.Broker, res.BrokersTried)
		}
		seenA = seenA || res.Broker == "broker-a"
	}
	if !seenA {
		t.Fatal("recovered broker-a got no traffic")
	}
	if iso := c.r.Isolated("test"); len(iso) != 1 || iso[0].Broker != "broker-b" {
		t.Fatalf("dead broker-b let back: %+v", iso)
	}
}

func TestCreateTopic(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"})
	addr := c.brokers["broker-a"].Addr()
	if err := c.r.CreateTopic(context.Background(), addr, "NewTopic", 8, 8, 6); err != nil {
		t.Fatal(err)
	}
	c.r.SetBroker(Broker{Name: "broker-a", Addr: addr, Ready: true})
	if err := c.r.SetRoute(Route{Topic: "NewTopic", Brokers: []BrokerQueues{{Broker: "broker-a", WriteQueues: 8}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		res, err := c.r.Send(context.Background(), &Message{Topic: "NewTopic", Body: []byte("x")})
		if err != nil {
			t.Fatalf("send to created topic: %v", err)
		}
		_ = res
	}
	for q := 0; q < 8; q++ {
		if n := len(c.brokers["broker-a"].Messages("NewTopic", q)); n != 1 {
			t.Fatalf("queue %d of the created topic stores %d", q, n)
		}
	}
	for _, bad := range []struct {
		topic             string
		read, write, perm int
	}{{"TBW102", 1, 1, 6}, {"a b", 1, 1, 6}, {"T", 0, 1, 6}, {"T", 1, 1, 8}} {
		if err := c.r.CreateTopic(context.Background(), addr, bad.topic, bad.read, bad.write, bad.perm); err == nil {
			t.Errorf("CreateTopic(%+v) accepted", bad)
		}
	}
}

func TestCallerDeadlineIsTheBudgetAndKeepsTheTransportCause(t *testing.T) {
	c := startCluster(t, 1, []string{"broker-a"}, withPolicy(func(p *Policy) { p.Retry.SendTimeout = time.Minute }))
	c.brokers["broker-a"].SetFault(brokersim.Fault{BlackHole: true})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := c.r.Send(ctx, &Message{Topic: testTopic, Body: []byte("x")})
	var se *SendError
	if !errors.As(err, &se) || se.Attempts != 1 || !se.Timeout {
		t.Fatalf("got %v", err)
	}
	for _, target := range []error{ErrSendTimeout, remoting.ErrTimeout, context.DeadlineExceeded} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(err, %v) = false for %v", target, err)
		}
	}
}
