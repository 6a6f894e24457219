package remoting

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bounds on a broker's GET_BROKER_RUNTIME_INFO answer. A Java broker's table has about 80 entries
// of short values (about 4 KiB in all); the bounds leave room for plugins that add their own.
const (
	// MaxRuntimeInfoBody bounds the answer's body, in bytes.
	MaxRuntimeInfoBody = 64 << 10
	// MaxRuntimeInfoEntries bounds the entries of its table.
	MaxRuntimeInfoEntries = 1024
)

// Keys of a broker's runtime table (AdminBrokerProcessor.prepareRuntimeInfo and the store's
// getRuntimeInfo), the same in RocketMQ 4.9.x and 5.x, that say how pressed its send path is.
const (
	RuntimeSendQueueSize     = "sendThreadPoolQueueSize"
	RuntimeSendQueueCapacity = "sendThreadPoolQueueCapacity"
	// RuntimeSendQueueHeadWait is how long the oldest send in the send queue has waited, in ms:
	// past waitTimeMillsInSendQueue (200 ms by default) the broker refuses it as busy.
	RuntimeSendQueueHeadWait = "sendThreadPoolQueueHeadWaitTimeMills"
	// RuntimePageCacheLock is how long the put in progress has held the commit log's lock, in
	// ms (0 when none): past osPageCacheBusyTimeOutMills (1000 ms) the broker refuses sends.
	RuntimePageCacheLock = "pageCacheLockTimeMills"
	// RuntimePutLatency99 is the 99th percentile of recent put times, in ms with two decimals.
	RuntimePutLatency99 = "putLatency99"
)

// NewGetBrokerRuntimeInfoRequest builds a GET_BROKER_RUNTIME_INFO request, which a broker answers
// with its runtime table (a KVTable) in the body.
func NewGetBrokerRuntimeInfoRequest() *Command {
	return NewRequest(GetBrokerRuntimeInfo, nil, nil)
}

// BrokerPressure is what a broker's runtime table says about its send path. A figure the table
// lacks, or whose value does not parse, is -1.
type BrokerPressure struct {
	SendQueueSize, SendQueueCapacity int64
	SendQueueHeadWaitMillis          int64
	PageCacheLockMillis              int64
	PutLatency99Millis               float64
}

// SendQueueFillPercent is the send queue's size as a share of its capacity, or -1 when either
// is unknown or the capacity is not positive.
func (p BrokerPressure) SendQueueFillPercent() float64 {
	if p.SendQueueSize < 0 || p.SendQueueCapacity <= 0 {
		return -1
	}
	return 100 * float64(p.SendQueueSize) / float64(p.SendQueueCapacity)
}

// ParseBrokerRuntimeInfo reads a GET_BROKER_RUNTIME_INFO answer into the broker's table,
// refusing a body or a table beyond MaxRuntimeInfoBody or MaxRuntimeInfoEntries before anything
// is built from it, and a table that is not a JSON object of strings.
func ParseBrokerRuntimeInfo(resp *Command) (map[string]string, error) {
	if resp.Code != Success {
		return nil, &ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	if len(resp.Body) > MaxRuntimeInfoBody {
		return nil, overLimit(nil, "runtime info body of %d bytes is over the limit of %d", len(resp.Body), MaxRuntimeInfoBody)
	}
	// Counting the entries first bounds the map built below: a 64 KiB body of tiny entries
	// could otherwise hold thousands.
	var raw struct {
		Table map[string]json.RawMessage `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &raw); err != nil {
		return nil, fmt.Errorf("remoting: runtime info: %w", err)
	}
	if len(raw.Table) > MaxRuntimeInfoEntries {
		return nil, overLimit(nil, "runtime info of %d entries is over the limit of %d", len(raw.Table), MaxRuntimeInfoEntries)
	}
	table := make(map[string]string, len(raw.Table))
	for k, v := range raw.Table {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("remoting: runtime info: entry %.64q is not a string", k)
		}
		table[k] = s
	}
	return table, nil
}

// PressureOf reads the send path's figures from a broker's runtime table.
func PressureOf(table map[string]string) BrokerPressure {
	integer := func(key string) int64 {
		v, err := strconv.ParseInt(strings.TrimSpace(table[key]), 10, 64)
		if err != nil || v < 0 {
			return -1
		}
		return v
	}
	p := BrokerPressure{
		SendQueueSize:           integer(RuntimeSendQueueSize),
		SendQueueCapacity:       integer(RuntimeSendQueueCapacity),
		SendQueueHeadWaitMillis: integer(RuntimeSendQueueHeadWait),
		PageCacheLockMillis:     integer(RuntimePageCacheLock),
		PutLatency99Millis:      -1,
	}
	if v, err := strconv.ParseFloat(strings.TrimSpace(table[RuntimePutLatency99]), 64); err == nil && v >= 0 && !math.IsInf(v, 0) {
		p.PutLatency99Millis = v
	}
	return p
}
