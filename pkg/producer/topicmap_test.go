package producer

import (
	"fmt"
	"maps"
	"testing"
)

// TestTopicMapIsAnImmutableMap proves topicMap behaves as a map that never changes once made:
// With and Without return new maps and leave the old ones as they were, batches see their own
// changes, and All yields exactly the entries.
func TestTopicMapIsAnImmutableMap(t *testing.T) {
	var empty topicMap[int]
	if _, ok := empty.Get("x"); ok || empty.Len() != 0 {
		t.Fatal("the zero topicMap is not empty")
	}
	want := map[string]int{}
	m := empty
	var versions []topicMap[int]
	var wants []map[string]int
	for i := range 2000 {
		k := fmt.Sprintf("T%d", i%700)
		if i%5 == 4 {
			m = m.Without(k)
			delete(want, k)
		} else {
			m = m.With(k, i)
			want[k] = i
		}
		if i%100 == 0 {
			versions, wants = append(versions, m), append(wants, maps.Clone(want))
		}
	}
	versions, wants = append(versions, m), append(wants, want)
	for vi, v := range versions {
		got := maps.Collect(v.All())
		if !maps.Equal(got, wants[vi]) || v.Len() != len(wants[vi]) {
			t.Fatalf("version %d: %d entries (Len %d), want %d: a later change leaked into it", vi, len(got), v.Len(), len(wants[vi]))
		}
		for k, x := range wants[vi] {
			if y, ok := v.Get(k); !ok || y != x {
				t.Fatalf("version %d: Get(%q) = %d, %v; want %d", vi, k, y, ok, x)
			}
		}
	}
	e := m.edit()
	e.Set("new", 1)
	e.Set("new", 2)
	e.Delete("T1")
	e.Delete("absent")
	n := e.Done()
	if v, _ := n.Get("new"); v != 2 || n.Len() != m.Len()+1-boolInt(has(m, "T1")) {
		t.Fatalf("batch: new=%d, Len %d from %d", v, n.Len(), m.Len())
	}
	if _, ok := m.Get("new"); ok {
		t.Fatal("a batch changed the map it started from")
	}
}

func has(m topicMap[int], k string) bool { _, ok := m.Get(k); return ok }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
