package remoting

import (
	"errors"
	"fmt"
)

// Bounds on what a name server may say. RocketMQ itself sets none of these: a broker accepts any
// queue count in UPDATE_AND_CREATE_TOPIC (TopicValidator checks only the name), a name server
// relays whatever brokers register, and its clients allocate what a route says. A peer that
// claims 2^31 queues or lists a hundred thousand brokers would make the reader allocate without
// limit, so every answer is checked against these before anything is built from it. The values
// are far above what real clusters publish: a route of 1024 brokers with a master and two slaves
// each is about 400 KiB.
const (
	// MaxNameServerBody bounds the body of a name server's answer to GET_ROUTEINFO_BY_TOPIC or
	// GET_BROKER_CLUSTER_INFO, in bytes.
	MaxNameServerBody = 2 << 20
	// NameServerMaxFrameSize is the frame limit for a Client that only talks to name servers:
	// MaxNameServerBody and room for the header. A larger frame is refused as soon as its length
	// word is read, before it is buffered.
	NameServerMaxFrameSize = MaxNameServerBody + 64<<10
	// MaxRouteBrokers bounds the broker groups of one route (its queueDatas and brokerDatas),
	// the same bound as the brokers a Topic's status can list.
	MaxRouteBrokers = 1024
	// MaxClusterBrokers bounds the broker groups and the clusters of one GET_BROKER_CLUSTER_INFO
	// answer.
	MaxClusterBrokers = 4096
	// MaxQueueNums bounds a topic's read and write queue counts on one broker, the bound a
	// Topic's spec has; RocketMQ has no hard maximum.
	MaxQueueNums = 1024
	// MaxNameLength bounds a broker or cluster name in an answer, in bytes.
	MaxNameLength = 253
	// MaxAddrLength bounds a broker address in an answer: a DNS name, a colon and a port.
	MaxAddrLength = 261
)

// ErrOverLimit is wrapped by every *LimitError: a peer sent more than a bound allows, and what it
// sent was refused before it was used.
var ErrOverLimit = errors.New("remoting: beyond a bound")

// LimitError says which bound a peer's frame or answer went beyond. It wraps ErrOverLimit and,
// for frames, ErrFrame.
type LimitError struct {
	msg  string
	kind error
}

// Error implements error; the message names the bound.
func (e *LimitError) Error() string { return e.msg }

// Unwrap makes errors.Is true for ErrOverLimit and the error's kind (ErrFrame for frames).
func (e *LimitError) Unwrap() []error {
	if e.kind == nil {
		return []error{ErrOverLimit}
	}
	return []error{e.kind, ErrOverLimit}
}

// overLimit returns a *LimitError of kind (nil or ErrFrame) with a formatted message.
func overLimit(kind error, format string, args ...any) *LimitError {
	return &LimitError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// checkBody refuses a name-server answer body larger than MaxNameServerBody.
func checkBody(what string, b []byte) error {
	if len(b) > MaxNameServerBody {
		return overLimit(nil, "%s of %d bytes exceeds the bound of %d bytes", what, len(b), MaxNameServerBody)
	}
	return nil
}

// checkName refuses a name longer than MaxNameLength.
func checkName(what, s string) error {
	if len(s) > MaxNameLength {
		return overLimit(nil, "%s of %d bytes exceeds the bound of %d bytes", what, len(s), MaxNameLength)
	}
	return nil
}

// checkAddrs refuses broker addresses longer than MaxAddrLength.
func checkAddrs(broker string, addrs map[int64]string) error {
	for id, a := range addrs {
		if len(a) > MaxAddrLength {
			return overLimit(nil, "address of broker %.64q id %d of %d bytes exceeds the bound of %d bytes", broker, id, len(a), MaxAddrLength)
		}
	}
	return nil
}

// checkQueueNums refuses a queue count outside 0..MaxQueueNums.
func checkQueueNums(what, broker string, n int32) error {
	if n < 0 || n > MaxQueueNums {
		return overLimit(nil, "%s of broker %.64q: %d, outside the bound 0..%d", what, broker, n, MaxQueueNums)
	}
	return nil
}

// checkBounds refuses a route beyond MaxRouteBrokers, MaxQueueNums, MaxNameLength or
// MaxAddrLength.
func (r *TopicRouteData) checkBounds() error {
	if n := max(len(r.QueueDatas), len(r.BrokerDatas)); n > MaxRouteBrokers {
		return overLimit(nil, "route lists %d brokers, beyond the bound of %d", n, MaxRouteBrokers)
	}
	for _, q := range r.QueueDatas {
		if err := checkName("broker name", q.BrokerName); err != nil {
			return err
		}
		if err := checkQueueNums("write queues", q.BrokerName, q.WriteQueueNums); err != nil {
			return err
		}
		if err := checkQueueNums("read queues", q.BrokerName, q.ReadQueueNums); err != nil {
			return err
		}
	}
	for _, b := range r.BrokerDatas {
		if err := b.checkBounds(); err != nil {
			return err
		}
	}
	return nil
}

// checkBounds refuses a broker group whose names or addresses are beyond their bounds.
func (b *BrokerData) checkBounds() error {
	if err := checkName("broker name", b.BrokerName); err != nil {
		return err
	}
	if err := checkName("cluster name", b.Cluster); err != nil {
		return err
	}
	return checkAddrs(b.BrokerName, b.BrokerAddrs)
}

// checkBounds refuses cluster info beyond MaxClusterBrokers, MaxNameLength or MaxAddrLength.
func (c *ClusterInfo) checkBounds() error {
	if n := len(c.BrokerAddrTable); n > MaxClusterBrokers {
		return overLimit(nil, "cluster info lists %d brokers, beyond the bound of %d", n, MaxClusterBrokers)
	}
	if n := len(c.ClusterAddrTable); n > MaxClusterBrokers {
		return overLimit(nil, "cluster info lists %d clusters, beyond the bound of %d", n, MaxClusterBrokers)
	}
	for name, b := range c.BrokerAddrTable {
		if err := checkName("broker name", name); err != nil {
			return err
		}
		if err := b.checkBounds(); err != nil {
			return err
		}
	}
	for name := range c.ClusterAddrTable {
		if err := checkName("cluster name", name); err != nil {
			return err
		}
	}
	return nil
}
