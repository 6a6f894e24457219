package remoting

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// MasterID is the brokerAddrs key of a broker group's master.
const MasterID int64 = 0

// TopicRouteData is a name server's answer to GET_ROUTEINFO_BY_TOPIC: which broker groups hold
// the topic, with how many queues, and where each broker of a group listens.
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// QueueData describes a topic's queues on one broker group.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	// TopicSysFlag was called topicSynFlag before RocketMQ 4.9.0; both names are read.
	TopicSysFlag int32 `json:"topicSysFlag"`
}

// UnmarshalJSON accepts the pre-4.9.0 field name topicSynFlag as well.
func (q *QueueData) UnmarshalJSON(b []byte) error {
	type plain QueueData
	var v struct {
		plain
		TopicSynFlag *int32 `json:"topicSynFlag"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*q = QueueData(v.plain)
	if v.TopicSynFlag != nil && q.TopicSysFlag == 0 {
		q.TopicSysFlag = *v.TopicSynFlag
	}
	return nil
}

// BrokerData describes one broker group: its name, cluster and the address of each broker by
// broker id (MasterID = master).
type BrokerData struct {
	Cluster            string           `json:"cluster"`
	BrokerName         string           `json:"brokerName"`
	BrokerAddrs        map[int64]string `json:"brokerAddrs"`
	EnableActingMaster bool             `json:"enableActingMaster"`
	ZoneName           string           `json:"zoneName,omitempty"`
}

// MasterAddr returns the master's address, or "" when the group has no master.
func (b *BrokerData) MasterAddr() string { return b.BrokerAddrs[MasterID] }

// DecodeTopicRouteData parses route JSON in either form a name server writes: standard JSON, or
// the legacy fastjson form whose integer map keys are unquoted ({0:"127.0.0.1:10911"}).
//
// An answer beyond the bounds (MaxNameServerBody, MaxRouteBrokers, MaxQueueNums, MaxNameLength,
// MaxAddrLength) gives a *LimitError; lists longer than MaxRouteBrokers are refused while the body
// is scanned, before anything is decoded from it.
func DecodeTopicRouteData(b []byte) (*TopicRouteData, error) {
	if err := checkBody("route", b); err != nil {
		return nil, fmt.Errorf("route data: %w", err)
	}
	fixed, err := quoteIntegerKeys(b, MaxRouteBrokers)
	if err != nil {
		return nil, fmt.Errorf("route data: %w", err)
	}
	var r TopicRouteData
	if err := json.Unmarshal(fixed, &r); err != nil {
		return nil, fmt.Errorf("route data: %w", err)
	}
	if err := r.checkBounds(); err != nil {
		return nil, fmt.Errorf("route data: %w", err)
	}
	return &r, nil
}

// MarshalStandard returns the route as standard JSON, the form a name server sends to clients
// announcing version >= 401 or acceptStandardJsonOnly.
func (r *TopicRouteData) MarshalStandard() ([]byte, error) {
	c := *r
	if c.FilterServerTable == nil {
		c.FilterServerTable = map[string][]string{}
	}
	if c.QueueDatas == nil {
		c.QueueDatas = []QueueData{}
	}
	if c.BrokerDatas == nil {
		c.BrokerDatas = []BrokerData{}
	}
	return json.Marshal(&c)
}

// MarshalLegacy returns the route in fastjson's default form, with brokerAddrs keys unquoted,
// the form older clients (such as rocketmq-client-go) receive.
func (r *TopicRouteData) MarshalLegacy() []byte {
	b := []byte(`{"brokerDatas":[`)
	for i, bd := range r.BrokerDatas {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"brokerAddrs":{`...)
		ids := make([]int64, 0, len(bd.BrokerAddrs))
		for id := range bd.BrokerAddrs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for j, id := range ids {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
			b = append(b, ':')
			b = appendStdJSONString(b, bd.BrokerAddrs[id])
		}
		b = append(b, `},"brokerName":`...)
		b = appendStdJSONString(b, bd.BrokerName)
		b = append(b, `,"cluster":`...)
		b = appendStdJSONString(b, bd.Cluster)
		b = append(b, `,"enableActingMaster":`...)
		b = strconv.AppendBool(b, bd.EnableActingMaster)
		if bd.ZoneName != "" {
			b = append(b, `,"zoneName":`...)
			b = appendStdJSONString(b, bd.ZoneName)
		}
		b = append(b, '}')
	}
	b = append(b, `],"filterServerTable":{}`...)
	if r.OrderTopicConf != "" {
		b = append(b, `,"orderTopicConf":`...)
		b = appendStdJSONString(b, r.OrderTopicConf)
	}
	b = append(b, `,"queueDatas":[`...)
	for i, q := range r.QueueDatas {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"brokerName":`...)
		b = appendStdJSONString(b, q.BrokerName)
		b = append(b, `,"perm":`...)
		b = strconv.AppendInt(b, int64(q.Perm), 10)
		b = append(b, `,"readQueueNums":`...)
		b = strconv.AppendInt(b, int64(q.ReadQueueNums), 10)
		b = append(b, `,"topicSysFlag":`...)
		b = strconv.AppendInt(b, int64(q.TopicSysFlag), 10)
		b = append(b, `,"writeQueueNums":`...)
		b = strconv.AppendInt(b, int64(q.WriteQueueNums), 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendStdJSONString writes s with encoding/json's escaping (valid UTF-8 output).
func appendStdJSONString(dst []byte, s string) []byte {
	q, _ := json.Marshal(s) // strings always marshal
	return append(dst, q...)
}

// QuoteIntegerKeys rewrites object keys written as bare numbers (fastjson's output for maps with
// integer keys) into quoted strings, so the result is standard JSON. Everything else is copied
// unchanged; input that is already standard JSON comes back equal. Malformed input gives an
// error; the function never panics.
func QuoteIntegerKeys(b []byte) ([]byte, error) { return quoteIntegerKeys(b, 0) }

// quoteIntegerKeys is QuoteIntegerKeys that also refuses, with a *LimitError, any object or
// array with more than maxMembers members (0: no bound), so a body listing too much is refused
// before it is decoded.
func quoteIntegerKeys(b []byte, maxMembers int) ([]byte, error) {
	out := make([]byte, 0, len(b)+16)
	// stack records, per open container, whether it is an object and whether a key comes next,
	// how many commas separate its members so far, and the key it is the value of (for errors).
	type frame struct {
		object, wantKey bool
		commas          int
		key, lastKey    []byte
	}
	stack := make([]frame, 0, 8)
	for i := 0; i < len(b); {
		c := b[i]
		top := len(stack) - 1
		switch {
		case c == '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			out = append(out, b[i:j+1]...)
			if top >= 0 && stack[top].object && stack[top].wantKey {
				stack[top].wantKey = false
				stack[top].lastKey = b[i+1 : j]
			}
			i = j + 1
			continue
		case c == '{' || c == '[':
			if len(stack) >= maxJSONDepth {
				return nil, fmt.Errorf("nesting deeper than %d at offset %d", maxJSONDepth, i)
			}
			f := frame{object: c == '{', wantKey: c == '{'}
			if top >= 0 && stack[top].object {
				f.key = stack[top].lastKey
			}
			stack = append(stack, f)
		case c == '}' || c == ']':
			if top < 0 || stack[top].object != (c == '}') {
				return nil, fmt.Errorf("unbalanced %q at offset %d", c, i)
			}
			stack = stack[:top]
		case c == ',':
			if top >= 0 {
				stack[top].commas++
				if maxMembers > 0 && stack[top].commas >= maxMembers {
					return nil, overLimit(nil, "%.64q lists more than %d entries, beyond the bound of %d", stack[top].key, maxMembers, maxMembers)
				}
			}
			if top >= 0 && stack[top].object {
				stack[top].wantKey = true
			}
		case top >= 0 && stack[top].object && stack[top].wantKey && (c == '-' || (c >= '0' && c <= '9')):
			j := i + 1
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			out = append(out, '"')
			out = append(out, b[i:j]...)
			out = append(out, '"')
			stack[top].wantKey = false
			i = j
			continue
		}
		out = append(out, c)
		i++
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unterminated JSON: %d open containers", len(stack))
	}
	return out, nil
}

// ClusterInfo is the body of a name server's answer to GET_BROKER_CLUSTER_INFO: the broker groups
// it knows, by name, and their names by cluster.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// DecodeClusterInfo parses a GET_BROKER_CLUSTER_INFO body in either JSON form (fastjson writes
// brokerAddrs with bare integer keys).
//
// An answer beyond the bounds (MaxNameServerBody, MaxClusterBrokers, MaxNameLength, MaxAddrLength)
// gives a *LimitError; lists longer than MaxClusterBrokers are refused while the body is scanned,
// before anything is decoded from it.
func DecodeClusterInfo(b []byte) (*ClusterInfo, error) {
	if err := checkBody("cluster info", b); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	std, err := quoteIntegerKeys(b, MaxClusterBrokers)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	var info ClusterInfo
	if err := json.Unmarshal(std, &info); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	if err := info.checkBounds(); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return &info, nil
}
