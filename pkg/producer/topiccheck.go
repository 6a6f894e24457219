package producer

import (
	"context"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// checkTopicHolds asks, for every hold of the policy's table for one topic (a broker that refused
// the topic as TOPIC_NOT_EXIST, see fault.Tolerance.RefusedTopic), the broker itself for the
// topic's configuration (GET_TOPIC_CONFIG), in parallel on wg, each within timeout: an answer
// that shows the topic ends the hold (fault.Tolerance.TopicShown). A refusal, silence or a broker
// that does not serve the request (RocketMQ 4.x) leave the hold to its timer. A probe cannot end
// such a hold: it proves that the broker answers, not that it has the topic. The route from the
// name servers cannot either: they publish a broker's queues until its next registration, which is
// exactly when a broker lacks a topic they still list.
func (r *Runtime) checkTopicHolds(ctx context.Context, wg *sync.WaitGroup, st *snapshot, ps *policyState, timeout time.Duration) {
	for _, h := range ps.tol.TopicHolds() {
		addr := st.sendAddr(h.Broker)
		if addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.topicShown(ctx, addr, h.Topic, timeout) {
				ps.tol.TopicShown(h.Broker, h.Topic)
			}
		}()
	}
}

// topicShown reports whether the broker at addr answers GET_TOPIC_CONFIG for topic with the
// topic's configuration within timeout.
func (r *Runtime) topicShown(ctx context.Context, addr, topic string, timeout time.Duration) bool {
	cctx, done := context.WithTimeout(ctx, timeout)
	defer done()
	resp, err := r.client.Invoke(cctx, addr, remoting.NewGetTopicConfigRequest(topic))
	if err != nil {
		return false
	}
	_, err = remoting.ParseTopicConfig(resp)
	return err == nil
}
