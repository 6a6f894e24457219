package facade

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/detourmq/detour/pkg/remoting"
)

// errSharedFailed answers the clients that waited for an upstream request whose forwarding
// panicked; the panic itself is recovered on the connection that made it.
var errSharedFailed = errors.New("the upstream request this one shared failed")

// flights coalesces identical requests in flight: the first asks the name servers, those that
// arrive while it waits get its answer. Nothing is kept once the answer is out, so every answer
// is as fresh as a request of its own would have been. It is not x/sync's singleflight (which
// the gateway uses behind a recover): singleflight re-panics a leader's panic in every waiter,
// closing every waiting client's connection, and counts the leader as sharing; here waiters get
// errSharedFailed, only the panicking connection closes, and joining counts waiters alone.
type flights struct {
	mu    sync.Mutex
	calls map[string]*flight
}

// flight is one upstream request and the answer its waiters share.
type flight struct {
	done chan struct{}
	resp *remoting.Command
	err  error
}

// do returns fn's answer for key, calling fn only when no call for key is in flight; otherwise
// it calls joining and waits for that call's answer, which waiters must treat as read-only.
func (f *flights) do(key string, fn func() (*remoting.Command, error), joining func()) (*remoting.Command, error) {
	f.mu.Lock()
	if c, ok := f.calls[key]; ok {
		f.mu.Unlock()
		joining()
		<-c.done
		return c.resp, c.err
	}
	if f.calls == nil {
		f.calls = map[string]*flight{}
	}
	c := &flight{done: make(chan struct{}), err: errSharedFailed}
	f.calls[key] = c
	f.mu.Unlock()
	// Deferred, so waiters are released with errSharedFailed even when fn panics.
	defer func() {
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(c.done)
	}()
	c.resp, c.err = fn()
	return c.resp, c.err
}

// flightKey identifies what a name server's answer to req depends on: the code, the version
// (name servers choose the route's JSON form by it), and every ext field, the topic and
// acceptStandardJsonOnly among them, and any credentials or zone a name server's hooks read. The
// language and the header's serialisation do not change the answer. Requests with a body are
// never coalesced (ok false): no read a client sends carries one.
func flightKey(req *remoting.Command) (key string, ok bool) {
	if len(req.Body) > 0 {
		return "", false
	}
	names := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(req.Code)))
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(int(req.Version)))
	for _, k := range names {
		// Length-prefixed, so no choice of names and values can make two requests' keys equal.
		for _, s := range []string{k, req.ExtFields[k]} {
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
	}
	return b.String(), true
}
