package remoting

import (
	"fmt"
	"strconv"
	"strings"
)

// Bounds on a broker's GET_BROKER_CONFIG answer. A Java broker sends every key of its broker,
// store and remoting configuration, about 400 lines and 16 KiB in 5.x; the bounds leave room for
// plugins and long paths.
const (
	// MaxBrokerConfigBody bounds the answer's body, in bytes.
	MaxBrokerConfigBody = 256 << 10
	// MaxBrokerConfigEntries bounds the entries of its configuration.
	MaxBrokerConfigEntries = 4096
)

// Keys of a broker's configuration (BrokerConfig and MessageStoreConfig, the same in RocketMQ
// 4.9.x and 5.x) that set when it refuses sends as busy.
const (
	// ConfigSendQueueWait is waitTimeMillsInSendQueue: a send that waited in the send queue at
	// least this long (200 ms by default) is refused as [TIMEOUT_CLEAN_QUEUE].
	ConfigSendQueueWait = "waitTimeMillsInSendQueue"
	// ConfigPageCacheBusy is osPageCacheBusyTimeOutMills: while the put in progress has held the
	// commit log's lock longer than this (1000 ms by default), sends are refused as busy.
	ConfigPageCacheBusy = "osPageCacheBusyTimeOutMills"
)

// NewGetBrokerConfigRequest builds a GET_BROKER_CONFIG request, which a broker answers with its
// configuration as properties text in the body and the configuration's data version in the
// "version" header field.
func NewGetBrokerConfigRequest() *Command {
	return NewRequest(GetBrokerConfig, nil, nil)
}

// BrokerConfig is a broker's configuration as GET_BROKER_CONFIG gave it.
type BrokerConfig struct {
	// Entries are the configuration's keys and values.
	Entries map[string]string
	// Version is the configuration's data version (a JSON DataVersion the broker advances on
	// every updateBrokerConfig), as sent; "" when the answer had none.
	Version string
}

// ParseBrokerConfig reads a GET_BROKER_CONFIG answer, refusing a body or a configuration beyond
// MaxBrokerConfigBody or MaxBrokerConfigEntries. The body is read as the broker writes it
// (MixAll.properties2String: one "key=value" line per entry, unescaped); blank lines and
// comments are skipped, and a line without "=" is a key with an empty value, as
// java.util.Properties reads it.
func ParseBrokerConfig(resp *Command) (BrokerConfig, error) {
	if resp.Code != Success {
		return BrokerConfig{}, &ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	if len(resp.Body) > MaxBrokerConfigBody {
		return BrokerConfig{}, overLimit(nil, "broker config body of %d bytes is over the limit of %d", len(resp.Body), MaxBrokerConfigBody)
	}
	entries := make(map[string]string)
	for line := range strings.Lines(string(resp.Body)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if _, seen := entries[k]; !seen && len(entries) == MaxBrokerConfigEntries {
			return BrokerConfig{}, overLimit(nil, "broker config of more than %d entries is over the limit", MaxBrokerConfigEntries)
		}
		entries[k] = strings.TrimSpace(v)
	}
	return BrokerConfig{Entries: entries, Version: resp.ExtFields["version"]}, nil
}

// BrokerLimits are the waits past which a broker refuses sends as busy, in ms; -1 when its
// configuration lacks the key or its value does not parse. A negative value the broker was given
// reads as 0: the broker compares every wait against it, so it refuses as 0 does.
type BrokerLimits struct {
	SendQueueWaitMillis int64
	PageCacheBusyMillis int64
}

// LimitsOf reads the busy limits from a broker's configuration.
func LimitsOf(c BrokerConfig) BrokerLimits {
	millis := func(key string) int64 {
		v, err := strconv.ParseInt(c.Entries[key], 10, 64)
		if err != nil {
			return -1
		}
		return max(v, 0)
	}
	return BrokerLimits{SendQueueWaitMillis: millis(ConfigSendQueueWait), PageCacheBusyMillis: millis(ConfigPageCacheBusy)}
}

// String names the limits for logs.
func (l BrokerLimits) String() string {
	return fmt.Sprintf("send queue wait %d ms, page cache busy %d ms", l.SendQueueWaitMillis, l.PageCacheBusyMillis)
}
