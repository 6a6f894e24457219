package compat_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestMessageGroupsKeepTheirOrderThroughABrokerFreeze sends numbered messages of eight message
// groups, each group from its own sender that sends its next message only after the previous one
// was stored (resending one that failed), while one broker's JVM is stopped (SIGSTOP) and later
// continued. RocketMQ's own Java consumer then reads every group from one queue, in the order
// sent once copies of a resent message (same msgId, stored more than once when an attempt timed
// out on the frozen broker and was stored when it continued) are dropped, as consumers drop them;
// and the groups of the other broker kept sending while the first was frozen.
func TestMessageGroupsKeepTheirOrderThroughABrokerFreeze(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
			const topic, perGroup = "DetourOrdered", 30
			r := newRuntime(t, c, topic, 2, detourPolicy("ordered"))
			frozen := c.Brokers()[0]
			groups, home := groupsOnEveryBroker(t, r, topic, 8)

			var freezing atomic.Bool
			var storedAll, storedWhileFrozen atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, len(groups))
			for _, g := range groups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- sendGroup(r, topic, g, perGroup, func() {
						storedAll.Add(1)
						if freezing.Load() && home[g] != frozen.Name {
							storedWhileFrozen.Add(1)
						}
					})
				}()
			}
			// Traffic before the freeze: every group under way.
			for deadline := time.Now().Add(30 * time.Second); storedAll.Load() < int64(3*len(groups)); {
				if time.Now().After(deadline) {
					t.Fatalf("only %d messages stored in 30 s", storedAll.Load())
				}
				time.Sleep(10 * time.Millisecond) // the poll interval; the count is the synchronisation
			}
			freezing.Store(true)
			frozen.Pause()
			time.Sleep(3 * time.Second) // the freeze's length, not synchronisation
			frozen.Resume()
			freezing.Store(false)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if storedWhileFrozen.Load() == 0 {
				t.Errorf("no message of a group on another broker was stored while %s was frozen", frozen.Name)
			}

			got := c.Consume(t, context.Background(), topic, len(groups)*perGroup, 90*time.Second)
			checkGroupOrder(t, got, groups, home, perGroup)
		})
	}
}

// groupsOnEveryBroker finds n message groups, half of them on each broker of r's route, by
// sending one probe message per group and noting where it went; the probes carry seq -1.
func groupsOnEveryBroker(t *testing.T, r *producer.Runtime, topic string, n int) ([]string, map[string]string) {
	t.Helper()
	home := map[string]string{}
	perBroker := map[string]int{}
	var groups []string
	for i := 0; len(groups) < n && i < 1000; i++ {
		g := fmt.Sprintf("customer-%d", i)
		res, err := r.SendOrdered(context.Background(), &producer.Message{Topic: topic, Body: []byte("probe"),
			Properties: map[string]string{"seq": "-1"}}, g)
		if err != nil {
			t.Fatal(err)
		}
		if perBroker[res.Broker] >= n/2 {
			continue
		}
		perBroker[res.Broker]++
		home[g] = res.Broker
		groups = append(groups, g)
	}
	if len(groups) != n {
		t.Fatalf("found %d groups over the brokers (%v), want %d", len(groups), perBroker, n)
	}
	return groups, home
}

// sendGroup sends messages 0..count-1 of group in order, each only once the previous one was
// stored, resending a failed one (as an application keeping a group's order does) for up to a
// minute; stored is called after each stored message.
func sendGroup(r *producer.Runtime, topic, group string, count int, stored func()) error {
	deadline := time.Now().Add(time.Minute)
	for seq := 0; seq < count; {
		// A resend keeps the message's id, so a consumer can drop the copies a timeout leaves.
		m := &producer.Message{Topic: topic, Body: []byte(group + "/" + strconv.Itoa(seq)),
			Properties: map[string]string{"seq": strconv.Itoa(seq), remoting.PropertyUniqKey: remoting.NewUniqID()}}
		for {
			_, err := r.SendOrdered(context.Background(), m, group)
			if err == nil {
				break
			}
			var oe *producer.OrderedSendError
			if !errors.As(err, &oe) {
				return fmt.Errorf("group %s message %d: not an ordered send's error: %w", group, seq, err)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("group %s message %d still failing after a minute: %w", group, seq, err)
			}
			time.Sleep(100 * time.Millisecond) // the application's pause before resending
		}
		stored()
		seq++
	}
	return nil
}

// checkGroupOrder requires every group's messages on one broker's queue, read in queue order as
// 0, 1, ..., count-1 once later copies of a msgId are dropped.
func checkGroupOrder(t *testing.T, got []rmqtest.Consumed, groups []string, home map[string]string, count int) {
	t.Helper()
	slices.SortFunc(got, func(a, b rmqtest.Consumed) int {
		if a.BrokerName != b.BrokerName {
			return cmpString(a.BrokerName, b.BrokerName)
		}
		if a.QueueID != b.QueueID {
			return a.QueueID - b.QueueID
		}
		return int(a.QueueOffset - b.QueueOffset)
	})
	for _, g := range groups {
		var seqs []int
		queue := ""
		seen := map[string]bool{}
		copies := 0
		for _, m := range got {
			if m.Properties["__SHARDINGKEY"] != g || m.Properties["seq"] == "-1" {
				continue
			}
			if seen[m.MsgID] {
				copies++
				continue
			}
			seen[m.MsgID] = true
			q := fmt.Sprintf("%s/%d", m.BrokerName, m.QueueID)
			if queue != "" && q != queue {
				t.Errorf("group %s read from %s and %s", g, queue, q)
			}
			queue = q
			seq, _ := strconv.Atoi(m.Properties["seq"])
			seqs = append(seqs, seq)
		}
		want := make([]int, count)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(seqs, want) {
			t.Errorf("group %s (broker %s) read back in the order %v", g, home[g], seqs)
		}
		if copies > 0 {
			t.Logf("group %s (broker %s): %d copies of resent messages dropped", g, home[g], copies)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
