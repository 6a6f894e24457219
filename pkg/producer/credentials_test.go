package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/remoting"
)

var (
	goodCreds  = &remoting.Credentials{AccessKey: "rocketmq", SecretKey: "12345678"}
	wrongCreds = &remoting.Credentials{AccessKey: "rocketmq", SecretKey: "wrong"}
)

// withACL turns on brokersim's authentication on every broker of c: one user, rocketmq, who may
// not send to the topics in noPub.
func withACL(c *simCluster, noPub ...string) {
	for _, b := range c.brokers {
		b.SetACL(&brokersim.ACL{Users: map[string]string{"rocketmq": "12345678"}, NoPub: map[string][]string{"rocketmq": noPub}})
	}
}

// TestCredentialRefusalIsTheCallersNotTheBrokers proves a send refused for its credentials, under
// PresetDetour, ends at once with the broker's refusal, isolates nothing, and is kept as the
// broker's credential refusal until the credentials change; with good credentials the same
// brokers store at once, no readmission wait. The RocketMQ presets keep RocketMQ's handling:
// NO_PERMISSION is retried and every refusing broker isolated.
func TestCredentialRefusalIsTheCallersNotTheBrokers(t *testing.T) {
	three := []string{"broker-a", "broker-b", "broker-c"}
	tests := []struct {
		name      string
		preset    Preset
		creds     *remoting.Credentials
		noPub     []string
		reason    remoting.ACLRefusal
		remark    string
		attempts  int
		isolating bool
	}{
		{"Detour: no credentials", PresetDetour, nil, nil, remoting.AuthenticationRefused, "username cannot be null.", 1, false},
		{"Detour: wrong secret", PresetDetour, wrongCreds, nil, remoting.AuthenticationRefused, "check signature failed.", 1, false},
		{"Detour: no PUB on the topic", PresetDetour, goodCreds, []string{testTopic}, remoting.AuthorizationRefused,
			"User:rocketmq has no permission to access Topic:" + testTopic + " from 127.0.0.1, no matched policies.", 1, false},
		{"RocketMQ5: wrong secret is a retried broker error", PresetRocketMQ5, wrongCreds, nil, remoting.AuthenticationRefused, "check signature failed.", 3, true},
		{"RocketMQ4: wrong secret is a retried broker error", PresetRocketMQ4, wrongCreds, nil, remoting.AuthenticationRefused, "check signature failed.", 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster(t, 2, three, withPreset(t, tt.preset, nil))
			withACL(c, tt.noPub...)
			if err := c.r.SetCredentials("", tt.creds); err != nil {
				t.Fatal(err)
			}
			_, err := c.send(t, "refused")
			var se *SendError
			if !errors.As(err, &se) || se.Attempts != tt.attempts {
				t.Fatalf("send: %v, want a SendError after %d attempts", err, tt.attempts)
			}
			be, kind, ok := CredentialRefusalOf(err)
			if !ok || kind != tt.reason || be.Remark != tt.remark || be.Code != remoting.NoPermission {
				t.Fatalf("CredentialRefusalOf = %+v, %v, %v; want %v with remark %q", be, kind, ok, tt.reason, tt.remark)
			}
			if held := c.r.Isolated("test"); (len(held) > 0) != tt.isolating {
				t.Errorf("isolated after the refusal: %+v, want isolating=%v", held, tt.isolating)
			}
			refusals := c.r.CredentialRefusals()
			if len(refusals) != tt.attempts || refusals[0].Reason != tt.reason || refusals[0].Remark != tt.remark ||
				refusals[0].Topic != testTopic || refusals[0].Request != "SEND_MESSAGE_V2" || refusals[0].Broker == "" {
				t.Errorf("CredentialRefusals() = %+v, want %d of %v for %s", refusals, tt.attempts, tt.reason, testTopic)
			}
			if c.stored() != 0 {
				t.Errorf("%d messages stored by brokers that refused them", c.stored())
			}
			if tt.isolating {
				return
			}

			withACL(c)
			if err := c.r.SetCredentials("", goodCreds); err != nil {
				t.Fatal(err)
			}
			if got := c.r.CredentialRefusals(); tt.creds != goodCreds && len(got) != 0 {
				t.Errorf("refusals of the old credentials kept: %+v", got)
			}
			for i := range 6 {
				if res, err := c.send(t, "accepted"); err != nil || res.Attempts != 1 {
					t.Fatalf("send %d with good credentials: %+v, %v", i, res, err)
				}
			}
			if got := c.r.CredentialRefusals(); len(got) != 0 {
				t.Errorf("refusal kept after every broker accepted sends: %+v", got)
			}
		})
	}
}

// TestRefusedAnswerIsForgottenWhenTheBrokerAccepts proves a kept refusal ends with the broker's
// next acceptance of the same kind of request, so a condition built on it clears on its own once
// the broker's users are fixed.
func TestRefusedAnswerIsForgottenWhenTheBrokerAccepts(t *testing.T) {
	c := startCluster(t, 2, []string{"broker-a"})
	withACL(c)
	if err := c.r.SetCredentials("", goodCreds); err != nil {
		t.Fatal(err)
	}
	c.brokers["broker-a"].SetACL(&brokersim.ACL{Users: map[string]string{"someone-else": "x"}})
	if _, err := c.send(t, "refused"); err == nil {
		t.Fatal("send to a broker that does not know the user was stored")
	}
	if got := c.r.CredentialRefusals(); len(got) != 1 || got[0].Remark != "User:rocketmq is not found." {
		t.Fatalf("CredentialRefusals() = %+v, want the unknown user's refusal", got)
	}
	withACL(c)
	if _, err := c.send(t, "stored"); err != nil {
		t.Fatal(err)
	}
	if got := c.r.CredentialRefusals(); len(got) != 0 {
		t.Errorf("refusal kept after the broker accepted a send: %+v", got)
	}
}

// TestRefusedProbesIsolateNothing proves probes refused for their credentials, under
// PresetDetour, neither isolate a watched broker nor count against a held one (its isolation
// keeps the reason it had), and the held broker is readmitted by the first probe the broker
// accepts. Under RocketMQ5 with the same probing, a refused probe of a held broker is a failed
// one, as RocketMQ's detector has it (reason ProbeFailed).
func TestRefusedProbesIsolateNothing(t *testing.T) {
	tests := []struct {
		preset Preset
		reason fault.Reason
	}{{PresetDetour, fault.ReasonSendFailed}, {PresetRocketMQ5, fault.ReasonProbeFailed}}
	for _, tt := range tests {
		t.Run(string(tt.preset), func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b"}, withPreset(t, tt.preset, func(p *Policy) {
				p.Probe.Enabled, p.Probe.Routed, p.Probe.Interval = true, true, 100*time.Millisecond
			}))
			withACL(c)
			if err := c.r.SetCredentials("", wrongCreds); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "probes refused", func() bool {
				for _, rf := range c.r.CredentialRefusals() {
					if rf.Request == "GET_MAX_OFFSET" {
						return true
					}
				}
				return false
			})
			// Held: a send to broker-b fails, and broker-b, reachable all along, refuses the
			// probes' credentials. (Refusing its connections for a moment to make the send fail
			// would let a probe fail in that moment too, and isolate it as ProbeFailed.)
			c.r.tolerance("test").Update("broker-b", time.Second, fault.TransportError)
			rounds := c.brokers["broker-b"].Stats().RequestsByCode[remoting.GetMaxOffset]
			waitFor(t, "three more probes of broker-b", func() bool {
				return c.brokers["broker-b"].Stats().RequestsByCode[remoting.GetMaxOffset] >= rounds+3
			})
			held := map[string]fault.Reason{}
			for _, it := range c.r.Isolated("test") {
				held[it.Broker] = it.Reason
			}
			if r, ok := held["broker-a"]; ok {
				t.Errorf("broker-a, only ever refusing probes' credentials, isolated as %s", r)
			}
			if r, ok := held["broker-b"]; !ok || r != tt.reason {
				t.Errorf("broker-b held=%v reason %q, want held with reason %s", ok, r, tt.reason)
			}
			if tt.preset != PresetDetour {
				return
			}
			if err := c.r.SetCredentials("", goodCreds); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "broker-b readmitted by an accepted probe", func() bool { return len(c.r.Isolated("test")) == 0 })
		})
	}
}

// TestCreateTopicInSignsForABrokerNotYetRouted proves topic creation on a broker the runtime has
// no route or pod for yet is signed with the scope's credentials.
func TestCreateTopicInSignsForABrokerNotYetRouted(t *testing.T) {
	b, err := brokersim.StartBroker("broker-x", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.SetACL(&brokersim.ACL{Users: map[string]string{"rocketmq": "12345678"}})
	r := New(Options{HeartbeatInterval: -1})
	t.Cleanup(func() { r.Close() })
	if err := r.SetCredentials("ns/prod/", goodCreds); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.CreateTopic(ctx, b.Addr(), "orders", 4, 4, 6); err == nil {
		t.Fatal("unsigned topic creation accepted by a broker with authentication on")
	} else if _, kind, _ := CredentialRefusalOf(err); kind != remoting.AuthenticationRefused {
		t.Fatalf("unsigned creation: %v, want an authentication refusal", err)
	}
	if err := r.CreateTopicIn(ctx, "ns/prod/", b.Addr(), "orders", 4, 4, 6); err != nil {
		t.Fatalf("signed creation: %v", err)
	}
	if got := r.CredentialRefusals(); len(got) != 0 {
		t.Errorf("refusal kept after the broker accepted the creation: %+v", got)
	}
}

func TestSetCredentialsRefusesWhatNoBrokerAccepts(t *testing.T) {
	r := New(Options{HeartbeatInterval: -1})
	t.Cleanup(func() { r.Close() })
	if err := r.SetCredentials("ns/", &remoting.Credentials{AccessKey: "u"}); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("SetCredentials without a secret: %v, want ErrBadCredentials", err)
	}
}
