package rmqtest

import (
	"errors"
	"os"
	"testing"
)

// testing.TB is what the suites pass; it must stay a TB.
var _ TB = testing.TB(nil)

// TestRunnerGivesUpAsAnErrorAndCleansUp checks the command-side TB: Fatal ends the operation and
// comes back from Run as an error, Close runs cleanups last first and removes temporary folders,
// except after a failure, when they are kept for their logs.
func TestRunnerGivesUpAsAnErrorAndCleansUp(t *testing.T) {
	var r Runner
	var order []int
	r.Cleanup(func() { order = append(order, 1) })
	r.Cleanup(func() { order = append(order, 2) })
	dir := r.TempDir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if err := Run(func() {}); err != nil || r.Failed() {
		t.Fatalf("Run of nothing: %v, failed %v", err, r.Failed())
	}
	r.Close()
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Errorf("cleanups ran in order %v, want [2 1]", order)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary folder %s not removed: %v", dir, err)
	}

	var f Runner
	kept := f.TempDir()
	defer os.RemoveAll(kept)
	after := false
	err := Run(func() {
		f.Fatalf("broker %s did not start", "broker-a")
		after = true
	})
	var ft *Fatal
	if !errors.As(err, &ft) || ft.Msg != "broker broker-a did not start" || after || !f.Failed() {
		t.Fatalf("Run after Fatalf: err %v, continued %v, failed %v", err, after, f.Failed())
	}
	f.Close()
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a failed runner's folder was removed: %v", err)
	}
}

// TestStartWithoutDistributionFailsThroughTheRunner checks that a harness failure outside a test
// (no DETOUR_ROCKETMQ) reaches the command as an error that says what to do.
func TestStartWithoutDistributionFailsThroughTheRunner(t *testing.T) {
	t.Setenv(EnvDist, "")
	var r Runner
	defer r.Close()
	err := Run(func() { Start(&r, V5, BrokerConfig{}) })
	if err == nil || !r.Failed() {
		t.Fatalf("Start without %s: err %v", EnvDist, err)
	}
}
