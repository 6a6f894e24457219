package facade

import (
	"container/list"
	"net"
)

// tracked is one admitted client connection.
type tracked struct {
	c    net.Conn
	src  *source
	elem *list.Element // in src.conns; nil once forgotten
}

// source is the connections from one IP address, from the idlest (longest since its last
// request, or since it connected when it sent none) to the busiest.
type source struct {
	addr  string
	conns list.List // of *tracked
}

// sources counts connections by source and finds, in constant time, the source holding the most
// and its idlest connection: sources are kept in buckets by how many connections they hold, and
// each keeps its connections in the order of their last request. Memory is one entry per
// connection and per source holding one, and one bucket per count up to the largest reached, so
// it is bounded by MaxConns.
type sources struct {
	byAddr  map[string]*source
	buckets []map[*source]struct{} // buckets[n]: the sources holding n connections (n > 0)
	top     int                    // the largest n whose bucket is not empty; 0 when none
}

func newSources() sources { return sources{byAddr: map[string]*source{}} }

// len is how many sources hold connections.
func (ss *sources) len() int { return len(ss.byAddr) }

// count is how many connections addr holds.
func (ss *sources) count(addr string) int {
	if src := ss.byAddr[addr]; src != nil {
		return src.conns.Len()
	}
	return 0
}

// largest returns a source holding the most connections, or nil when none holds any.
func (ss *sources) largest() *source {
	if ss.top == 0 {
		return nil
	}
	for src := range ss.buckets[ss.top] {
		return src
	}
	return nil
}

// add records c from addr as its source's busiest connection.
func (ss *sources) add(addr string, c net.Conn) *tracked {
	src := ss.byAddr[addr]
	if src == nil {
		src = &source{addr: addr}
		ss.byAddr[addr] = src
	}
	t := &tracked{c: c, src: src}
	t.elem = src.conns.PushBack(t)
	ss.moved(src, src.conns.Len()-1)
	return t
}

// remove forgets t; removing it again does nothing.
func (ss *sources) remove(t *tracked) {
	if t.elem == nil {
		return
	}
	src := t.src
	src.conns.Remove(t.elem)
	t.elem = nil
	ss.moved(src, src.conns.Len()+1)
	if src.conns.Len() == 0 {
		delete(ss.byAddr, src.addr)
	}
}

// touch makes t its source's busiest connection, unless it was forgotten.
func (ss *sources) touch(t *tracked) {
	if t.elem != nil {
		t.src.conns.MoveToBack(t.elem)
	}
}

// moved files src, which held was connections, under the count it holds now (one more or one
// fewer), and keeps top current: counts change by one at a time, so top moves by one at most.
func (ss *sources) moved(src *source, was int) {
	now := src.conns.Len()
	if was > 0 {
		delete(ss.buckets[was], src)
	}
	if now > 0 {
		for len(ss.buckets) <= now {
			ss.buckets = append(ss.buckets, map[*source]struct{}{})
		}
		ss.buckets[now][src] = struct{}{}
	}
	if now > ss.top {
		ss.top = now
	}
	for ss.top > 0 && len(ss.buckets[ss.top]) == 0 {
		ss.top--
	}
}
