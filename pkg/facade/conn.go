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

// admit registers c unless the server is closed, full, or c's source holds its share already; it
// returns why not.
func (s *Server) admit(c net.Conn) (refused string) {
	src := sourceOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return refusedClosing
	case len(s.open) >= s.opts.MaxConns:
		return refusedFull
	case s.opts.MaxConnsPerSource > 0 && s.perSource[src] >= s.opts.MaxConnsPerSource:
		return refusedPerSource
	}
	s.open[c] = struct{}{}
	s.perSource[src]++
	return ""
}

// release forgets c, admitted before.
func (s *Server) release(c net.Conn) {
	src := sourceOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, c)
	if s.perSource[src]--; s.perSource[src] <= 0 {
		delete(s.perSource, src)
	}
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
