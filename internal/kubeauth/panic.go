package kubeauth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// PanicError is a panic recovered in a review, passed on to the callers waiting for it as their
// error, with the stack where it happened.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// PanicStack returns log key/values with the stack of a recovered panic err carries, if any.
func PanicStack(err error) []any {
	if pe, ok := errors.AsType[*PanicError](err); ok {
		return []any{"stack", string(pe.Stack)}
	}
	return nil
}

// ClientOf identifies the client of a request for the per-client bound of reviews: its remote
// host, so that one client's connections share one budget.
func ClientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
