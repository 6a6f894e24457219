package facade

import (
	"net"
	"time"
)

// sourceOf is the address a connection's share is counted by: its IP, whatever the port.
func sourceOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// Why admit refuses a connection, as logged.
const (
	refusedClosing   = "closing"
	refusedFull      = "too many connections"
	refusedPerSource = "too many connections from one source"
)

// admit registers c unless the server is closing, c's source holds its share already, or every
// connection is taken and c's source may not take one (see evictable); it returns why not. When c
// takes the place of another connection, that one is returned, forgotten already, for the caller
// to close.
func (s *Server) admit(c net.Conn) (t *tracked, evicted net.Conn, refused string) {
	src := sourceOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.sources.count(src)
	switch {
	case s.closed:
		return nil, nil, refusedClosing
	case s.opts.MaxConnsPerSource > 0 && held >= s.opts.MaxConnsPerSource:
		return nil, nil, refusedPerSource
	case len(s.open) >= s.opts.MaxConns:
		victim := s.evictable(held)
		if victim == nil {
			return nil, nil, refusedFull
		}
		s.forgetLocked(victim)
		evicted = victim.c
	}
	t = s.sources.add(src, c)
	s.open[c] = t
	return t, evicted, ""
}

// evictable returns the connection a new one from a source holding held connections takes the
// place of when every connection is taken, or nil: the idlest connection of the source holding
// the most, when the new one's source holds fewer than its fair share (MaxConns over the sources
// holding connections, the new one's counted) and the largest source at least two more than it,
// so that a move never just swaps which source is short and the evicted client, reconnecting,
// cannot evict in turn. s.mu is held.
func (s *Server) evictable(held int) *tracked {
	n := s.sources.len()
	if held == 0 {
		n++
	}
	if held >= s.opts.MaxConns/n {
		return nil
	}
	big := s.sources.largest()
	if big == nil || big.conns.Len() < held+2 {
		return nil
	}
	return big.conns.Front().Value.(*tracked)
}

// release forgets c, admitted before, unless it was evicted (and forgotten) already.
func (s *Server) release(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.open[c]; ok {
		s.forgetLocked(t)
	}
}

// forgetLocked drops t from the connections held. s.mu is held.
func (s *Server) forgetLocked(t *tracked) {
	delete(s.open, t.c)
	s.sources.remove(t)
}

// touch records that a request arrived on t, which makes it its source's busiest connection.
func (s *Server) touch(t *tracked) {
	s.mu.Lock()
	s.sources.touch(t)
	s.mu.Unlock()
}

// deadlineReader arms a client connection's read deadline for each frame: the idle timeout while
// no byte of the next frame has arrived, then the frame timeout from its first byte, which later
// bytes do not extend, so a peer trickling a frame holds its connection for the frame timeout at
// most.
type deadlineReader struct {
	c           net.Conn
	idle, frame time.Duration
	started     bool // a byte of the frame being read has arrived
}

// next arms the deadline for the next frame; buffered is how many of its bytes were read already.
func (r *deadlineReader) next(buffered int) error {
	r.started = buffered > 0
	if r.started {
		return r.c.SetReadDeadline(time.Now().Add(r.frame))
	}
	return r.c.SetReadDeadline(time.Now().Add(r.idle))
}

// Read implements io.Reader.
func (r *deadlineReader) Read(p []byte) (int, error) {
	n, err := r.c.Read(p)
	if n > 0 && !r.started {
		r.started = true
		if derr := r.c.SetReadDeadline(time.Now().Add(r.frame)); err == nil {
			err = derr
		}
	}
	return n, err
}
