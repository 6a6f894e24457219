package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/operator"
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
		{[]string{"--demo-rate=0"}, "--demo-rate and --demo-senders must be positive"},
		{[]string{"--demo-senders=-1"}, "--demo-rate and --demo-senders must be positive"},
		{[]string{"--demo-phase=100ms"}, "--demo-phase at least 1s"},
		{[]string{"--demo-duration=-1s"}, "--demo-duration not negative"},
		{[]string{"--shutdown-timeout=0s"}, "--shutdown-timeout must be positive"},
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
}

// TestLocalDefaultsApplyOnlyToFlagsLeftAlone proves the operator's flags the user did not set
// get the single-machine values (a plain loopback gateway without authentication, no metrics,
// no probes, no leader election), and a flag the user set keeps its value.
func TestLocalDefaultsApplyOnlyToFlagsLeftAlone(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want map[string]string
	}{
		{"nothing set", nil, map[string]string{
			"gateway-auth": "false", "gateway-secure": "false", "leader-elect": "false",
			"metrics-bind-address": "0", "health-probe-bind-address": "0", "gateway-bind-address": "127.0.0.1:0",
			"grpc-bind-address": "127.0.0.1:0"}},
		{"auth asked for", []string{"--gateway-auth=true"}, map[string]string{
			"gateway-auth": "true", "gateway-secure": "false"}},
		{"gateway address given", []string{"--gateway-bind-address=127.0.0.1:18080"}, map[string]string{
			"gateway-bind-address": "127.0.0.1:18080", "gateway-auth": "false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o operator.Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := localDefaults(fs); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %s, want %s", name, got, want)
				}
			}
		})
	}
	o, err := parseFlags([]string{"--gateway-auth=true"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.gatewayAuth {
		t.Error("the instructions would omit the bearer token for an explicit --gateway-auth=true")
	}
}
