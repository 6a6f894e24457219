package producer

import (
	"fmt"
	"testing"
	"time"
)

// recvEvent waits for the next event up to a generous deadline (the runtime never sleeps to
// deliver; the deadline only bounds a broken test).
func recvEvent(t *testing.T, ch <-chan IsolationEvent) IsolationEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("events channel closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return IsolationEvent{}
}

func TestEventQueueNeverBlocksAndEndsWithLatestStatePerBroker(t *testing.T) {
	q := newEventQueue(NopMetrics{})
	defer q.close()
	var seq uint64
	next := func() uint64 { seq++; return seq }
	// Fill the channel, then keep flipping a few brokers with nobody reading: push must return
	// every time (this loop would hang otherwise).
	for i := 0; i < EventBuffer; i++ {
		q.push(1, IsolationEvent{Policy: "p", Broker: fmt.Sprintf("fill-%d", i), Isolated: true, Seq: next()})
	}
	const flips = 1000
	for i := 0; i < flips; i++ {
		for _, b := range []string{"a", "b", "c"} {
			q.push(1, IsolationEvent{Policy: "p", Broker: b, Isolated: i%2 == 0, Seq: next()})
		}
	}
	q.push(1, IsolationEvent{Policy: "p", Broker: "a", Isolated: true, Seq: next()}) // a's final state differs from b and c
	for i := 0; i < EventBuffer; i++ {
		if ev := recvEvent(t, q.out); ev.Broker != fmt.Sprintf("fill-%d", i) {
			t.Fatalf("event %d: %+v, want the fill events first, in order", i, ev)
		}
	}
	// One event may have been in the pump's hands when coalescing started; after it, each broker
	// appears with its latest state. Read until the queue is drained.
	final := map[string]bool{}
	n := 0
	deadline := time.Now().Add(10 * time.Second)
	for !q.drained() {
		if time.Now().After(deadline) {
			t.Fatal("queue never drained")
		}
		select {
		case ev := <-q.out:
			final[ev.Broker] = ev.Isolated
			n++
		case <-time.After(5 * time.Millisecond): // re-check drained: the pump may be between steps
		}
	}
	if len(final) != 3 || !final["a"] || final["b"] || final["c"] {
		t.Fatalf("latest states %v, want a isolated, b and c not", final)
	}
	if n > 4 {
		t.Fatalf("%d events after the fill for 3 brokers, want at most 4", n)
	}
	if q.coalesced.Load() == 0 {
		t.Fatal("nothing counted as coalesced")
	}
}

func TestEventQueueKeepsOrderPerBroker(t *testing.T) {
	q := newEventQueue(NopMetrics{})
	defer q.close()
	var want []bool
	for i := 0; i < EventBuffer+10; i++ {
		iso := i%3 != 0
		q.push(1, IsolationEvent{Broker: fmt.Sprintf("b%d", i), Isolated: iso})
		want = append(want, iso)
	}
	for i := range want {
		ev := recvEvent(t, q.out)
		if ev.Broker != fmt.Sprintf("b%d", i) || ev.Isolated != want[i] {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
}

func TestEventQueueCloseClosesChannelAndDropsLaterPushes(t *testing.T) {
	q := newEventQueue(NopMetrics{})
	for i := 0; i < EventBuffer+5; i++ {
		q.push(1, IsolationEvent{Broker: fmt.Sprintf("b%d", i)})
	}
	q.close()
	q.push(1, IsolationEvent{Broker: "late"})
	n := 0
	for ev := range q.out {
		if ev.Broker == "late" {
			t.Fatal("event pushed after close was delivered")
		}
		n++
	}
	if n < EventBuffer {
		t.Fatalf("only %d buffered events readable after close", n)
	}
}

// drained reports whether every pushed event has been read.
func (q *eventQueue) drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) == 0 && !q.inflight && len(q.out) == 0
}

func TestEventQueueDropsChangesOlderThanOneAlreadyQueued(t *testing.T) {
	q := newEventQueue(NopMetrics{})
	defer q.close()
	q.push(1, IsolationEvent{Policy: "p", Broker: "a", Isolated: true, Seq: 5})
	q.push(1, IsolationEvent{Policy: "p", Broker: "a", Isolated: false, Seq: 4}) // a late callback
	q.push(2, IsolationEvent{Policy: "p", Broker: "a", Isolated: false, Seq: 1}) // a new table of p
	if ev := recvEvent(t, q.out); ev.Seq != 5 || !ev.Isolated {
		t.Fatalf("first event %+v", ev)
	}
	if ev := recvEvent(t, q.out); ev.Seq != 1 || ev.Isolated {
		t.Fatalf("second event %+v", ev)
	}
	select {
	case ev := <-q.out:
		t.Fatalf("stale event delivered: %+v", ev)
	default:
	}
}
