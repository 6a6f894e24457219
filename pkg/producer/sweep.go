package producer

import "time"

// every runs fn every interval until the runtime closes, and at once whenever wake (at most one
// channel) has a value; the caller has added to r.wg.
func (r *Runtime) every(interval time.Duration, fn func(), wake ...<-chan struct{}) {
	defer r.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	var early <-chan struct{} // nil: never
	if len(wake) > 0 {
		early = wake[0]
	}
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-early:
		}
		fn()
	}
}

// sweepFaultTables is the runtime's periodic sweep (Options.ExpiryInterval) over every policy's
// fault table: it ends isolations whose time ran out, so that "left isolation" events arrive
// without waiting for a send to touch the broker, and holds out brokers whose oldest attempt in
// flight has gone unanswered past the table's stall threshold (fault.Tolerance.IsolateStalled),
// before any of those attempts times out.
func (r *Runtime) sweepFaultTables() {
	for _, p := range r.state.Load().policies {
		p.tol.Expire()
		p.tol.IsolateStalled()
	}
}
