package brokersim

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/poll"
	"github.com/detourmq/detour/pkg/remoting"
)

func startBroker(t *testing.T, name string, opts Options) *Broker {
	t.Helper()
	b, err := StartBrokerWith(name, "127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func newClient(t *testing.T) *remoting.Client {
	c := remoting.NewClient(remoting.ClientOptions{DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sendReq builds a V2 (or V1) send of body to topic/queue with a fresh UNIQ_KEY.
func sendReq(topic string, queue int32, body string, v2 bool) (*remoting.Command, string) {
	key := remoting.NewUniqID()
	m := &remoting.Message{Topic: topic, Tags: "T", Body: []byte(body), Properties: map[string]string{
		remoting.PropertyUniqKey: key, remoting.PropertyWaitStoreMsgOK: "true",
	}}
	h := &remoting.SendHeader{
		ProducerGroup: "g", Topic: topic, DefaultTopic: remoting.DefaultTopic, DefaultTopicQueueNums: 4,
		QueueID: queue, BornTimestamp: time.Now().UnixMilli(), Properties: m.EncodeProperties(), BrokerName: "b",
	}
	return remoting.NewSendRequest(h, m.Body, v2), key
}

func invoke(t *testing.T, c *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	resp, err := c.Invoke(timeout(t, 5*time.Second), addr, req)
	if err != nil {
		t.Fatalf("%v: %v", req, err)
	}
	return resp
}

// waitFor polls cond until it holds or 30 seconds pass (room for a machine whose cores are busy).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, time.Millisecond, what, poll.True(cond))
}

func TestSendsAreStoredWithIncreasingOffsets(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 2)
	c := newClient(t)
	for i, v2 := range []bool{false, true, false, true} {
		req, key := sendReq("T", 1, "m", v2)
		r, err := remoting.ParseSendResponse(invoke(t, c, b.Addr(), req))
		if err != nil {
			t.Fatal(err)
		}
		if r.QueueID != 1 || r.QueueOffset != int64(i) || r.TransactionID != key || r.RegionID != remoting.DefaultRegionID || !r.TraceOn {
			t.Fatalf("send %d: %+v", i, r)
		}
		host, _, err := remoting.ParseOffsetMsgID(r.MsgID)
		if err != nil || host != netip.MustParseAddrPort(b.Addr()) {
			t.Fatalf("msgId %s names %v: %v", r.MsgID, host, err)
		}
		m := b.Messages("T", 1)[i]
		if m.UniqKey != key || m.QueueOffset != int64(i) || m.MsgID != r.MsgID || m.Tags != "T" || string(m.Body) != "m" || m.ProducerGroup != "g" {
			t.Fatalf("stored %+v", m)
		}
	}
	off, err := remoting.ParseMaxOffsetResponse(invoke(t, c, b.Addr(), remoting.NewGetMaxOffsetRequest("T", 1)))
	if err != nil || off != 4 {
		t.Fatalf("max offset %d, %v; want 4", off, err)
	}
	s := b.Stats()
	if s.SendsReceived != 4 || s.MessagesStored != 4 || s.Topics["T"].Queues[1] != (QueueStats{Received: 4, Stored: 4}) || s.Topics["T"].Queues[0] != (QueueStats{}) {
		t.Fatalf("stats %+v", s)
	}
	if s.RequestsByCode[remoting.SendMessage] != 2 || s.RequestsByCode[remoting.SendMessageV2] != 2 || s.Responses != 5 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBatchSendStoresEveryMessage(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 1)
	c := newClient(t)
	var msgs []*remoting.Message
	for i := 0; i < 3; i++ {
		msgs = append(msgs, &remoting.Message{Body: []byte{'a' + byte(i)}, Properties: map[string]string{remoting.PropertyUniqKey: remoting.NewUniqID()}})
	}
	body, _, err := remoting.AppendBatch(nil, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	batchKey := remoting.NewUniqID()
	h := &remoting.SendHeader{ProducerGroup: "g", Topic: "T", DefaultTopic: remoting.DefaultTopic, DefaultTopicQueueNums: 4, Batch: true,
		Properties: (&remoting.Message{Properties: map[string]string{remoting.PropertyUniqKey: batchKey}}).EncodeProperties()}
	first, _ := sendReq("T", 0, "single", true)
	invoke(t, c, b.Addr(), first)
	r, err := remoting.ParseSendResponse(invoke(t, c, b.Addr(), remoting.NewSendRequest(h, body, true)))
	if err != nil {
		t.Fatal(err)
	}
	if r.QueueOffset != 1 || len(strings.Split(r.MsgID, ",")) != 3 || r.TransactionID != batchKey || r.BatchUniqID != "" {
		t.Fatalf("batch response %+v", r)
	}
	stored := b.Messages("T", 0)
	for i, m := range msgs {
		if got := stored[1+i]; got.UniqKey != m.Properties[remoting.PropertyUniqKey] || !got.Batch || got.QueueOffset != int64(1+i) {
			t.Fatalf("batch message %d stored as %+v", i, got)
		}
	}
}

func TestBrokerAnswersLikeAJavaBroker(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	b.CreateTopic("T", 2)
	c := newClient(t)
	badHeader, _ := sendReq("T", 0, "x", true)
	delete(badHeader.ExtFields, "b")
	bigBody, _ := sendReq("T", 0, strings.Repeat("x", 4<<20+1), true)
	outOfRange, _ := sendReq("T", 2, "x", true)
	badTopic, _ := sendReq("bad topic", 0, "x", true)
	noBody, _ := sendReq("Nope", 0, "", true)
	tests := []struct {
		name   string
		req    *remoting.Command
		code   int16
		remark string
	}{
		{"heartbeat", remoting.NewHeartbeatRequest("127.0.0.1@1", "g"), remoting.Success, ""},
		{"create topic", remoting.NewCreateTopicRequest("Created", 8, 8, remoting.PermReadWrite), remoting.Success, ""},
		{"create topic with zero queues", remoting.NewCreateTopicRequest("Zero", 0, 0, remoting.PermReadWrite), remoting.Success, "not set any response code"},
		{"create topic with more queues than the simulator keeps", remoting.NewCreateTopicRequest("Huge", 1<<16+1, 1, remoting.PermReadWrite), remoting.SystemError, "above 65536"},
		{"create topic with a bad name", remoting.NewCreateTopicRequest("a/b", 1, 1, remoting.PermReadWrite), remoting.InvalidParameter, "illegal characters"},
		{"max offset of an unknown topic", remoting.NewGetMaxOffsetRequest("Nope", 0), remoting.Success, ""},
		{"max offset without a queue id", remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": "T"}, nil), remoting.SystemError, "needs topic and queueId"},
		{"send without a topic", badHeader, remoting.SystemError, "lacks required field topic"},
		{"send with a body over 4 MiB", bigBody, remoting.MessageIllegal, "msg body length limit 4194304B"},
		{"send to a queue the topic does not have", outOfRange, remoting.InvalidParameter, "queueId[2] is illegal"},
		{"send to an illegal topic name", badTopic, remoting.InvalidParameter, "illegal characters"},
		{"send without a body, even to an unknown topic", noBody, remoting.SystemError, "java.lang.NullPointerException: Cannot read the array length"},
		{"unknown request code", remoting.NewRequest(remoting.PullMessage, nil, nil), remoting.RequestCodeNotSupported, "request type 11 not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := invoke(t, c, b.Addr(), tt.req)
			if resp.Code != tt.code || !strings.Contains(resp.Remark, tt.remark) {
				t.Fatalf("answer %v, want code %d with remark %q", resp, tt.code, tt.remark)
			}
		})
	}
	if s := b.Stats(); s.Heartbeats != 1 || s.MessagesStored != 0 {
		t.Fatalf("stats %+v", s)
	}
	if cfg, ok := b.topic("Created"); !ok || cfg.WriteQueues != 8 || cfg.Perm != remoting.PermReadWrite {
		t.Fatalf("created topic %+v %v", cfg, ok)
	}
}

func TestUnknownTopicsAreAutoCreatedOrRefused(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	req, _ := sendReq("Fresh", 3, "x", true)
	if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.Success {
		t.Fatalf("auto-create send: %v", resp)
	}
	if cfg, _ := b.topic("Fresh"); cfg.WriteQueues != 4 || cfg.ReadQueues != 4 {
		t.Fatalf("auto-created %+v, want 4 queues", cfg)
	}
	b.SetAutoCreate(false)
	req, _ = sendReq("Other", 0, "x", true)
	wantRemark := "topic[Other] not exist, apply first please!\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
	if resp := invoke(t, c, b.Addr(), req); resp.Code != remoting.TopicNotExist || resp.Remark != wantRemark {
		t.Fatalf("send without auto-create: %v", resp)
	}
	for _, cfg := range b.Topics() {
		if cfg.Name == remoting.DefaultTopic {
			t.Fatal("TBW102 is listed with auto-create off")
		}
	}
}

func TestResponsesUseTheRequestSerialisationUnlessFixed(t *testing.T) {
	rocket := remoting.RocketMQ
	mirror := startBroker(t, "mirror", Options{})
	fixed := startBroker(t, "fixed", Options{ResponseType: &rocket})
	c := newClient(t)
	for _, tt := range []struct {
		b        *Broker
		req, got remoting.SerializeType
	}{
		{mirror, remoting.JSON, remoting.JSON}, {mirror, remoting.RocketMQ, remoting.RocketMQ},
		{fixed, remoting.JSON, remoting.RocketMQ},
	} {
		req := remoting.NewHeartbeatRequest("c", "g")
		req.SerializeType = tt.req
		if resp := invoke(t, c, tt.b.Addr(), req); resp.SerializeType != tt.got || resp.Code != remoting.Success {
			t.Fatalf("%s: %v request answered with %v", tt.b.Name(), tt.req, resp.SerializeType)
		}
	}
}

func TestOnewaySendsAreStoredWithoutAnswer(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	req, key := sendReq("T", 0, "x", true)
	if err := c.InvokeOneway(timeout(t, 5*time.Second), b.Addr(), req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "oneway stored", func() bool { return b.StoredByUniqKey()[key] == 1 })
	if s := b.Stats(); s.Responses != 0 {
		t.Fatalf("oneway answered: %+v", s)
	}
}

func TestNameServerRoutes(t *testing.T) {
	a := startBroker(t, "broker-a", Options{})
	bb := startBroker(t, "broker-b", Options{Cluster: "C2"})
	a.CreateTopic("T", 4)
	bb.CreateTopic("T", 2)
	a.CreateTopic("OnlyA", 1)
	ns, err := StartNameServer("127.0.0.1:0", a, bb)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c := newClient(t)

	route := func(topic string, version int16) (*remoting.Command, *remoting.TopicRouteData, error) {
		req := remoting.NewGetRouteInfoRequest(topic)
		req.Version = version
		resp := invoke(t, c, ns.Addr(), req)
		r, err := remoting.ParseRouteResponse(resp)
		return resp, r, err
	}
	t.Run("both brokers, standard JSON for current clients", func(t *testing.T) {
		resp, r, err := route("T", remoting.DefaultVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Body), `"0":"`+a.Addr()+`"`) {
			t.Fatalf("body %s", resp.Body)
		}
		if len(r.QueueDatas) != 2 || r.QueueDatas[0] != (remoting.QueueData{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}) ||
			r.QueueDatas[1].WriteQueueNums != 2 || r.BrokerDatas[1].Cluster != "C2" || r.BrokerDatas[1].MasterAddr() != bb.Addr() {
			t.Fatalf("route %+v", r)
		}
	})
	t.Run("legacy JSON for clients older than 4.9.4", func(t *testing.T) {
		resp, r, err := route("OnlyA", 317)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Body), `{0:"`+a.Addr()+`"}`) || len(r.BrokerDatas) != 1 {
			t.Fatalf("body %s", resp.Body)
		}
	})
	t.Run("acceptStandardJsonOnly asks for standard JSON", func(t *testing.T) {
		req := remoting.NewGetRouteInfoRequest("OnlyA")
		req.Version = 317
		req.ExtFields["acceptStandardJsonOnly"] = "true"
		if resp := invoke(t, c, ns.Addr(), req); !strings.Contains(string(resp.Body), `"0":`) {
			t.Fatalf("body %s", resp.Body)
		}
	})
	t.Run("unknown topic", func(t *testing.T) {
		_, _, err := route("Nope", remoting.DefaultVersion)
		var re *remoting.ResponseError
		if !errors.As(err, &re) || re.Code != remoting.TopicNotExist || !strings.Contains(re.Remark, "No topic route info in name server for the topic: Nope") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("TBW102 is routable while brokers auto-create", func(t *testing.T) {
		if _, r, err := route(remoting.DefaultTopic, remoting.DefaultVersion); err != nil || len(r.QueueDatas) != 2 {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("a topic created over the wire is routable at once", func(t *testing.T) {
		invoke(t, c, bb.Addr(), remoting.NewCreateTopicRequest("Late", 3, 3, remoting.PermReadWrite))
		if _, r, err := route("Late", remoting.DefaultVersion); err != nil || len(r.QueueDatas) != 1 || r.QueueDatas[0].BrokerName != "broker-b" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("removed brokers leave the route", func(t *testing.T) {
		ns.RemoveBroker("broker-b")
		if _, r, err := route("T", remoting.DefaultVersion); err != nil || len(r.QueueDatas) != 1 {
			t.Fatalf("%+v %v", r, err)
		}
		ns.AddBroker(bb)
		if _, r, _ := route("T", remoting.DefaultVersion); len(r.QueueDatas) != 2 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("other requests are not supported", func(t *testing.T) {
		if resp := invoke(t, c, ns.Addr(), remoting.NewHeartbeatRequest("c")); resp.Code != remoting.RequestCodeNotSupported {
			t.Fatalf("%v", resp)
		}
	})
	if ns.RouteQueries() < 7 {
		t.Fatalf("route queries %d", ns.RouteQueries())
	}
}
