package producer

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// DefaultHeartbeatInterval is how often the runtime sends HEART_BEAT to every broker it routes to,
// as RocketMQ's clients do (heartbeatBrokerInterval, 30 s). Brokers close connections that stay
// idle for serverChannelMaxIdleTimeSeconds (120 s by default); heartbeats keep them open and list
// the producer group among the broker's producer connections.
const DefaultHeartbeatInterval = 30 * time.Second

// heartbeatTimeout bounds one HEART_BEAT, as RocketMQ's client does (3 s).
const heartbeatTimeout = 3 * time.Second

// clientID names this process to brokers, in RocketMQ's ip@instance shape.
func clientID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%d#detour", host, os.Getpid())
}

// heartbeatRound sends HEART_BEAT to every broker address the compiled routes use, concurrently,
// and waits for the answers (or their timeouts) so rounds never pile up.
func (r *Runtime) heartbeatRound(id string) {
	addrs := map[string]bool{}
	for _, rt := range r.state.Load().routes.All() {
		for i := range rt.queues {
			addrs[rt.queues[i].b.addr] = true
		}
	}
	groups := r.heartbeatGroups()
	var wg sync.WaitGroup
	for addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), heartbeatTimeout)
			defer cancel()
			resp, err := r.client.Invoke(ctx, addr, remoting.NewHeartbeatRequest(id, groups...))
			switch {
			case err != nil:
				r.log.V(1).Info("heartbeat failed", "broker", addr, "error", err.Error())
			case resp.Code != remoting.Success:
				r.noteACL("", addr, "", "", remoting.HeartBeat, resp)
				r.log.V(1).Info("heartbeat refused", "broker", addr, "code", resp.Code, "remark", resp.Remark)
			default:
				r.noteAccepted(addr, "")
			}
		}()
	}
	wg.Wait()
}
