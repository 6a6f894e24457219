package realenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
	"github.com/detourmq/detour/pkg/remoting"
)

// TestHangGateHoldsOneSendInEveryWhileArmed proves the hang scenario's relay: every request is
// answered through it, unarmed it holds nothing, armed it holds exactly one send request in every
// (and never a request of another kind), and a held send is still answered.
func TestHangGateHoldsOneSendInEveryWhileArmed(t *testing.T) {
	b, err := brokersim.StartBroker("broker-b", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := startHangGate("127.0.0.1:0", b.Addr(), 5, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := remoting.NewClient(remoting.ClientOptions{})
	defer c.Close()
	addr := g.ln.Addr().String()

	invokeAll := func(code int16, n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := c.Invoke(ctx, addr, remoting.NewRequest(code, map[string]string{"topic": "T"}, []byte("x"))); err != nil {
					t.Errorf("request %d through the gate: %v", i, err)
				}
			}()
		}
		wg.Wait()
	}

	invokeAll(remoting.SendMessageV2, 10)
	if h := g.held.Load(); h != 0 {
		t.Fatalf("unarmed, the gate held %d sends, want 0", h)
	}
	g.armed.Store(true)
	invokeAll(remoting.GetMaxOffset, 10)
	if h := g.held.Load(); h != 0 {
		t.Fatalf("armed, the gate held %d requests that are not sends, want 0", h)
	}
	invokeAll(remoting.SendMessageV2, 10)
	if h, s := g.held.Load(), g.sends.Load(); h != 2 || s != 10 {
		t.Fatalf("armed, the gate held %d of %d sends, want 2 of 10", h, s)
	}
}
