package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// configPeer is one broker whose configuration a test reads and changes: a real one changed with
// UPDATE_BROKER_CONFIG, or a brokersim changed with SetLimits.
type configPeer struct {
	name   string
	addr   string
	client *remoting.Client
	lower  func(ctx context.Context, t *testing.T) // waitTimeMillsInSendQueue to 0
}

// readConfig asks the peer for its configuration and fails the test on anything but an answer
// the parser reads.
func (p configPeer) readConfig(ctx context.Context, t *testing.T) remoting.BrokerConfig {
	t.Helper()
	resp, err := p.client.Invoke(ctx, p.addr, remoting.NewGetBrokerConfigRequest())
	if err != nil {
		t.Fatalf("%s: GET_BROKER_CONFIG: %v", p.name, err)
	}
	c, err := remoting.ParseBrokerConfig(resp)
	if err != nil {
		t.Fatalf("%s: GET_BROKER_CONFIG answer: %v", p.name, err)
	}
	return c
}

// runtimeTable polls the peer's runtime table until it gives one: a Java broker just started
// answers SYSTEM_ERROR until its statistics have a first sample.
func (p configPeer) runtimeTable(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	for {
		resp, err := p.client.Invoke(ctx, p.addr, remoting.NewGetBrokerRuntimeInfoRequest())
		if err != nil {
			t.Fatalf("%s: GET_BROKER_RUNTIME_INFO: %v", p.name, err)
		}
		table, err := remoting.ParseBrokerRuntimeInfo(resp)
		if err == nil {
			return table
		}
		if resp.Code != remoting.SystemError || ctx.Err() != nil {
			t.Fatalf("%s: runtime info: %v", p.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dataVersionCounter reads the counter of a configuration's DataVersion, or -1 when the version
// is not a JSON object with an integer counter.
func dataVersionCounter(version string) int64 {
	var v struct {
		Counter *int64 `json:"counter"`
	}
	if err := json.Unmarshal([]byte(version), &v); err != nil || v.Counter == nil {
		return -1
	}
	return *v.Counter
}

// configJourney is what a client sees of a broker's busy limits: the limits at start, whether the
// version is a DataVersion, the limits after waitTimeMillsInSendQueue is lowered to 0, whether
// that advanced the version, and what the broker's runtime table says of its send queue while
// nothing is sent (with the limit at 0, the only state in which such a broker refuses nothing).
func configJourney(ctx context.Context, t *testing.T, p configPeer) string {
	before := p.readConfig(ctx, t)
	p.lower(ctx, t)
	after := p.readConfig(ctx, t)
	quiet := remoting.PressureOf(p.runtimeTable(ctx, t))
	c0, c1 := dataVersionCounter(before.Version), dataVersionCounter(after.Version)
	return fmt.Sprintf("at start %v (data version %t); lowered %v (version advanced %t); quiet queue: size %d, head wait %d ms",
		remoting.LimitsOf(before), c0 >= 0, remoting.LimitsOf(after), c0 >= 0 && c1 > c0,
		quiet.SendQueueSize, quiet.SendQueueHeadWaitMillis)
}

// TestBrokerConfigCarriesTheBusyLimitsAsTheRealBroker reads the busy limits of a real RocketMQ
// broker of each line (5.x and 4.9) and of a brokersim through GET_BROKER_CONFIG, lowers
// waitTimeMillsInSendQueue to 0 as the fault benchmark's busy scenario does, and requires the
// same journey from both: RocketMQ's default limits, a data version that the change advances,
// the lowered limit read back, and a quiet send queue reported as empty with no head wait (so a
// broker whose limit is 0 is not judged pressed while nothing waits). A canary proves the
// comparison can fail: a configuration whose limit key is renamed reads differently.
func TestBrokerConfigCarriesTheBusyLimitsAsTheRealBroker(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			// RocketMQ's own 200 ms, as production and the fault benchmark run brokers, not the
			// harness's allowance for loaded test machines.
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{Settings: map[string]string{remoting.ConfigSendQueueWait: "200"}})
			// The deadline starts once the cluster is up: Start may wait minutes for another
			// test's cluster to release the machine.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rb := c.Brokers()[0]
			real := configPeer{name: "RocketMQ " + c.Dist.ServerVersion, addr: rb.Addr, client: c.Client(),
				lower: func(ctx context.Context, t *testing.T) {
					if err := rb.UpdateConfig(ctx, map[string]string{remoting.ConfigSendQueueWait: "0"}); err != nil {
						t.Fatalf("updateBrokerConfig: %v", err)
					}
				}}
			sb, err := brokersim.StartBrokerWith(rb.Name, "127.0.0.1:0", brokersim.Options{Cluster: rmqtest.ClusterName})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sb.Close() })
			simClient := remoting.NewClient(remoting.ClientOptions{})
			t.Cleanup(func() { _ = simClient.Close() })
			sim := configPeer{name: "brokersim", addr: sb.Addr(), client: simClient,
				lower: func(context.Context, *testing.T) {
					sb.SetLimits(remoting.BrokerLimits{SendQueueWaitMillis: 0, PageCacheBusyMillis: 1000})
				}}

			want := configJourney(ctx, t, real)
			got := configJourney(ctx, t, sim)
			t.Logf("%s: %s", real.name, want)
			const expected = "at start send queue wait 200 ms, page cache busy 1000 ms (data version true); " +
				"lowered send queue wait 0 ms, page cache busy 1000 ms (version advanced true); quiet queue: size 0, head wait 0 ms"
			if want != expected {
				t.Errorf("%s: %s\nwant %s", real.name, want, expected)
			}
			if got != want {
				t.Errorf("brokersim: %s\n%s: %s", got, real.name, want)
			}

			t.Run("canary: a configuration with a renamed limit key diverges", func(t *testing.T) {
				cfg := real.readConfig(ctx, t)
				before := remoting.LimitsOf(cfg)
				cfg.Entries["waitTimeMillisInSendQueue"] = cfg.Entries[remoting.ConfigSendQueueWait]
				delete(cfg.Entries, remoting.ConfigSendQueueWait)
				if after := remoting.LimitsOf(cfg); after == before {
					t.Fatalf("a renamed key reads as %v, the real broker's own limits", after)
				}
			})
		})
	}
}
