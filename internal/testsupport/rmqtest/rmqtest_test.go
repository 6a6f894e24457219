package rmqtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/remoting"
)

// routePerm returns the perm the name server publishes for topic on broker, or -1.
func routePerm(t *testing.T, c *rmqtest.Cluster, topic, broker string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rt, err := c.Route(ctx, topic)
	if err != nil {
		t.Fatalf("route of %s: %v", topic, err)
	}
	for _, q := range rt.QueueDatas {
		if q.BrokerName == broker {
			return q.Perm
		}
	}
	return -1
}

// eventually polls cond every 100 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 100*time.Millisecond, what, poll.True(cond))
}

// ping sends GET_MAX_OFFSET to the broker and reports whether it answered within d.
func ping(c *rmqtest.Cluster, b *rmqtest.Broker, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := b.MaxOffset(ctx, "TBW102", 0)
	return err
}

// TestHarnessFaultsOnRealProcesses proves each fault the harness offers does to a real broker what
// its name says, on both release lines.
func TestHarnessFaultsOnRealProcesses(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{NoAutoCreate: true})
			a, b := c.Brokers()[0], c.Brokers()[1]
			ctx := context.Background()

			// TBW102 exists only where auto-create is on: the name server publishes it for a alone.
			if got := routePerm(t, c, "TBW102", a.Name); got != 7 {
				t.Errorf("TBW102 perm on %s = %d, want 7 (read, write, inherit)", a.Name, got)
			}
			if got := routePerm(t, c, "TBW102", b.Name); got != -1 {
				t.Errorf("TBW102 on %s with auto-create off: perm %d, want absent", b.Name, got)
			}

			t.Run("brokers let sends wait in their queue as long as a busy machine needs", func(t *testing.T) {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				for _, br := range c.Brokers() {
					cfg, err := br.Config(cctx)
					if err != nil {
						t.Fatalf("config of %s: %v", br.Name, err)
					}
					if got, want := cfg["waitTimeMillsInSendQueue"], "10000"; got != want {
						t.Errorf("%s runs with waitTimeMillsInSendQueue=%q, want %s", br.Name, got, want)
					}
				}
			})

			t.Run("wipe and add write perm on the name server", func(t *testing.T) {
				if n, err := c.WipeWritePerm(ctx, a.Name); err != nil || n < 1 {
					t.Fatalf("wipeWritePerm = %d, %v", n, err)
				}
				if got := routePerm(t, c, "TBW102", a.Name); got&2 != 0 {
					t.Errorf("after wipeWritePerm perm = %d, want the write bit cleared", got)
				}
				if n, err := c.AddWritePerm(ctx, a.Name); err != nil || n < 1 {
					t.Fatalf("addWritePerm = %d, %v", n, err)
				}
				if got := routePerm(t, c, "TBW102", a.Name); got&2 == 0 {
					t.Errorf("after addWritePerm perm = %d, want the write bit set", got)
				}
			})

			t.Run("read-only broker through brokerPermission", func(t *testing.T) {
				if err := a.SetPermission(ctx, 4); err != nil {
					t.Fatal(err)
				}
				eventually(t, 10*time.Second, "route perm without write", func() bool { return routePerm(t, c, "TBW102", a.Name)&2 == 0 })
				if err := a.SetPermission(ctx, 6); err != nil {
					t.Fatal(err)
				}
				eventually(t, 10*time.Second, "route perm with write", func() bool { return routePerm(t, c, "TBW102", a.Name)&2 != 0 })
			})

			t.Run("pause is a black hole, resume answers", func(t *testing.T) {
				a.Pause()
				err := ping(c, a, 500*time.Millisecond)
				if !errors.Is(err, remoting.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("paused broker: %v, want a timeout (connection accepted, no answer)", err)
				}
				a.Resume()
				if err := ping(c, a, 10*time.Second); err != nil {
					t.Errorf("resumed broker: %v", err)
				}
			})

			t.Run("kill refuses, restart registers again", func(t *testing.T) {
				b.Kill()
				if err := ping(c, b, time.Second); !errors.Is(err, remoting.ErrConnect) && !errors.Is(err, remoting.ErrClosed) {
					t.Errorf("killed broker: %v, want connect refused or closed", err)
				}
				b.Restart()
				if err := ping(c, b, 5*time.Second); err != nil {
					t.Errorf("restarted broker: %v", err)
				}
			})

			t.Run("graceful stop unregisters", func(t *testing.T) {
				b.Stop()
				eventually(t, 10*time.Second, "broker gone from the name server", func() bool {
					info, err := c.ClusterInfo(ctx)
					if err != nil {
						return false
					}
					_, ok := info.BrokerAddrTable[b.Name]
					return !ok
				})
				// The JVM flags are enough for RocketMQ to unmap its store files on the way out.
				if b.LogContains("InaccessibleObjectException") {
					t.Errorf("the broker's shutdown hit a module access error: JVMFlags lack an --add-opens or --add-exports")
				}
			})
		})
	}
}
