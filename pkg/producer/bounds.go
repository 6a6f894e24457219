package producer

import (
	"fmt"

	"github.com/detourmq/detour/pkg/producer/nameserver"
	"github.com/detourmq/detour/pkg/remoting"
)

// Route bounds. A compiled route holds one entry per write queue, so queue counts are what a
// route costs; they are checked before a route is built. RocketMQ sets no maximum of its own (its
// client would allocate 2^31 queues for a route that claims them).
const (
	// MaxWriteQueues bounds one broker's write queues in a route: remoting.MaxQueueNums, the
	// bound a Topic's spec has.
	MaxWriteQueues = remoting.MaxQueueNums
	// MaxRouteQueues bounds the write queues of one route over all its brokers (1024 brokers of
	// 64 queues): a compiled route of this size takes about 1 MiB.
	MaxRouteQueues = 65536
)

// ErrAnswerRefused is wrapped by a route refresh's error (RouteStatus.Err) and by
// DescribeCluster's when a name server answered beyond a bound (remoting.MaxNameServerBody,
// MaxRouteBrokers, MaxClusterBrokers, MaxQueueNums, MaxRouteQueues, name and address lengths):
// the answer was refused before anything was built from it, and the last good route stays. It is
// nameserver.ErrAnswerRefused, which the name-server client wraps.
var ErrAnswerRefused = nameserver.ErrAnswerRefused

// checkBounds refuses a route whose queue counts go beyond MaxWriteQueues or MaxRouteQueues.
func (rt Route) checkBounds() error {
	total := 0
	for _, b := range rt.Brokers {
		if b.WriteQueues > MaxWriteQueues {
			return fmt.Errorf("route %s: broker %s has %d write queues, beyond the bound of %d", rt.Topic, b.Broker, b.WriteQueues, MaxWriteQueues)
		}
		total += max(b.WriteQueues, 0)
	}
	if total > MaxRouteQueues {
		return fmt.Errorf("route %s: %d write queues over its brokers, beyond the bound of %d", rt.Topic, total, MaxRouteQueues)
	}
	return nil
}
