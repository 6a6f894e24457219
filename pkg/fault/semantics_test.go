package fault

import (
	"strings"
	"testing"
	"time"
)

// The orders below were printed by java.util.concurrent.ConcurrentHashMap (OpenJDK 17) created
// with an initial capacity of 16, as RocketMQ's LatencyFaultToleranceImpl creates it, after the
// same insertions (putIfAbsent) and removals ("-name"), iterating its keys.
func TestItemOrderIsJavaConcurrentHashMapOrder(t *testing.T) {
	seq := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(prefix)
			b.WriteString(itoa(i))
		}
		return b.String()
	}
	tests := []struct {
		name, ops, want string
	}{
		{"three brokers", "broker-a,broker-b,broker-c", "broker-b,broker-c,broker-a"},
		{"single letters", "a,b,c,d,e", "a,b,c,d,e"},
		{"removed and added again goes to the end of its bin", "broker-c,broker-a,broker-b,-broker-a,broker-a",
			"broker-b,broker-c,broker-a"},
		{"colliding hashes keep insertion order", "AaAa,BBBB,AaBB,BBAa,x", "x,AaAa,BBBB,AaBB,BBAa"},
		{"one resize at 24 items splits bins", seq("broker-", 30),
			"broker-2,broker-3,broker-0,broker-1,broker-24,broker-25,broker-22,broker-23,broker-20,broker-21," +
				"broker-28,broker-29,broker-26,broker-27,broker-13,broker-14,broker-11,broker-8,broker-12,broker-9," +
				"broker-6,broker-10,broker-7,broker-4,broker-5,broker-19,broker-17,broker-18,broker-15,broker-16"},
		{"removals after a resize", seq("broker-", 30) + ",-broker-3,-broker-24,broker-3,broker-x",
			"broker-2,broker-3,broker-0,broker-1,broker-25,broker-22,broker-23,broker-20,broker-21,broker-28," +
				"broker-29,broker-26,broker-27,broker-13,broker-14,broker-11,broker-8,broker-x,broker-12,broker-9," +
				"broker-6,broker-10,broker-7,broker-4,broker-5,broker-19,broker-17,broker-18,broker-15,broker-16"},
		{"two resizes", seq("b", 61),
			"b10,b54,b53,b12,b56,b11,b55,b14,b58,b13,b57,b16,b15,b59,b18,b17,b19,b0,b1,b2,b3,b4,b5,b6,b7,b8,b9," +
				"b60,b21,b20,b23,b22,b25,b24,b27,b26,b29,b28,b30,b32,b31,b34,b33,b36,b35,b38,b37,b39,b41,b40,b43," +
				"b42,b45,b44,b47,b46,b49,b48,b50,b52,b51"},
		{"a ninth name in one bin of a small table grows it fourfold", "b1,AaAaAaAa,AaAaAaBB,AaAaBBAa,AaAaBBBB," +
			"AaBBAaAa,AaBBAaBB,AaBBBBAa,AaBBBBBB,BBAaAaAa,b2,q",
			"b1,b2,q,AaAaAaAa,AaAaAaBB,AaAaBBAa,AaAaBBBB,AaBBAaAa,AaBBAaBB,AaBBBBAa,AaBBBBBB,BBAaAaAa"},
		{"non-ASCII names hash by UTF-16 units", "AaAaAa,AaAaBB,AaBBAa,AaBBBB,BBAaAa,BBAaBB,BBBBAa,BBBBBB," +
			"AaAaAaAa,brokér-ü,b2",
			"AaAaAa,AaAaBB,AaBBAa,AaBBBB,BBAaAa,BBAaBB,BBBBAa,BBBBBB,AaAaAaAa,b2,brokér-ü"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m itemOrder
			entries := map[string]*Entry{}
			for _, op := range strings.Split(tc.ops, ",") {
				if name, ok := strings.CutPrefix(op, "-"); ok {
					m.remove(entries[name])
					continue
				}
				e := entries[op]
				if e == nil {
					e = &Entry{name: op}
					entries[op] = e
				}
				m.insert(e)
			}
			var got []string
			for _, e := range m.items() {
				got = append(got, e.name)
			}
			if g := strings.Join(got, ","); g != tc.want {
				t.Errorf("order\n got %s\nwant %s", g, tc.want)
			}
		})
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// Known java.lang.String hash codes.
func TestJavaStringHash(t *testing.T) {
	for s, want := range map[string]int32{"": 0, "a": 97, "Aa": 2112, "BB": 2112, "broker-a": 372697965,
		"hello world, this overflows": 161437415} {
		if got := javaStringHash(s); got != want {
			t.Errorf("hash(%q) = %d, want %d", s, got, want)
		}
	}
	// "é" is one UTF-16 unit (233), "😀" two (a surrogate pair).
	if got, want := javaStringHash("é"), int32(233); got != want {
		t.Errorf("hash(é) = %d, want %d", got, want)
	}
	if got, want := javaStringHash("😀"), int32(0xD83D*31+0xDE00); got != want {
		t.Errorf("hash(😀) = %d, want %d", got, want)
	}
}

// Under RocketMQ 4.x every update sets the isolation end: a fast success ends an isolation, and a
// slow success after a failure shortens it to the slow send's isolation (LatencyFaultToleranceImpl
// 4.9.8 sets startTimestamp = now + duration on every update).
func TestRocketMQ4UpdatesSetTheIsolationEnd(t *testing.T) {
	tol, clk, rec := newTol(t, Options{Semantics: SemanticsRocketMQ4, Table: mustPreset(t, PresetRocketMQ4)})
	tol.Update("A", ms(600), Success) // 30 s
	wantAvailable(t, tol, map[string]bool{"A": false})
	clk.Advance(time.Second)
	tol.Update("A", ms(10), Success)
	wantAvailable(t, tol, map[string]bool{"A": true})
	if got := changeSummary(rec.take()); strings.Join(got, " ") != "+A -A" {
		t.Errorf("changes %v, want [+A -A]", got)
	}

	tol.Update("B", 0, TransportError) // 600 s
	if got := mustLookup(t, tol, "B").Until.Sub(clk.Now()); got != 10*time.Minute {
		t.Fatalf("failure isolated B for %v, want 10m", got)
	}
	tol.Update("B", ms(600), Success)
	it := mustLookup(t, tol, "B")
	if got := it.Until.Sub(clk.Now()); got != 30*time.Second {
		t.Errorf("a 600 ms success after a failure left B isolated %v, want 30s", got)
	}
	if it.Reason != ReasonSlowSend || !it.Reachable {
		t.Errorf("B after the slow success: %+v", it)
	}
}

// How each outcome updates an item, per line (DefaultMQProducerImpl.sendDefaultImpl of 4.9.8 and
// 5.3.3): 4.x isolates client errors with the failure latency and has no reachable flag.
func TestOutcomesPerLine(t *testing.T) {
	tests := []struct {
		name      string
		sem       Semantics
		latency   time.Duration
		outcome   Outcome
		isolation time.Duration
		reachable bool
		reason    Reason
	}{
		{"5.x client error uses the measured latency", SemanticsRocketMQ5, ms(10), ClientError, 0, true, ""},
		{"5.x interrupted uses the measured latency", SemanticsRocketMQ5, ms(600), Interrupted, ms(2000), true, ReasonSlowSend},
		{"5.x broker error is unreachable", SemanticsRocketMQ5, ms(10), BrokerError, ms(10000), false, ReasonBrokerError},
		{"4.x success", SemanticsRocketMQ4, ms(1000), Success, ms(60000), true, ReasonSlowSend},
		{"4.x client error isolates ten minutes", SemanticsRocketMQ4, ms(5), ClientError, ms(600000), true, ReasonSendFailed},
		{"4.x interrupted uses the measured latency", SemanticsRocketMQ4, ms(5), Interrupted, 0, true, ""},
		{"4.x transport error", SemanticsRocketMQ4, ms(5), TransportError, ms(600000), true, ReasonSendFailed},
		{"4.x broker error has no reachable flag", SemanticsRocketMQ4, ms(5), BrokerError, ms(600000), true, ReasonBrokerError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := mustPreset(t, PresetRocketMQ5)
			if tc.sem == SemanticsRocketMQ4 {
				tab = mustPreset(t, PresetRocketMQ4)
			}
			tol, _, _ := newTol(t, Options{Semantics: tc.sem, Table: tab})
			tol.Update("A", tc.latency, tc.outcome)
			it := mustLookup(t, tol, "A")
			var got time.Duration
			if !it.Until.IsZero() {
				got = it.Until.Sub(t0)
			}
			if got != tc.isolation {
				t.Errorf("isolation %v, want %v", got, tc.isolation)
			}
			if it.Reachable != tc.reachable || it.Reason != tc.reason || it.Latency != tc.latency {
				t.Errorf("item %+v, want reachable %v, reason %q, latency %v", it, tc.reachable, tc.reason, tc.latency)
			}
		})
	}
}

// UpdateFaultItem takes RocketMQ's own arguments: 5.x keeps the reachable flag it is given, 4.x
// has none.
func TestUpdateFaultItemTakesRocketMQsArguments(t *testing.T) {
	tol5, _, _ := newTol(t, Options{})
	tol5.UpdateFaultItem("A", ms(3), true, true)
	tol5.UpdateFaultItem("B", ms(3), true, false)
	tol5.UpdateFaultItem("C", ms(700), false, true)
	for b, want := range map[string]struct {
		until     time.Duration
		reachable bool
		reason    Reason
	}{"A": {10 * time.Second, true, ReasonSendFailed}, "B": {10 * time.Second, false, ReasonBrokerError},
		"C": {2 * time.Second, true, ReasonSlowSend}} {
		it := mustLookup(t, tol5, b)
		if it.Until.Sub(t0) != want.until || it.Reachable != want.reachable || it.Reason != want.reason {
			t.Errorf("5.x %s: %+v, want %+v", b, it, want)
		}
	}
	tol4, _, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4, Table: mustPreset(t, PresetRocketMQ4)})
	tol4.UpdateFaultItem("A", ms(3), true, false)
	if it := mustLookup(t, tol4, "A"); !it.Reachable || it.Until.Sub(t0) != 10*time.Minute {
		t.Errorf("4.x A: %+v", it)
	}
}

// RocketMQ's default (sendLatencyFaultEnable=false) records nothing; switching a table to it
// forgets what it learnt, but keeps pod marks.
func TestDisabledRecordsNothing(t *testing.T) {
	tol, _, _ := newTol(t, Options{Semantics: SemanticsDisabled, RespectPodHealth: true})
	tol.Update("A", ms(20000), TransportError)
	tol.UpdateFaultItem("A", ms(20000), true, false)
	if _, ok := tol.Lookup("A"); ok || !tol.Available("A") {
		t.Fatal("Disabled recorded an update")
	}
	tol.SetPodState("B", PodNotReady)
	wantAvailable(t, tol, map[string]bool{"B": false})

	tol2, _, rec2 := newTol(t, Options{RespectPodHealth: true})
	tol2.Update("A", ms(1), BrokerError)
	tol2.SetPodState("B", PodTerminating)
	rec2.take()
	tol2.Configure(Options{Semantics: SemanticsDisabled, RespectPodHealth: true, OnChange: rec2.on})
	wantAvailable(t, tol2, map[string]bool{"A": true, "B": false})
	if !tol2.Reachable("A") {
		t.Error("A still unreachable after switching to Disabled")
	}
	if got := changeSummary(rec2.take()); strings.Join(got, " ") != "-A" {
		t.Errorf("changes %v, want [-A]", got)
	}
	tol2.Restore([]Item{{Broker: "C", Reason: ReasonSendFailed, Until: t0.Add(time.Minute)}})
	wantAvailable(t, tol2, map[string]bool{"C": true})
}

// pickOneAtLeast of RocketMQ 4.9.8: available items first, then lower latency, then earlier end;
// one of the better half, round robin; the map's order among equals.
func TestPickOneAtLeast(t *testing.T) {
	t.Run("no items", func(t *testing.T) {
		tol, _, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4})
		tol.Entry("A") // a handle is no item
		if b, ok := tol.PickOneAtLeast(); ok {
			t.Errorf("picked %q from an empty table", b)
		}
	})
	t.Run("a single item is picked", func(t *testing.T) {
		tol, _, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4})
		tol.Update("A", ms(20000), TransportError)
		if b, ok := tol.PickOneAtLeast(); !ok || b != "A" {
			t.Errorf("picked %q %v", b, ok)
		}
	})
	t.Run("two items: always the lower latency", func(t *testing.T) {
		tol, _, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4, Table: mustPreset(t, PresetRocketMQ4)})
		tol.Update("a", ms(800), Success)         // 30 s
		tol.Update("b", ms(3000), TransportError) // 600 s
		for range 10 {
			if b, _ := tol.PickOneAtLeast(); b != "a" {
				t.Fatalf("picked %q, want a (lower latency)", b)
			}
		}
	})
	t.Run("available before isolated, then earlier end", func(t *testing.T) {
		tol, clk, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4, Table: mustPreset(t, PresetRocketMQ4)})
		tol.Update("slow", ms(900), Success)      // isolated 30 s, latency 900
		tol.Update("fast", ms(5), TransportError) // isolated 600 s, latency 5
		tol.Update("ok", ms(2000), Success)       // isolated 120 s, latency 2000
		tol.Update("late", ms(5), TransportError) // as "fast" but a second later
		clk.Advance(119 * time.Second)
		tol.Update("late", ms(5), TransportError)
		clk.Advance(time.Second) // "ok" is available again, "slow" too
		tol.SeedPickIndex(-1)    // next index 0
		var got []string
		for range 4 {
			b, _ := tol.PickOneAtLeast()
			got = append(got, b)
		}
		// sorted: slow (available, 900), ok (available, 2000), fast (5, earlier end), late;
		// half = 2, so the picks alternate between the first two.
		if strings.Join(got, " ") != "slow ok slow ok" {
			t.Errorf("picks %v, want [slow ok slow ok]", got)
		}
	})
	t.Run("equals keep the map's order", func(t *testing.T) {
		tol, _, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4})
		for _, b := range []string{"broker-a", "broker-b", "broker-c", "broker-d"} {
			tol.Update(b, ms(7), TransportError)
		}
		tol.SeedPickIndex(0) // next index 1
		// Java's map iterates broker-d, broker-b, broker-c, broker-a; half is 2.
		if b, _ := tol.PickOneAtLeast(); b != "broker-b" {
			t.Errorf("picked %q, want broker-b", b)
		}
		if b, _ := tol.PickOneAtLeast(); b != "broker-d" {
			t.Errorf("picked %q, want broker-d", b)
		}
	})
	t.Run("forgotten and removed brokers have no item", func(t *testing.T) {
		tol, _, _ := newTol(t, Options{Semantics: SemanticsRocketMQ4})
		tol.Update("a", ms(7), TransportError)
		tol.Update("b", ms(7), TransportError)
		tol.Forget("a")
		tol.Remove("b")
		if b, ok := tol.PickOneAtLeast(); ok {
			t.Errorf("picked %q", b)
		}
	})
}

// Forget is RocketMQ's remove: the item goes, the broker stays known with its pod mark.
func TestForgetDropsTheItemButKeepsThePodMark(t *testing.T) {
	tol, _, rec := newTol(t, Options{RespectPodHealth: true})
	tol.Update("A", ms(1), BrokerError)
	tol.Update("B", ms(1), BrokerError)
	tol.SetPodState("B", PodNotReady)
	rec.take()
	tol.Forget("A")
	tol.Forget("B")
	tol.Forget("unknown")
	wantAvailable(t, tol, map[string]bool{"A": true, "B": false})
	if it := mustLookup(t, tol, "A"); !it.Reachable || !it.Until.IsZero() || it.ConsecutiveFailures != 0 {
		t.Errorf("A after Forget: %+v", it)
	}
	if it := mustLookup(t, tol, "B"); it.Reason != ReasonPodNotReady {
		t.Errorf("B after Forget: %+v", it)
	}
	if got := changeSummary(rec.take()); strings.Join(got, " ") != "-A" {
		t.Errorf("changes %v, want [-A]", got)
	}
}
