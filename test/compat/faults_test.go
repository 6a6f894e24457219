package compat_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/fault"
	"github.com/detourmq/detour/pkg/producer"
)

// record is one send of the traffic generator.
type record struct {
	sender int
	start  time.Time
	res    *producer.SendResult
	err    error
}

// traffic keeps senders sending to a topic, one message at a time each, until stopped.
type traffic struct {
	mu      sync.Mutex
	records []record
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startTraffic starts senders goroutines that each send a small message every interval. The
// traffic stops when the test ends, bounded in time and in count by the test itself.
func startTraffic(t *testing.T, r *producer.Runtime, topic string, senders int, interval time.Duration) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	for s := range senders {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-tr.stop:
					return
				case <-tick.C:
				}
				start := time.Now()
				res, err := r.Send(context.Background(), &producer.Message{Topic: topic, Body: []byte("fault traffic")})
				tr.mu.Lock()
				tr.records = append(tr.records, record{sender: s, start: start, res: res, err: err})
				tr.mu.Unlock()
			}
		}()
	}
	t.Cleanup(tr.halt)
	return tr
}

func (tr *traffic) halt() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	tr.wg.Wait()
}

// since returns the records of sends that started at or after from.
func (tr *traffic) since(from time.Time) []record {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []record
	for _, rec := range tr.records {
		if !rec.start.Before(from) {
			out = append(out, rec)
		}
	}
	return out
}

// failedOn counts, per sender, the sends that had an attempt on broker that did not store the
// message.
func failedOn(recs []record, broker string) map[int]int {
	out := map[int]int{}
	for _, rec := range recs {
		if rec.res == nil {
			continue
		}
		tried := rec.res.BrokersTried
		if i := slices.Index(tried, broker); i >= 0 && i < len(tried)-1 {
			out[rec.sender]++
		}
	}
	return out
}

func storedOn(recs []record, broker string) int {
	n := 0
	for _, rec := range recs {
		if rec.res != nil && rec.res.Broker == broker {
			n++
		}
	}
	return n
}

func failures(recs []record) []error {
	var errs []error
	for _, rec := range recs {
		if rec.err != nil {
			errs = append(errs, rec.err)
		}
	}
	return errs
}

func isolated(r *producer.Runtime, policy, broker string) bool {
	return slices.ContainsFunc(r.Isolated(policy), func(it fault.Item) bool { return it.Broker == broker })
}

// continued is how many sends a broker must store after a fault is isolated for traffic to count
// as continuing there: enough that the failure checks after it cover a real stretch of sends.
const continued = 20

// waitFor polls cond every 50 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 50*time.Millisecond, what, poll.True(cond))
}

// TestFaultsOnRealBrokers runs steady traffic under the Detour policy against three real brokers
// while one is paused (a black hole), resumed, killed and gracefully stopped: no send fails, a
// paused broker costs each sender at most one per-attempt timeout, dead and stopped brokers are
// isolated while traffic continues on the others, and a resumed broker returns after its
// probation's good probes (it was isolated for silence). A
// runtime that sends nothing but watches the routed brokers finds the paused and the killed
// broker silent too, and readmits the resumed one.
func TestFaultsOnRealBrokers(t *testing.T) {
	for _, line := range rmqtest.Lines {
		t.Run(line.String(), func(t *testing.T) {
			c := rmqtest.Start(t, line, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{}, rmqtest.BrokerConfig{})
			const topic, policy, senders = "DetourFaults", "detour", 4
			r := newRuntime(t, c, topic, 4, detourPolicy(policy))
			// A second runtime sends nothing and watches the routed brokers: what it learns is
			// what the name-server facade can publish for clusters whose traffic bypasses detour.
			watch := detourPolicy("watch")
			watch.Probe.Routed = true
			watcher := newRuntime(t, c, topic, 4, watch)
			watched := func(broker string) bool {
				return slices.ContainsFunc(watcher.Isolated(watch.Name), func(it fault.Item) bool {
					return it.Broker == broker && it.Reason == fault.ReasonProbeFailed
				})
			}
			a, b, d := c.Brokers()[0], c.Brokers()[1], c.Brokers()[2]
			tr := startTraffic(t, r, topic, senders, 10*time.Millisecond)
			warm := time.Now()
			waitFor(t, time.Minute, "traffic on every broker", func() bool {
				recs := tr.since(warm)
				return storedOn(recs, a.Name) > 0 && storedOn(recs, b.Name) > 0 && storedOn(recs, d.Name) > 0
			})

			t.Run("paused broker", func(t *testing.T) {
				from := time.Now()
				b.Pause()
				waitFor(t, time.Minute, b.Name+" isolated", func() bool { return isolated(r, policy, b.Name) })
				waitFor(t, time.Minute, b.Name+" found silent by the watcher, without traffic", func() bool { return watched(b.Name) })
				time.Sleep(3 * time.Second) // traffic runs on against the paused broker: the measured span
				recs := tr.since(from)
				if errs := failures(recs); len(errs) > 0 {
					t.Errorf("%d of %d sends failed while %s was paused; first: %v", len(errs), len(recs), b.Name, errs[0])
				}
				for s, n := range failedOn(recs, b.Name) {
					if n > 1 {
						t.Errorf("sender %d lost %d attempts to the paused broker, want at most one", s, n)
					}
				}
				t.Logf("paused: %d sends, failed attempts on %s per sender %v", len(recs), b.Name, failedOn(recs, b.Name))
			})

			t.Run("resumed broker returns after its probation", func(t *testing.T) {
				from := time.Now()
				b.Resume()
				waitFor(t, 20*time.Second, b.Name+" back in service", func() bool {
					return !isolated(r, policy, b.Name) && storedOn(tr.since(from), b.Name) > 0
				})
				waitFor(t, 20*time.Second, b.Name+" readmitted by the watcher", func() bool { return !isolated(watcher, watch.Name, b.Name) })
				if errs := failures(tr.since(from)); len(errs) > 0 {
					t.Errorf("%d sends failed after the resume; first: %v", len(errs), errs[0])
				}
			})

			t.Run("killed broker", func(t *testing.T) {
				from := time.Now()
				d.Kill()
				waitFor(t, time.Minute, d.Name+" isolated", func() bool { return isolated(r, policy, d.Name) })
				waitFor(t, time.Minute, d.Name+" found silent by the watcher", func() bool { return watched(d.Name) })
				isolatedAt := time.Now()
				waitFor(t, time.Minute, "traffic after the kill stored on both other brokers", func() bool {
					after := tr.since(isolatedAt)
					return storedOn(after, a.Name) >= continued && storedOn(after, b.Name) >= continued
				})
				recs := tr.since(from)
				if errs := failures(recs); len(errs) > 0 {
					t.Errorf("%d of %d sends failed after the kill; first: %v", len(errs), len(recs), errs[0])
				}
			})

			t.Run("gracefully stopped broker", func(t *testing.T) {
				from := time.Now()
				a.Stop()
				waitFor(t, time.Minute, a.Name+" isolated", func() bool { return isolated(r, policy, a.Name) })
				isolatedAt := time.Now()
				waitFor(t, time.Minute, "traffic after the stop stored on "+b.Name+", the broker left", func() bool {
					return storedOn(tr.since(isolatedAt), b.Name) >= continued
				})
				recs := tr.since(from)
				if errs := failures(recs); len(errs) > 0 {
					t.Errorf("%d of %d sends failed after the stop; first: %v", len(errs), len(recs), errs[0])
				}
			})
			tr.halt()
			t.Logf("%d sends in all", len(tr.since(warm)))
		})
	}
}
