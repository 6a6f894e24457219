package producer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

// refusalCase is one scenario of brokers refusing well-formed messages as MESSAGE_ILLEGAL, as a
// broker whose store refuses them answers (brokersim's IllegalMessages).
type refusalCase struct {
	name    string
	preset  Preset
	brokers []string
	// refusing brokers answer every send with MESSAGE_ILLEGAL; dead ones refuse connections.
	refusing, dead []string
	check          func(t *testing.T, c *simCluster)
}

// TestMessagesOneBrokerRefusesAreStoredElsewhere proves the Detour preset tells a broker that
// refuses well-formed messages from a message no broker takes: a message one broker refused as
// MESSAGE_ILLEGAL is tried on a broker that has not refused it, the refusing broker is isolated
// once another broker stores the message (reason RefusesValidMessages), and a send fails as
// refused only when every broker it tried refused it, naming each attempt. RocketMQ's presets keep
// RocketMQ's rule: one attempt, and the broker isolated as for any refusal (none when Disabled).
func TestMessagesOneBrokerRefusesAreStoredElsewhere(t *testing.T) {
	three := []string{"broker-a", "broker-b", "broker-c"}
	cases := []refusalCase{
		{name: "Detour: one broker of three refuses everything", preset: PresetDetour, brokers: three,
			refusing: []string{"broker-a"}, check: everySendStoredAndRefuserIsolated},
		{name: "Detour: every broker refuses", preset: PresetDetour, brokers: three,
			refusing: three, check: refusedByEachBrokerOnce(3)},
		{name: "Detour: both brokers of two refuse", preset: PresetDetour, brokers: three[:2],
			refusing: three[:2], check: refusedByEachBrokerOnce(2)},
		{name: "Detour: one broker refuses and the others are down", preset: PresetDetour, brokers: three,
			refusing: []string{"broker-a"}, dead: []string{"broker-b", "broker-c"}, check: notRefusedWhenABrokerWasNotHeard},
		{name: "RocketMQ5: one attempt, the broker isolated", preset: PresetRocketMQ5, brokers: three,
			refusing: []string{"broker-a"}, check: refusedOnceAsRocketMQ(fault.ReasonBrokerError)},
		{name: "RocketMQ4: one attempt, the broker isolated", preset: PresetRocketMQ4, brokers: three,
			refusing: []string{"broker-a"}, check: refusedOnceAsRocketMQ(fault.ReasonBrokerError)},
		{name: "Disabled: one attempt, nothing isolated", preset: PresetDisabled, brokers: three,
			refusing: []string{"broker-a"}, check: refusedOnceAsRocketMQ("")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 2, tc.brokers, withPreset(t, tc.preset, nil))
			for _, n := range tc.refusing {
				c.brokers[n].SetFault(brokersim.Fault{IllegalMessages: true})
			}
			for _, n := range tc.dead {
				c.brokers[n].SetFault(brokersim.Fault{Refuse: true})
			}
			tc.check(t, c)
		})
	}
}

// everySendStoredAndRefuserIsolated sends 40 messages, as the trial's gateway round did: every one
// is stored exactly once, never on broker-a, and broker-a ends isolated for refusing them.
func everySendStoredAndRefuserIsolated(t *testing.T, c *simCluster) {
	const n = 40
	refusedFirst := 0
	for i := range n {
		res, err := c.send(t, fmt.Sprint("m-", i))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.BrokersTried[0] == "broker-a" {
			refusedFirst++
			if res.Attempts != 2 || res.Broker == "broker-a" {
				t.Errorf("send refused by broker-a: %+v, want it stored by the next broker tried", res)
			}
		}
	}
	if refusedFirst == 0 {
		t.Fatal("no send started on broker-a: the case did not exercise a refusal")
	}
	for key, on := range c.storedByUniq() {
		if len(on) != 1 || on[0] == "broker-a" {
			t.Errorf("message %s stored on %v, want once on a broker that stores", key, on)
		}
	}
	if got := c.stored(); got != n {
		t.Errorf("%d messages stored, want %d", got, n)
	}
	it, ok := c.r.tolerance("test").Lookup("broker-a")
	if !ok || it.Reason != fault.ReasonRefusesValidMessages || c.r.tolerance("test").Available("broker-a") {
		t.Errorf("broker-a: %+v, want isolated with reason %s", it, fault.ReasonRefusesValidMessages)
	}
	if iso := isolatedBrokers(c); !slices.Equal(iso, []string{"broker-a"}) {
		t.Errorf("isolated %v, want broker-a alone", iso)
	}
}

// refusedByEachBrokerOnce sends one message every broker refuses: the send tries each broker
// once (want attempts), fails as refused naming every attempt, and isolates nobody.
func refusedByEachBrokerOnce(want int) func(t *testing.T, c *simCluster) {
	return func(t *testing.T, c *simCluster) {
		_, err := c.send(t, "m")
		var se *SendError
		if !errors.As(err, &se) || !se.MessageRefused || se.Attempts != want {
			t.Fatalf("send every broker refuses: %v, want refused after %d attempts", err, want)
		}
		if tried := sortedCopy(se.BrokersTried); !slices.Equal(tried, c.names) {
			t.Errorf("brokers tried %v, want each of %v once", se.BrokersTried, c.names)
		}
		var mr *MessageRefusedError
		if !errors.As(err, &mr) || len(mr.Refusals) != want {
			t.Fatalf("cause %v, want the %d refusals", se.Err, want)
		}
		for i, b := range se.BrokersTried {
			if !strings.Contains(err.Error(), fmt.Sprintf("attempt %d on %s: CODE: 13", i+1, b)) {
				t.Errorf("error %q does not name attempt %d on %s", err, i+1, b)
			}
		}
		if be := (*BrokerError)(nil); !errors.As(err, &be) || be.Code != remoting.MessageIllegal {
			t.Errorf("error %v does not reach a MESSAGE_ILLEGAL BrokerError", err)
		}
		if iso := isolatedBrokers(c); len(iso) != 0 {
			t.Errorf("isolated %v for a message no broker stores", iso)
		}
		if got := c.stored(); got != 0 {
			t.Errorf("%d messages stored", got)
		}
	}
}

// notRefusedWhenABrokerWasNotHeard sends while broker-a refuses and the others take no
// connection: the send fails, but not as refused, since brokers it tried never answered.
func notRefusedWhenABrokerWasNotHeard(t *testing.T, c *simCluster) {
	_, err := sendUntilFirstAttemptOn(t, c, "broker-a")
	var se *SendError
	if !errors.As(err, &se) || se.MessageRefused || se.Attempts != 3 {
		t.Fatalf("send: %v (%+v), want a failure after 3 attempts that is not a refusal", err, se)
	}
	if it, ok := c.r.tolerance("test").Lookup("broker-a"); ok && it.Reason == fault.ReasonRefusesValidMessages {
		t.Errorf("broker-a isolated as %s without another broker storing the message", it.Reason)
	}
}

// refusedOnceAsRocketMQ sends until a send starts on broker-a: RocketMQ does not retry
// MESSAGE_ILLEGAL, so it fails after one attempt as refused, and broker-a is isolated with
// reason (none when "").
func refusedOnceAsRocketMQ(reason fault.Reason) func(t *testing.T, c *simCluster) {
	return func(t *testing.T, c *simCluster) {
		_, err := sendUntilFirstAttemptOn(t, c, "broker-a")
		var se *SendError
		var be *BrokerError
		if !errors.As(err, &se) || se.Attempts != 1 || !se.MessageRefused || !errors.As(err, &be) || be.Code != remoting.MessageIllegal {
			t.Fatalf("send refused by broker-a: %v, want MESSAGE_ILLEGAL after one attempt", err)
		}
		it, known := c.r.tolerance("test").Lookup("broker-a")
		if isolated := !c.r.tolerance("test").Available("broker-a"); isolated != (reason != "") || (isolated && it.Reason != reason) {
			t.Errorf("broker-a after the refusal: isolated %v (%+v, known %v), want isolated %v with reason %q", isolated, it, known, reason != "", reason)
		}
	}
}

// isolatedBrokers lists the brokers the test policy holds out, sorted.
func isolatedBrokers(c *simCluster) []string {
	var out []string
	for _, it := range c.r.Isolated("test") {
		out = append(out, it.Broker)
	}
	slices.Sort(out)
	return out
}
