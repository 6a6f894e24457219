package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// routeOf returns a standard-JSON route of n brokers with the given queue counts, named
// broker-0 .. broker-(n-1).
func routeOf(n int, write, read int32) []byte {
	r := &TopicRouteData{}
	for i := range n {
		name := fmt.Sprintf("broker-%d", i)
		r.QueueDatas = append(r.QueueDatas, QueueData{BrokerName: name, WriteQueueNums: write, ReadQueueNums: read, Perm: 6})
		r.BrokerDatas = append(r.BrokerDatas, BrokerData{Cluster: "c", BrokerName: name, BrokerAddrs: map[int64]string{0: "127.0.0.1:10911"}})
	}
	b, err := r.MarshalStandard()
	if err != nil {
		panic(err)
	}
	return b
}

// clusterInfoOf returns cluster info of n brokers in one cluster.
func clusterInfoOf(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"brokerAddrTable":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"broker-%d":{"cluster":"c","brokerName":"broker-%d","brokerAddrs":{0:"127.0.0.1:10911"}}`, i, i)
	}
	b.WriteString(`},"clusterAddrTable":{"c":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"broker-%d"`, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

func TestNameServerAnswersBeyondABoundAreRefusedNamingIt(t *testing.T) {
	long := strings.Repeat("x", MaxNameLength+1)
	tests := []struct {
		name      string
		body      []byte
		cluster   bool   // decode as GET_BROKER_CLUSTER_INFO, else as a route
		wantBound string // part of the error naming the bound; "" means accepted
	}{
		{name: "route at every bound", body: routeOf(MaxRouteBrokers, MaxQueueNums, MaxQueueNums)},
		{name: "2^31-1 write queues", body: routeOf(1, 1<<31-1, 4), wantBound: "write queues of broker \"broker-0\": 2147483647, outside the bound 0..1024"},
		{name: "one write queue beyond the bound", body: routeOf(1, MaxQueueNums+1, 4), wantBound: "outside the bound 0..1024"},
		{name: "negative read queues", body: routeOf(1, 4, -1), wantBound: "read queues of broker \"broker-0\": -1"},
		{name: "one broker beyond the bound", body: routeOf(MaxRouteBrokers+1, 1, 1), wantBound: "lists more than 1024 entries, beyond the bound of 1024"},
		{name: "route body beyond the bound", body: append(routeOf(1, 1, 1), make([]byte, MaxNameServerBody)...), wantBound: "exceeds the bound of 2097152 bytes"},
		{name: "broker name beyond the bound", body: []byte(`{"queueDatas":[{"brokerName":"` + long + `","writeQueueNums":1}],"brokerDatas":[]}`), wantBound: "broker name of 254 bytes exceeds the bound of 253 bytes"},
		{name: "broker address beyond the bound", body: []byte(`{"queueDatas":[],"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:"` + strings.Repeat("a", MaxAddrLength+1) + `"}}]}`), wantBound: "of 262 bytes exceeds the bound of 261 bytes"},
		{name: "cluster info at the bound", body: clusterInfoOf(MaxClusterBrokers), cluster: true},
		{name: "cluster info one broker beyond the bound", body: clusterInfoOf(MaxClusterBrokers + 1), cluster: true, wantBound: "lists more than 4096 entries, beyond the bound of 4096"},
		{name: "cluster info body beyond the bound", body: append(clusterInfoOf(1), make([]byte, MaxNameServerBody)...), cluster: true, wantBound: "exceeds the bound of 2097152 bytes"},
		{name: "cluster name beyond the bound", body: []byte(`{"brokerAddrTable":{},"clusterAddrTable":{"` + long + `":[]}}`), cluster: true, wantBound: "cluster name of 254 bytes exceeds the bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.cluster {
				_, err = DecodeClusterInfo(tt.body)
			} else {
				_, err = ParseRouteResponse(&Command{Code: Success, Body: tt.body})
			}
			if tt.wantBound == "" {
				if err != nil {
					t.Fatalf("refused an answer within the bounds: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrOverLimit) || !strings.Contains(err.Error(), tt.wantBound) {
				t.Fatalf("err = %v, want ErrOverLimit naming %q", err, tt.wantBound)
			}
		})
	}
}

func TestANameServerFrameBeyondTheBoundIsRefusedBeforeItIsRead(t *testing.T) {
	// The peer claims a 15 MiB answer and sends nothing more: the client must refuse it on the
	// length word, not wait for (or buffer) the body.
	srv := startTestServer(t, func(sc *serverConn, req *Command) {
		_ = sc.fw.WriteRaw(binary.BigEndian.AppendUint32(nil, 15<<20))
	})
	c := newTestClient(t, ClientOptions{MaxFrameSize: NameServerMaxFrameSize})
	_, err := c.Invoke(ctxTimeout(t, 30*time.Second), srv.addr(), NewGetRouteInfoRequest("T"))
	if !errors.Is(err, ErrOverLimit) || !errors.Is(err, ErrFrame) ||
		!strings.Contains(err.Error(), fmt.Sprintf("exceeds the limit of %d bytes", NameServerMaxFrameSize)) {
		t.Fatalf("err = %v, want a frame ErrOverLimit naming the limit", err)
	}
}
