package producer

import (
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

// TestABrokerHealedAfterAnOutageIsReadmittedOnANewConnection proves that a broker whose network
// went dark is readmitted within a few probe intervals of answering again (about 1.75 intervals,
// at most about 3.5: see DetourProbationProbes), even when the outage stranded the connection
// the runtime held to it, as a TCP connection in retransmission backoff stays silent for tens of
// seconds after the network heals: the probe that timed out in the outage retired that
// connection, so the probes after the heal go out on a new one. The bound checked is ten
// intervals, for a loaded machine; a stranded connection kept in use never readmits the broker.
func TestABrokerHealedAfterAnOutageIsReadmittedOnANewConnection(t *testing.T) {
	const interval = 400 * time.Millisecond
	for _, tc := range []struct {
		name  string
		fault brokersim.Fault
	}{
		{"a black hole", brokersim.Fault{BlackHole: true}},
		{"a black hole that strands the connections it held", brokersim.Fault{BlackHole: true, Strand: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 2, []string{"broker-a", "broker-b", "broker-c"}, withPolicy(func(p *Policy) {
				watchPolicy(true)(p)
				p.Probe.Interval = interval
				p.Probe.Timeout = 100 * time.Millisecond
			}))
			bad := c.brokers["broker-b"]
			waitFor(t, "broker-b probed while healthy", func() bool { return bad.Stats().Requests > 0 })
			bad.SetFault(tc.fault)
			waitFor(t, "broker-b held out", func() bool { return len(c.rec.isolationEvents("broker-b")) > 0 })
			bad.SetFault(brokersim.Fault{})
			healed := time.Now()
			waitFor(t, "broker-b readmitted", func() bool { return readmissions(c.rec.isolationEvents("broker-b")) > 0 })
			took := time.Since(healed)
			t.Logf("readmitted %v (%.1f probe intervals) after the heal", took.Round(time.Millisecond), float64(took)/float64(interval))
			if took > 10*interval {
				t.Fatalf("readmitted %v after the heal, more than ten probe intervals", took)
			}
		})
	}
}
