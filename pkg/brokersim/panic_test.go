package brokersim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/detourmq/detour/pkg/remoting"
)

// poisonCode is the request code the test handler mishandles.
const poisonCode int16 = 9999

// TestAPanickingHandlerClosesOnlyItsConnection proves a panic while answering a request, inline
// on the connection's reader or later on a delayed answer's timer, closes that connection only:
// the server logs and counts it, and a client connected before keeps its connection and answers.
func TestAPanickingHandlerClosesOnlyItsConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{
		{"answered on the reader", 0},
		{"answered on a timer", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var logged []string
			srv := newServer(func(sc *serverConn, req *remoting.Command) {
				answer := func() {
					if req.Code == poisonCode {
						var byCode map[int16]int
						byCode[req.Code]++ // a nil map write: the runtime's own panic
					}
					sc.respond(req, remoting.NewResponse(req, remoting.Success, ""), true)
				}
				if tc.delay > 0 {
					sc.after(tc.delay, req, answer, func() {})
					return
				}
				answer()
			}, 0)
			srv.log = funcr.New(func(prefix, args string) {
				mu.Lock()
				logged = append(logged, args)
				mu.Unlock()
			}, funcr.Options{})
			if err := srv.listen("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.close)

			opts := remoting.ClientOptions{StaleAfter: -1} // the poisoned request is never sent twice
			victim, bystander := remoting.NewClient(opts), remoting.NewClient(opts)
			t.Cleanup(func() { victim.Close(); bystander.Close() })
			ask := func(c *remoting.Client, code int16) error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				resp, err := c.Invoke(ctx, srv.addr, &remoting.Command{Code: code})
				if err == nil && resp.Code != remoting.Success {
					err = errors.New(resp.Remark)
				}
				return err
			}
			for _, c := range []*remoting.Client{victim, bystander} {
				if err := ask(c, remoting.HeartBeat); err != nil {
					t.Fatal(err)
				}
			}
			if err := ask(victim, poisonCode); !errors.Is(err, remoting.ErrClosed) {
				t.Fatalf("the poisoned request: %v; want its connection closed", err)
			}
			if err := ask(bystander, remoting.HeartBeat); err != nil {
				t.Fatalf("the other connection after the panic: %v", err)
			}
			if err := ask(victim, remoting.HeartBeat); err != nil {
				t.Fatalf("the victim on a new connection: %v", err)
			}
			if n, conns := srv.panics.Load(), srv.accepted.Load(); n != 1 || conns != 3 {
				t.Fatalf("%d panics counted, %d connections accepted; want 1, and only the victim connecting again", n, conns)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(logged) != 1 || !strings.Contains(logged[0], "handling a request panicked") ||
				!strings.Contains(logged[0], `"code"=9999`) || !strings.Contains(logged[0], "panic_test.go") {
				t.Fatalf("logged %q; want one line naming the request and the stack", logged)
			}
		})
	}
}
