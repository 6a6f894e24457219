package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/brokersim"
)

// TestDetourctlPingNeedsAnAnswerNotAConnection: ping succeeds when a broker or name server
// answers, and fails for a peer that accepts the connection but never answers (as a stopped JVM
// does) and for an address nobody listens on.
func TestDetourctlPingNeedsAnAnswerNotAConnection(t *testing.T) {
	broker := startBrokers(t, "TopicTest", 1, "broker-a")["broker-a"]
	ns, err := brokersim.StartNameServer("127.0.0.1:0", broker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() { // accept and hold, never answer
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := closed.Addr().String()
	closed.Close()

	cases := []struct {
		name, addr string
		want       int
		says       string
	}{
		{"a broker answers", broker.Addr(), 0, "answered code"},
		{"a name server answers", ns.Addr(), 0, "answered code 0"},
		{"a silent peer fails", silent.Addr().String(), 1, "detourctl ping: " + silent.Addr().String()},
		{"nobody listening fails", nobody, 1, "connect"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := run(context.Background(), []string{"ping", "--timeout", "1s", tc.addr}, nil, &stdout, &stderr)
			if got != tc.want {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", got, tc.want, stdout.String(), stderr.String())
			}
			if out := stdout.String() + stderr.String(); !strings.Contains(out, tc.says) {
				t.Errorf("output %q does not say %q", out, tc.says)
			}
		})
	}
}

// TestDetourctlPingRefusesBadUsage: no address, two addresses or a zero timeout exit 2.
func TestDetourctlPingRefusesBadUsage(t *testing.T) {
	for _, args := range [][]string{{"ping"}, {"ping", "a:1", "b:2"}, {"ping", "--timeout", "0s", "a:1"}} {
		var stdout, stderr bytes.Buffer
		if got := run(context.Background(), args, nil, &stdout, &stderr); got != 2 {
			t.Errorf("%v: exit %d, want 2", args, got)
		}
	}
}
