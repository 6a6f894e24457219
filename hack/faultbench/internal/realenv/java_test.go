package realenv

import (
	"slices"
	"testing"
	"time"

	"github.com/detourmq/detour/hack/faultbench/internal/scenario"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
)

// TestRealScenariosAndJavaRecords checks the real-broker schedules and the conversion of the Java
// producer's records onto the run's clock.
func TestRealScenariosAndJavaRecords(t *testing.T) {
	for _, n := range scenario.RealNames {
		sc, err := scenario.BuildRealScenario(n, 20*time.Second)
		// A scenario without a bad broker has no faulty span; its onset is the middle of the run.
		badBroker := len(sc.Faulty) > 0 && sc.Onset == 5*time.Second
		noBad := sc.NoBadBroker && len(sc.Faulty) == 0 && sc.Onset == 10*time.Second
		if err != nil || len(sc.Actions) == 0 || badBroker == noBad {
			t.Errorf("%s: %+v, %v", n, sc, err)
		}
	}
	sc, _ := scenario.BuildRealScenario("rolling", 20*time.Second)
	p := scenario.Params{Duration: 20 * time.Second, Rate: 200, Senders: 4, Drain: 10 * time.Second}
	d := &scenario.RunData{Scenario: sc, Params: p, Applied: []scenario.AppliedAction{
		{Note: "pod terminating", Scheduled: 5 * time.Second, Applied: 5 * time.Second, Done: 5 * time.Second},
		{Note: "graceful stop", Scheduled: 7 * time.Second, Applied: 7 * time.Second, Done: 9 * time.Second},
		{Note: "new broker registered", Applied: 9 * time.Second, Done: 17 * time.Second, Chained: true},
	}}
	d.Applied[0].Applied = 5200 * time.Millisecond // the pod mark came 200 ms late
	d.SettleFaulty()
	if w := d.Scenario.Faulty; len(w) != 1 || w[0].From != 5200*time.Millisecond || w[0].To != 17*time.Second {
		t.Errorf("rolling faulty span %+v, want 5.2 s (the mark, applied late) to 17 s (the new broker registered)", w)
	}
	fl, _ := scenario.BuildRealScenario("flapping", 20*time.Second)
	fd := &scenario.RunData{Scenario: fl, Params: p}
	for _, a := range fl.Actions {
		fd.Applied = append(fd.Applied, scenario.AppliedAction{Note: a.Note, Scheduled: a.At, Applied: a.At + 50*time.Millisecond})
	}
	fd.SettleFaulty()
	if w := fd.Scenario.Faulty; w[0].From != 5050*time.Millisecond || w[0].To != 8050*time.Millisecond || w[len(w)-1].To != 20*time.Second {
		t.Errorf("flapping faulty spans not moved to the applied steps: %+v", w)
	}
	if len(sc.Faulty) != 1 || sc.Faulty[0].To != 20*time.Second {
		t.Errorf("settleFaulty changed the shared scenario: %+v", sc.Faulty)
	}

	t0 := time.UnixMilli(1_700_000_000_000)
	sends := []rmqtest.JavaSend{{
		Slot: 10, StartMs: t0.UnixMilli() + 60, Start: time.UnixMilli(t0.UnixMilli() + 60), LatencyUs: 450_000, OK: true,
		Broker: scenario.BrokerA, Brokers: []string{scenario.BadBroker, scenario.BrokerA},
		Attempts: []rmqtest.JavaAttempt{{Broker: scenario.BadBroker, StartUs: 10, LatencyUs: 400_000}, {Broker: scenario.BrokerA, StartUs: 400_100, LatencyUs: 49_000, OK: true}},
	}}
	javaRecords(d, sends, t0)
	s := d.Sends[0]
	if s.Due != 50*time.Millisecond || s.Start != 60*time.Millisecond || s.Latency != 450*time.Millisecond || !slices.Contains(s.Tried, scenario.BadBroker) {
		t.Errorf("send %+v", s)
	}
	if len(d.Attempts) != 2 || d.Attempts[0].OK || d.Attempts[0].End != 460*time.Millisecond+10*time.Microsecond || !d.Attempts[1].OK {
		t.Errorf("attempts %+v", d.Attempts)
	}
}
