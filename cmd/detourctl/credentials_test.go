package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
)

// TestDetourctlSendSignsWithTheGivenCredentials proves detourctl send signs its topic creation
// and sends with credentials from the environment or the flags, and that a broker's refusal of
// them is shown with the broker's remark.
func TestDetourctlSendSignsWithTheGivenCredentials(t *testing.T) {
	b, err := brokersim.StartBroker("broker-a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	b.SetACL(&brokersim.ACL{Users: map[string]string{"detour": "s3cret"}})
	base := []string{"send", "--broker", "broker-a=" + b.Addr(), "--topic", "Signed", "--create-topic", "--count", "3", "--preset", "Detour"}
	tests := []struct {
		name   string
		env    map[string]string
		flags  []string
		code   int
		stderr string
	}{
		{"environment", map[string]string{envAccessKey: "detour", envSecretKey: "s3cret"}, nil, 0, ""},
		{"flags", nil, []string{"--access-key", "detour", "--secret-key", "s3cret"}, 0, ""},
		{"a flag overrides the environment", map[string]string{envAccessKey: "detour", envSecretKey: "s3cret"},
			[]string{"--secret-key", "wrong"}, 1, "check signature failed."},
		{"none", nil, nil, 1, "username cannot be null."},
		{"an access key alone", nil, []string{"--access-key", "detour"}, 2, "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envAccessKey, tt.env[envAccessKey])
			t.Setenv(envSecretKey, tt.env[envSecretKey])
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(append([]string{}, base...), tt.flags...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}
