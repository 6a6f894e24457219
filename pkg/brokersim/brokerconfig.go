package brokersim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// defaultLimits are RocketMQ's defaults of the waits past which a broker refuses sends as busy
// (BrokerConfig.waitTimeMillsInSendQueue, MessageStoreConfig.osPageCacheBusyTimeOutMills).
var defaultLimits = remoting.BrokerLimits{SendQueueWaitMillis: 200, PageCacheBusyMillis: 1000}

// brokerConfig is what GET_BROKER_CONFIG reports: the busy limits and the data version that
// SetLimits advances, as updateBrokerConfig advances a Java broker's.
type brokerConfig struct {
	mu      sync.Mutex
	set     bool
	limits  remoting.BrokerLimits
	counter int64
	stamp   int64 // ms of the last change, as DataVersion's timestamp
}

// SetLimits changes the busy limits the broker's GET_BROKER_CONFIG reports, as updateBrokerConfig
// changes a Java broker's, and advances its configuration's data version. A negative limit is left
// out of the answer (a broker whose configuration lacks the key). It changes nothing else: the
// simulator refuses sends as busy only through Fault.Busy.
func (b *Broker) SetLimits(l remoting.BrokerLimits) {
	b.config.mu.Lock()
	defer b.config.mu.Unlock()
	b.config.set, b.config.limits = true, l
	b.config.counter++
	b.config.stamp = time.Now().UnixMilli()
}

// brokerConfigAnswer answers GET_BROKER_CONFIG as AdminBrokerProcessor.getBrokerConfig does:
// SUCCESS, the configuration as properties text sorted by key (MixAll.properties2String, one
// unescaped "key=value" line each) and the configuration's DataVersion as JSON in the "version"
// header field. The configuration holds the keys a client reads of a Java broker's ~400.
func (b *Broker) brokerConfigAnswer(req *remoting.Command) *remoting.Command {
	b.config.mu.Lock()
	limits, counter, stamp := defaultLimits, b.config.counter, b.config.stamp
	if b.config.set {
		limits = b.config.limits
	}
	b.config.mu.Unlock()
	if stamp == 0 {
		stamp = b.started.UnixMilli()
	}
	entries := map[string]string{
		"brokerClusterName":           b.opts.Cluster,
		"brokerName":                  b.name,
		"brokerId":                    "0",
		"brokerPermission":            "6",
		"autoCreateTopicEnable":       strconv.FormatBool(!b.opts.NoAutoCreate),
		"sendThreadPoolQueueCapacity": strconv.FormatInt(idlePressure.SendQueueCapacity, 10),
	}
	if limits.SendQueueWaitMillis >= 0 {
		entries[remoting.ConfigSendQueueWait] = strconv.FormatInt(limits.SendQueueWaitMillis, 10)
	}
	if limits.PageCacheBusyMillis >= 0 {
		entries[remoting.ConfigPageCacheBusy] = strconv.FormatInt(limits.PageCacheBusyMillis, 10)
	}
	var body strings.Builder
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		body.WriteString(k + "=" + entries[k] + "\n")
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(body.String())
	resp.ExtFields = map[string]string{"version": fmt.Sprintf(`{"counter":%d,"stateVersion":0,"timestamp":%d}`, counter, stamp)}
	return resp
}
