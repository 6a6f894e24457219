package kubeauth

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestFairCacheKeepsEachOwnersShare proves the rules that keep one owner of answers from pushing
// out another's: an owner over its cap loses its own least recently used answer, a full cache
// drops expired answers first, and otherwise takes room from the owner holding the most.
func TestFairCacheKeepsEachOwnersShare(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	type put struct {
		key, owner string
		ownerCap   int
		ttl        time.Duration
	}
	cases := []struct {
		name string
		max  int
		puts []put
		used []string // looked up after the puts, in order, before put last
		last put
		want []string // keys remembered at the end
	}{
		{"an owner over its cap loses its own least recently used answer", 10,
			[]put{{"m1", "mallory", 3, time.Hour}, {"m2", "mallory", 3, time.Hour}, {"m3", "mallory", 3, time.Hour}, {"a1", "alice", 3, time.Hour}},
			[]string{"m1"},
			put{"m4", "mallory", 3, time.Hour},
			[]string{"a1", "m1", "m3", "m4"}},
		{"a full cache drops expired answers before live ones", 3,
			[]put{{"m1", "mallory", 9, time.Hour}, {"m2", "mallory", 9, time.Second}, {"b1", "bob", 9, time.Second}},
			nil,
			put{"a1", "alice", 9, time.Hour},
			[]string{"a1", "m1"}},
		{"a full cache takes room from the owner holding the most", 4,
			[]put{{"m1", "mallory", 9, time.Hour}, {"m2", "mallory", 9, time.Hour}, {"b1", "bob", 9, time.Hour}, {"m3", "mallory", 9, time.Hour}},
			[]string{"m1"},
			put{"a1", "alice", 9, time.Hour},
			[]string{"a1", "b1", "m1", "m3"}},
		{"an answer given again replaces the old one", 2,
			[]put{{"a1", "alice", 9, time.Hour}, {"b1", "bob", 9, time.Hour}},
			nil,
			put{"a1", "alice", 9, time.Hour},
			[]string{"a1", "b1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newFairCache[string, int](tc.max)
			for _, p := range tc.puts {
				c.put(p.key, p.owner, p.ownerCap, 0, t0.Add(p.ttl), t0)
			}
			now := t0.Add(2 * time.Second)
			for _, k := range tc.used {
				if _, ok := c.get(k, now); !ok {
					t.Fatalf("%s not remembered", k)
				}
			}
			c.put(tc.last.key, tc.last.owner, tc.last.ownerCap, 1, now.Add(tc.last.ttl), now)
			var got []string
			for k := range c.entries {
				if _, ok := c.get(k, now); ok {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("remembered %v, want %v", got, tc.want)
			}
			if v, _ := c.get(tc.last.key, now); v != 1 {
				t.Fatalf("%s = %d, want the last answer", tc.last.key, v)
			}
		})
	}
}

// TestFairCacheStaysWithinItsBounds proves that however many answers one owner gives, the cache
// holds at most its size, the owner at most its cap, and a newcomer's answer is kept.
func TestFairCacheStaysWithinItsBounds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newFairCache[string, int](100)
	for i := range 10_000 {
		c.put(fmt.Sprintf("m%d", i), "mallory", 60, i, now.Add(time.Hour), now)
		c.put(fmt.Sprintf("f%d", i), fmt.Sprintf("client-%d", i), 60, i, now.Add(time.Hour), now)
	}
	c.put("a", "alice", 60, 1, now.Add(time.Hour), now)
	if len(c.entries) > 100 || c.held("mallory") > 60 {
		t.Fatalf("%d answers held, mallory %d; want at most 100 and 60", len(c.entries), c.held("mallory"))
	}
	if _, ok := c.get("a", now); !ok {
		t.Fatal("the newcomer's answer was not kept")
	}
}

// TestReviewBudgetsGiveEveryNewClientItsOwn proves a new client gets a full budget of its own
// even when every remembered client has spent its budget: forgetting the client that spent
// least recently, never sharing a bucket between clients.
func TestReviewBudgetsGiveEveryNewClientItsOwn(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	b := newReviewBudgets(10, 4)
	for i := range 4 {
		for range 20 {
			b.spend(fmt.Sprintf("attacker-%d", i), now)
		}
		if b.spend(fmt.Sprintf("attacker-%d", i), now) {
			t.Fatalf("attacker-%d spent past its burst", i)
		}
	}
	for i := range 20 {
		if !b.spend("newcomer", now) {
			t.Fatalf("the newcomer's review %d refused", i)
		}
	}
	if b.spend("newcomer", now) {
		t.Fatal("the newcomer spent past its burst")
	}
	if len(b.byClient) != 4 || b.order.Len() != 4 {
		t.Fatalf("%d budgets remembered, want the bound of 4", len(b.byClient))
	}
	if now = now.Add(time.Second); !b.spend("newcomer", now) {
		t.Fatal("a second later the newcomer has reviews again")
	}
}
