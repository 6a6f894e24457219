package brokersim

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

func TestIdleTimeoutDefaultsToTheJavaServers(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{0, 120 * time.Second}, {-1, 0}, {-time.Hour, 0}, {time.Second, time.Second},
	} {
		if got := idleTimeout(tt.in); got != tt.want {
			t.Errorf("idleTimeout(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestIdleConnectionsAreClosed proves that brokers and name servers close a connection that has
// neither read nor written for the idle timeout, as a Java server does, that traffic keeps a
// connection open, and that a negative timeout never closes one.
func TestIdleConnectionsAreClosed(t *testing.T) {
	// Generous against the heartbeat period, so a loaded machine's scheduling delays do not
	// make a busy connection look idle.
	const idle = time.Second
	type server struct {
		addr       string
		idleClosed func() int64
	}
	broker := func(t *testing.T, d time.Duration) server {
		b := startBroker(t, "broker-a", Options{IdleTimeout: d})
		return server{b.Addr(), func() int64 { return b.Stats().IdleClosed }}
	}
	nameServer := func(t *testing.T, d time.Duration) server {
		n, err := StartNameServerWith("127.0.0.1:0", NameServerOptions{IdleTimeout: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		return server{n.Addr(), n.IdleClosed}
	}
	tests := []struct {
		name    string
		start   func(*testing.T, time.Duration) server
		timeout time.Duration
		busy    bool // heartbeat every idle/10 for three idle periods first
		closed  bool
	}{
		{"a quiet broker connection is closed", broker, idle, false, true},
		{"a busy broker connection stays open, then closes when quiet", broker, idle, true, true},
		{"a broker with a negative timeout never closes", broker, -1, false, false},
		{"a quiet name server connection is closed", nameServer, idle, false, true},
		{"a busy name server connection stays open, then closes when quiet", nameServer, idle, true, true},
		{"a name server with a negative timeout never closes", nameServer, -1, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := tt.start(t, tt.timeout)
			// Quiet time is measured from before the last thing the client does, so it can
			// only come out longer than what the server saw, never shorter.
			quietFrom := time.Now()
			nc, err := net.Dial("tcp", srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			fr := remoting.NewFrameReader(nc, 0, 0)
			if tt.busy {
				frame, err := remoting.Encode(remoting.NewHeartbeatRequest("c"))
				if err != nil {
					t.Fatal(err)
				}
				for end := time.Now().Add(3 * idle); time.Now().Before(end); time.Sleep(idle / 10) {
					quietFrom = time.Now()
					if _, err := nc.Write(frame); err != nil {
						t.Fatalf("write while busy: %v", err)
					}
					if _, err := fr.ReadCommand(); err != nil {
						t.Fatalf("read while busy: %v", err)
					}
				}
				if n := srv.idleClosed(); n != 0 {
					t.Fatalf("%d connections closed while busy", n)
				}
			}
			wait := 2 * idle
			if tt.closed {
				wait = idle + 5*time.Second
			}
			_ = nc.SetReadDeadline(time.Now().Add(wait))
			_, err = fr.ReadCommand()
			switch {
			case !tt.closed:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("read = %v, want the connection still open after %v", err, wait)
				}
				if n := srv.idleClosed(); n != 0 {
					t.Fatalf("%d connections closed as idle", n)
				}
			case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err):
				if quiet := time.Since(quietFrom); quiet < idle {
					t.Fatalf("closed after %v of quiet, want at least %v", quiet, idle)
				}
				waitFor(t, "idle close counted", func() bool { return srv.idleClosed() == 1 })
			default:
				t.Fatalf("read = %v, want the server to close the connection", err)
			}
		})
	}
}

// isReset reports whether err is a connection reset, which a close can look like.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
