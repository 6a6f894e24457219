package producer

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// routeBesideHostile adds broker-h, a hostile peer at addr, to c and routes the test topic under
// policy "test" over broker-a, broker-c and broker-h, two queues each.
func routeBesideHostile(t *testing.T, c *simCluster, addr string) {
	t.Helper()
	c.r.SetBroker(Broker{Name: "broker-h", Addr: addr, Ready: true})
	rt := Route{Topic: testTopic, Policy: "test"}
	for _, n := range []string{"broker-a", "broker-c", "broker-h"} {
		rt.Brokers = append(rt.Brokers, BrokerQueues{Broker: n, WriteQueues: 2})
	}
	if err := c.r.SetRoute(rt); err != nil {
		t.Fatal(err)
	}
}

// hostileRuntimeBroker answers GET_MAX_OFFSET as a healthy broker and GET_BROKER_RUNTIME_INFO
// with body, and counts the runtime-info requests it answered.
type hostileRuntimeBroker struct {
	ln    net.Listener
	body  []byte
	asked atomic.Int64
}

func startHostileRuntimeBroker(t *testing.T, body []byte) *hostileRuntimeBroker {
	t.Helper()
	h := &hostileRuntimeBroker{body: body}
	h.ln = startAnsweringBroker(t, 16<<20, func(req, resp *remoting.Command) {
		switch req.Code {
		case remoting.GetBrokerRuntimeInfo:
			resp.Body = h.body
			h.asked.Add(1)
		case remoting.GetMaxOffset:
			resp.ExtFields = map[string]string{"offset": "0"}
		}
	})
	return h
}

// TestHostileRuntimeTablesAreRefusedAndIsolateNothing proves a broker that answers the pressure
// poll with a table beyond the bounds, one of values that are not strings, or figures that do
// not parse, is neither held out nor shown with figures, and the runtime goes on polling it: a
// peer cannot make detour isolate it, or anyone, with what it says of itself.
func TestHostileRuntimeTablesAreRefusedAndIsolateNothing(t *testing.T) {
	many := make([]string, remoting.MaxRuntimeInfoEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":"%d"`, i, i)
	}
	cases := []struct {
		name    string
		body    string
		figures bool // the table reads, with every figure unknown
	}{
		{"a body over 64 KiB", `{"table":{"sendThreadPoolQueueSize":"` + strings.Repeat("9", remoting.MaxRuntimeInfoBody) + `"}}`, false},
		{"more entries than the bound", `{"table":{` + strings.Join(many, ",") + `}}`, false},
		{"values that are not strings", `{"table":{"sendThreadPoolQueueHeadWaitTimeMills":100000}}`, false},
		{"figures that do not parse", `{"table":{"sendThreadPoolQueueSize":"-1","sendThreadPoolQueueCapacity":"0",` +
			`"sendThreadPoolQueueHeadWaitTimeMills":"1e9","pageCacheLockTimeMills":"NaN","putLatency99":"Infinity"}}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hostile := startHostileRuntimeBroker(t, []byte(tc.body))
			c := startCluster(t, 2, []string{"broker-a", "broker-c"}, withPolicy(func(p *Policy) {
				watchPolicy(true)(p)
				p.Probe.Interval = 50 * time.Millisecond
				p.Pressure.Enabled = true
			}))
			routeBesideHostile(t, c, hostile.ln.Addr().String())
			waitFor(t, "five polls of the hostile broker", func() bool { return hostile.asked.Load() >= 5 })
			if items := c.r.Isolated("test"); len(items) != 0 {
				t.Fatalf("held out %+v", items)
			}
			var seen *BrokerPressure
			for _, f := range c.r.Pressure("test") {
				if f.Broker == "broker-h" {
					seen = &f
				}
			}
			switch {
			case !tc.figures && seen != nil:
				t.Fatalf("figures %+v kept from a refused answer", *seen)
			case tc.figures && (seen == nil || seen.Pressed || seen.SendQueueFillPercent() != -1 ||
				seen.SendQueueHeadWaitMillis != -1 || seen.PageCacheLockMillis != -1 || seen.PutLatency99Millis != -1):
				t.Fatalf("figures %+v, want every figure unknown and nothing pressed", seen)
			}
		})
	}
}
