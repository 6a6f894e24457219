package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestForcedStopRunsTheRegisteredStopWithinItsTimeout proves a second interrupt runs what the
// local demo registered (stopping the control plane), does nothing when nothing is registered,
// and does not hang the exit on a stop that never returns.
func TestForcedStopRunsTheRegisteredStopWithinItsTimeout(t *testing.T) {
	var f forcedStop
	f.run(time.Second) // nothing registered: returns at once

	ran := make(chan struct{})
	f.set(func() { close(ran) })
	f.run(time.Minute)
	select {
	case <-ran:
	default:
		t.Fatal("the registered stop did not run")
	}

	block := make(chan struct{})
	defer close(block)
	f.set(func() { <-block })
	start := time.Now()
	f.run(50 * time.Millisecond)
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("a stop that never returns held the exit for %s", waited)
	}
}

// TestFlagsAreValidated proves bad values are refused with a message, before anything starts.
func TestFlagsAreValidated(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--shutdown-timeout=0s"}, "--shutdown-timeout must be positive"},
		{[]string{"--shutdown-delay=-1s"}, "--shutdown-delay not negative"},
		{[]string{"--namesrv-facade-idle-timeout=0s"}, "--namesrv-facade-idle-timeout must be positive"},
		{[]string{"--local", "--demo-rate=0"}, "--demo-rate and --demo-senders must be positive"},
		{[]string{"--local", "--demo-phase=100ms"}, "--demo-phase at least 1s"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parseFlags(%v) = %v, want %q", tc.args, err, tc.wantErr)
			}
		})
	}
	o, err := parseFlags([]string{"--local"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lo := localDefaults(o)
	if lo.gatewayAuth || lo.gatewaySecure || lo.leaderElect || lo.metricsAddr != "0" || !strings.HasPrefix(lo.gatewayAddr, "127.0.0.1:") {
		t.Errorf("local defaults %+v; want a plain loopback gateway without auth, no metrics, no leader election", lo)
	}
	o, _ = parseFlags([]string{"--local", "--gateway-auth=true"}, io.Discard)
	if !localDefaults(o).gatewayAuth {
		t.Error("--local overrode an explicit --gateway-auth=true")
	}
}
