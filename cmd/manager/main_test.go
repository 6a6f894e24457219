package main

import (
	"io"
	"strings"
	"testing"
)

// TestFlagsAreValidated proves bad values are refused with a message, before anything starts.
func TestFlagsAreValidated(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--shutdown-timeout=0s"}, "--shutdown-timeout must be positive"},
		{[]string{"--shutdown-delay=-1s"}, "--shutdown-delay not negative"},
		{[]string{"--namesrv-facade-idle-timeout=0s"}, "--namesrv-facade-idle-timeout must be positive"},
		{[]string{"--namesrv-facade-cluster=orders"}, "--namesrv-facade-cluster must be namespace/name"},
		{[]string{"--local"}, "flag provided but not defined: -local"},
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
