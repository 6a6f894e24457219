package fault

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// benchTolerance returns a Tolerance on the real clock with eight brokers: B0 isolated for
// an hour, the rest healthy.
func benchTolerance(b *testing.B) (*Tolerance, []string) {
	b.Helper()
	tol := New(Options{Table: tableOf(b, 10000, Rule{0, 0}, Rule{10000, MaxMillis})})
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprint("broker-", i)
		tol.Entry(names[i])
	}
	tol.Update(names[0], ms(1), TransportError)
	if tol.Available(names[0]) || !tol.Available(names[1]) {
		b.Fatal("benchmark setup: wrong availability")
	}
	return tol, names
}

var sink atomic.Bool

func BenchmarkAvailable(b *testing.B) {
	tol, names := benchTolerance(b)
	for _, c := range []struct {
		name   string
		broker string
	}{{"healthy", names[1]}, {"isolated", names[0]}, {"unknown", "nobody"}} {
		b.Run("ByName/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var r bool
			for b.Loop() {
				r = tol.Available(c.broker)
			}
			sink.Store(r)
		})
	}
	for _, c := range []struct {
		name string
		e    *Entry
	}{{"healthy", tol.Entry(names[1])}, {"isolated", tol.Entry(names[0])}} {
		b.Run("Entry/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var r bool
			for b.Loop() {
				r = c.e.Available()
			}
			sink.Store(r)
		})
	}
}

func BenchmarkAvailableParallel(b *testing.B) {
	tol, names := benchTolerance(b)
	entries := make([]*Entry, len(names))
	for i, n := range names {
		entries[i] = tol.Entry(n)
	}
	b.Run("ByName", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i, n := 0, 0
			for pb.Next() {
				if tol.Available(names[i&7]) {
					n++
				}
				i++
			}
			sink.Store(n > 0)
		})
	})
	b.Run("Entry", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i, n := 0, 0
			for pb.Next() {
				if entries[i&7].Available() {
					n++
				}
				i++
			}
			sink.Store(n > 0)
		})
	})
}

func BenchmarkReachable(b *testing.B) {
	tol, names := benchTolerance(b)
	e := tol.Entry(names[1])
	b.Run("ByName", func(b *testing.B) {
		b.ReportAllocs()
		var r bool
		for b.Loop() {
			r = tol.Reachable(names[1])
		}
		sink.Store(r)
	})
	b.Run("Entry", func(b *testing.B) {
		b.ReportAllocs()
		var r bool
		for b.Loop() {
			r = e.Reachable()
		}
		sink.Store(r)
	})
}

// BenchmarkUpdate measures the outcomes a send path reports: a fast success (lock-free), a slow
// success that extends an isolation, and a failure (both under the writer lock).
func BenchmarkUpdate(b *testing.B) {
	cases := []struct {
		name    string
		latency time.Duration
		outcome Outcome
	}{
		{"FastSuccess", ms(3), Success},
		{"SlowSuccess", ms(20000), Success},
		{"TransportError", ms(3), TransportError},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			tol, names := benchTolerance(b)
			b.ReportAllocs()
			for b.Loop() {
				tol.Update(names[1], c.latency, c.outcome)
			}
		})
	}
	for _, c := range cases {
		b.Run(c.name+"/Parallel", func(b *testing.B) {
			tol, names := benchTolerance(b)
			var g atomic.Int32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				// Each goroutine reports on its own broker, as concurrent sends to several
				// brokers do.
				broker := names[1+int(g.Add(1))%(len(names)-1)]
				for pb.Next() {
					tol.Update(broker, c.latency, c.outcome)
				}
			})
		})
	}
}
