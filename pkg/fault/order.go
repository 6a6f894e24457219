package fault

import "unicode/utf16"

// itemOrder keeps the brokers a table holds items for in the order in which RocketMQ's
// LatencyFaultToleranceImpl iterates its items: a java.util.concurrent.ConcurrentHashMap created
// with an initial capacity of 16, keyed by broker name. RocketMQ 4.x's pickOneAtLeast sorts that
// iteration with a stable sort, so the map's order decides among brokers that compare equal (the
// same availability, latency and isolation end, as brokers that failed together have), and a
// replay must reproduce it to pick the same broker.
//
// The map's order is deterministic: bins in index order, each bin's nodes in the order they were
// linked. A name goes to bin spread(hashCode) & (n-1), where hashCode is java.lang.String's and
// spread folds the high half into the low; a new name is appended to its bin; the table starts
// at 32 bins (the capacity 16 asks for room for 16 names at load factor 0.75), doubles whenever
// the map holds three quarters of its bin count, and grows to at least four times its size when a
// bin of a table smaller than 64 reaches eight nodes. A resize splits each bin into a low and a
// high bin: the longest tail of nodes that go the same way keeps its order, and the nodes before
// it are pushed onto the front of their new bins one by one, which reverses them. Bins of eight
// or more names in a table of 64 or more bins become trees in Java, whose order this does not
// model; that takes eight broker names with colliding hashes.
type itemOrder struct {
	bins  [][]*Entry
	count int
	limit int // resize when count reaches it (sizeCtl)
}

// Constants of java.util.concurrent.ConcurrentHashMap as RocketMQ constructs it.
const (
	mapInitialBins   = 32 // new ConcurrentHashMap(16)
	mapTreeify       = 8  // TREEIFY_THRESHOLD
	mapMinTreeifyCap = 64 // MIN_TREEIFY_CAPACITY
)

// javaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x80 {
			h = 31*h + int32(c)
			continue
		}
		for _, u := range utf16.Encode([]rune(s[i:])) {
			h = 31*h + int32(u)
		}
		return h
	}
	return h
}

// spreadHash is ConcurrentHashMap.spread: the hash with its high half folded into the low half
// and the sign bit cleared.
func spreadHash(h int32) int32 {
	return (h ^ int32(uint32(h)>>16)) & 0x7fffffff
}

// insert appends e to its bin unless it is there already. Callers hold mu.
func (m *itemOrder) insert(e *Entry) {
	if e.ordered {
		return
	}
	if m.bins == nil {
		m.bins = make([][]*Entry, mapInitialBins)
		m.limit = mapInitialBins - mapInitialBins/4
	}
	if e.hash == 0 && e.name != "" {
		e.hash = spreadHash(javaStringHash(e.name)) | hashComputed
	}
	i := int(e.hash&^hashComputed) & (len(m.bins) - 1)
	before := len(m.bins[i])
	m.bins[i] = append(m.bins[i], e)
	e.ordered = true
	if before >= mapTreeify && len(m.bins) < mapMinTreeifyCap {
		// treeifyBin on a small table resizes instead (tryPresize(n << 1)): to the table size
		// that holds 1.5 times that many names, doubling once per step.
		want := tableSizeFor(2*len(m.bins) + len(m.bins) + 1)
		for want > m.limit {
			m.grow()
		}
	}
	m.count++
	for m.count >= m.limit {
		m.grow()
	}
}

// hashComputed marks Entry.hash as computed (a spread hash never has the top bit set).
const hashComputed int32 = -1 << 31

// tableSizeFor is the smallest power of two not below c.
func tableSizeFor(c int) int {
	n := 1
	for n < c {
		n <<= 1
	}
	return n
}

// grow doubles the table the way ConcurrentHashMap.transfer splits each bin.
func (m *itemOrder) grow() {
	n := len(m.bins)
	next := make([][]*Entry, 2*n)
	for i, bin := range m.bins {
		if len(bin) == 0 {
			continue
		}
		high := func(e *Entry) bool { return int(e.hash&^hashComputed)&n != 0 }
		run := 0
		runHigh := high(bin[0])
		for j := 1; j < len(bin); j++ {
			if h := high(bin[j]); h != runHigh {
				run, runHigh = j, h
			}
		}
		var lo, hi []*Entry
		if runHigh {
			hi = append(hi, bin[run:]...)
		} else {
			lo = append(lo, bin[run:]...)
		}
		for j := 0; j < run; j++ {
			if high(bin[j]) {
				hi = append([]*Entry{bin[j]}, hi...)
			} else {
				lo = append([]*Entry{bin[j]}, lo...)
			}
		}
		next[i], next[i+n] = lo, hi
	}
	m.bins = next
	m.limit = 2*n - (2*n)/4
}

// remove takes e out of its bin. Callers hold mu.
func (m *itemOrder) remove(e *Entry) {
	if !e.ordered {
		return
	}
	e.ordered = false
	i := int(e.hash&^hashComputed) & (len(m.bins) - 1)
	bin := m.bins[i]
	for j, x := range bin {
		if x == e {
			m.bins[i] = append(bin[:j:j], bin[j+1:]...)
			m.count--
			return
		}
	}
}

// items returns the entries in iteration order, in a new slice. Callers hold mu.
func (m *itemOrder) items() []*Entry {
	out := make([]*Entry, 0, m.count)
	for _, bin := range m.bins {
		out = append(out, bin...)
	}
	return out
}
