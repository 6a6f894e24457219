package producer

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// disconnectCase is one rolling-restart moment: brokers restarting behind pods that are still
// Ready (their listeners closed, so every dial is refused at once) beside brokers that answer
// behind pods the runtime was told are NotReady or terminating.
type disconnectCase struct {
	name    string
	brokers []string
	// restarting brokers refuse connections; their pods stay Ready.
	restarting []string
	// notReady and terminating brokers answer; their pods are marked so.
	notReady, terminating []string
	check                 func(t *testing.T, c *simCluster)
}

// TestRetryAfterRefusedConnectionGoesToAnAnsweringBrokerWhateverItsPod proves that under the
// Detour preset a retry never goes back to a broker whose connection failed in the same send while
// another broker is left, even one whose pod is NotReady or terminating: a broker restarting
// behind the only Ready pod no longer takes every attempt of a send (BrokersSent [a, a, a],
// connection refused, 0 ms each) while the broker beside it answers. A broker the send already
// could not connect to is tried again only when nothing else is left.
func TestRetryAfterRefusedConnectionGoesToAnAnsweringBrokerWhateverItsPod(t *testing.T) {
	two := []string{"broker-a", "broker-b"}
	three := []string{"broker-a", "broker-b", "broker-c"}
	cases := []disconnectCase{
		{name: "broker-a restarting, broker-b answering behind a NotReady pod", brokers: two,
			restarting: []string{"broker-a"}, notReady: []string{"broker-b"}, check: everySendStoredOn("broker-b")},
		{name: "broker-a restarting, broker-b answering behind a terminating pod", brokers: two,
			restarting: []string{"broker-a"}, terminating: []string{"broker-b"}, check: everySendStoredOn("broker-b")},
		{name: "broker-a and broker-c restarting, broker-b answering behind a NotReady pod", brokers: three,
			restarting: []string{"broker-a", "broker-c"}, notReady: []string{"broker-b"}, check: everySendStoredOn("broker-b")},
		{name: "the route's only broker restarting: every attempt goes back to it", brokers: two[:1],
			restarting: []string{"broker-a"}, check: everyAttemptRefusedOn("broker-a")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 2, tc.brokers, withPreset(t, PresetDetour, nil))
			for _, n := range tc.notReady {
				c.r.SetBroker(Broker{Name: n, Addr: c.brokers[n].Addr(), Ready: false})
			}
			for _, n := range tc.terminating {
				c.r.SetBroker(Broker{Name: n, Addr: c.brokers[n].Addr(), Ready: true, Terminating: true})
			}
			for _, n := range tc.restarting {
				c.brokers[n].SetFault(brokersim.Fault{Refuse: true})
				waitFor(t, n+"'s listener closed", func() bool { return !c.brokers[n].Listening() })
			}
			tc.check(t, c)
		})
	}
}

// everySendStoredOn sends 20 messages: every one is stored on want, and no send tries a broker
// twice, so none went back to a broker that had refused its connection. Sends start on the
// restarting brokers, whose pods are the Ready ones, so the case meets refusals.
func everySendStoredOn(want string) func(t *testing.T, c *simCluster) {
	return func(t *testing.T, c *simCluster) {
		const n = 20
		retried := 0
		for i := range n {
			res, err := c.send(t, fmt.Sprint("m-", i))
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			if res.Broker != want || repeats(res.BrokersTried) {
				t.Errorf("send %d stored on %s after trying %v, want it stored on %s and no broker tried twice", i, res.Broker, res.BrokersTried, want)
			}
			if res.Attempts > 1 {
				retried++
			}
		}
		if retried == 0 {
			t.Error("no send met a refused connection: the case did not exercise a retry")
		}
		if got := c.stored(); got != n {
			t.Errorf("%d messages stored, want %d", got, n)
		}
	}
}

// everyAttemptRefusedOn sends one message to a route whose only broker refuses connections: the
// send still makes every attempt on it, and fails on a refused connection.
func everyAttemptRefusedOn(broker string) func(t *testing.T, c *simCluster) {
	return func(t *testing.T, c *simCluster) {
		_, err := c.send(t, "m")
		var se *SendError
		if !errors.As(err, &se) || !errors.Is(err, remoting.ErrConnect) {
			t.Fatalf("send: %v, want it failed on a refused connection", err)
		}
		if want := []string{broker, broker, broker}; !slices.Equal(se.BrokersTried, want) {
			t.Errorf("brokers tried %v, want %v", se.BrokersTried, want)
		}
	}
}

// repeats reports whether names holds a name twice.
func repeats(names []string) bool {
	for i, n := range names {
		if slices.Contains(names[i+1:], n) {
			return true
		}
	}
	return false
}
