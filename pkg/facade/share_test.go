package facade

import (
	"fmt"
	"testing"

	"github.com/detourmq/detour/pkg/remoting"
)

// holdFrom opens n connections from the loopback address ip, each admitted before the next
// connects, so the facade's order of admission is the order of the result.
func holdFrom(t testing.TB, srv *Server, ip string, n int) []*peer {
	t.Helper()
	peers := make([]*peer, n)
	for i := range peers {
		want := openConns(srv) + 1
		peers[i] = dialFrom(t, ip, srv.Addr())
		eventually(t, fmt.Sprintf("connection %d from %s admitted", i, ip), func() bool { return openConns(srv) == want })
	}
	return peers
}

// askRoute sends a route request on p and fails the test unless the route comes back.
func askRoute(t testing.TB, p *peer, opaque int32) {
	t.Helper()
	p.send(t, routeRequest("Other", opaque))
	if resp := p.answer(t); resp.Opaque != opaque || resp.Code != remoting.Success || len(resp.Body) == 0 {
		t.Fatalf("route answer %v, want the route to opaque %d", resp, opaque)
	}
}

// TestAClientFromANewSourceGetsItsRouteWhenSeventeenSourcesHoldEveryConnection: with the default
// bounds (1,024 connections, 64 per source), 17 source addresses can hold every connection
// between them; a client from an 18th, holding none, below its fair share, takes the place of
// the idlest connection of the largest source and gets its route through the facade.
func TestAClientFromANewSourceGetsItsRouteWhenSeventeenSourcesHoldEveryConnection(t *testing.T) {
	f := start(t, Options{})
	const sources = 17
	for i := range DefaultMaxConns {
		ip := fmt.Sprintf("127.0.0.%d", 2+i%sources)
		dialFrom(t, ip, f.srv.Addr())
	}
	eventually(t, "every connection held", func() bool { return openConns(f.srv) == DefaultMaxConns })
	newcomer := dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+sources), f.srv.Addr())
	askRoute(t, newcomer, 1)
	if n := openConns(f.srv); n != DefaultMaxConns {
		t.Errorf("%d connections held after the newcomer's, want %d", n, DefaultMaxConns)
	}
	// 1,024 over 17 sources: four held 61, the rest 60; one of the four gave a connection up.
	held := map[int]int{}
	for i := range sources {
		held[heldBy(f.srv, fmt.Sprintf("127.0.0.%d", 2+i))]++
	}
	if held[61] != 3 || held[60] != 14 {
		t.Errorf("sources by connections held: %v, want 3 holding 61 and 14 holding 60", held)
	}
}

// heldBy is how many connections the server holds from ip.
func heldBy(s *Server, ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sources.count(ip)
}

func TestTheConnectionEvictedIsTheIdlestOfTheLargestSource(t *testing.T) {
	const large, small = "127.0.0.2", "127.0.0.3"
	for _, tc := range []struct {
		name string
		// asks lists the large source's connections (by order of admission) that ask a route,
		// in this order; newcomer is where the next connection comes from.
		asks     []int
		newcomer string
		evicted  int // the large source's connection closed for the newcomer; -1: the newcomer is refused
	}{
		{"one that never asked is the idlest", []int{0, 1, 3, 4}, "127.0.0.4", 2},
		{"else the one whose last request is the oldest", []int{3, 0, 4, 1, 2}, "127.0.0.4", 3},
		{"a request makes a connection the busiest", []int{0, 1, 2, 3, 4, 0}, "127.0.0.4", 1},
		{"a source below its share takes from the largest", []int{4, 3, 2, 1, 0}, small, 4},
		{"a source holding its share takes nothing", []int{0, 1, 2, 3, 4}, large, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newCountingMetrics()
			f := start(t, Options{MaxConns: 8, MaxConnsPerSource: -1, Metrics: m})
			big := holdFrom(t, f.srv, large, 5)
			others := holdFrom(t, f.srv, small, 3)
			for i, k := range tc.asks {
				askRoute(t, big[k], int32(i+1))
			}
			newcomer := dialFrom(t, tc.newcomer, f.srv.Addr())
			if tc.evicted < 0 {
				if !closedByFacade(newcomer) {
					t.Fatal("the newcomer was served although its source holds its share")
				}
			} else {
				askRoute(t, newcomer, 100)
				if !closedByFacade(big[tc.evicted]) {
					t.Fatalf("connection %d of the largest source stayed open", tc.evicted)
				}
			}
			for i, p := range append(big, others...) {
				if i != tc.evicted {
					askRoute(t, p, int32(200+i))
				}
			}
			if n := openConns(f.srv); n != 8 {
				t.Errorf("%d connections held, want 8", n)
			}
			want := 0
			if tc.evicted < 0 {
				want = 1
			}
			if got := m.get(func(m *countingMetrics) int { return m.connRefused[false] }); got != want {
				t.Errorf("connections counted refused for a full facade: %d, want %d (one taking another's place is not refused)", got, want)
			}
		})
	}
}
