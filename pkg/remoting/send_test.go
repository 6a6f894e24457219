package remoting

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func sampleSendHeader() *SendHeader {
	return &SendHeader{
		ProducerGroup: "group", Topic: "TopicTest", DefaultTopic: DefaultTopic, DefaultTopicQueueNums: 4,
		QueueID: 3, SysFlag: 0, BornTimestamp: 1491978653614, Flag: 0,
		Properties: "WAIT\x01true\x02UNIQ_KEY\x01ABC\x02", ReconsumeTimes: 0, BrokerName: "broker-a",
	}
}

func TestSendHeaderFieldNames(t *testing.T) {
	h := sampleSendHeader()
	wantV1 := map[string]string{
		"producerGroup": "group", "topic": "TopicTest", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "3", "sysFlag": "0", "bornTimestamp": "1491978653614", "flag": "0",
		"properties": "WAIT\x01true\x02UNIQ_KEY\x01ABC\x02", "reconsumeTimes": "0", "unitMode": "false",
		"batch": "false", "bname": "broker-a",
	}
	wantV2 := map[string]string{
		"a": "group", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1491978653614",
		"h": "0", "i": "WAIT\x01true\x02UNIQ_KEY\x01ABC\x02", "j": "0", "k": "false", "m": "false", "n": "broker-a",
	}
	if got := h.V1(); !reflect.DeepEqual(got, wantV1) {
		t.Errorf("V1\n got %v\nwant %v", got, wantV1)
	}
	if got := h.V2(); !reflect.DeepEqual(got, wantV2) {
		t.Errorf("V2\n got %v\nwant %v", got, wantV2)
	}
	max := int32(16)
	h.MaxReconsumeTimes = &max
	if h.V1()["maxReconsumeTimes"] != "16" || h.V2()["l"] != "16" {
		t.Error("maxReconsumeTimes not written when set")
	}
}

func TestNewSendRequestPicksTheCode(t *testing.T) {
	h := sampleSendHeader()
	tests := []struct {
		name  string
		batch bool
		v2    bool
		code  int16
		key   string
	}{
		{"V1 is SEND_MESSAGE with long names", false, false, SendMessage, "producerGroup"},
		{"V2 is SEND_MESSAGE_V2 with letters", false, true, SendMessageV2, "a"},
		{"a batch is SEND_BATCH_MESSAGE with letters even when V1 is asked", true, false, SendBatchMessage, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hh := *h
			hh.Batch = tt.batch
			req := NewSendRequest(&hh, []byte("body"), tt.v2)
			if req.Code != tt.code || req.ExtFields[tt.key] != "group" || string(req.Body) != "body" {
				t.Fatalf("request %v", req)
			}
			back, err := ParseSendHeader(req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, &hh) {
				t.Fatalf("parsed %+v, want %+v", back, &hh)
			}
		})
	}
}

func TestParseSendHeaderReadsOtherClients(t *testing.T) {
	t.Run("V2 capture from a Java producer", func(t *testing.T) {
		req := &Command{Code: SendMessageV2, ExtFields: map[string]string{
			"a": "yyzGroup2", "b": "yyztest2", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1491978653614",
			"h": "0", "i": "TAGS\x01TAG\x02WAIT\x01true\x02KEYS\x01ffff\x02", "j": "0", "k": "false",
		}}
		h, err := ParseSendHeader(req)
		if err != nil {
			t.Fatal(err)
		}
		if h.ProducerGroup != "yyzGroup2" || h.Topic != "yyztest2" || h.BornTimestamp != 1491978653614 || DecodeProperties(h.Properties)["KEYS"] != "ffff" {
			t.Fatalf("parsed %+v", h)
		}
	})
	t.Run("V1 as rocketmq-client-go writes it", func(t *testing.T) {
		req := &Command{Code: SendMessage, ExtFields: map[string]string{
			"producerGroup": "g", "topic": "t", "queueId": "2", "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
			"reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "batch": "false", "properties": "", "bname": "broker-b",
		}}
		h, err := ParseSendHeader(req)
		if err != nil {
			t.Fatal(err)
		}
		if h.QueueID != 2 || h.BrokerName != "broker-b" || h.MaxReconsumeTimes == nil || *h.MaxReconsumeTimes != 0 {
			t.Fatalf("parsed %+v", h)
		}
	})
	tests := []struct {
		name string
		req  *Command
		want string
	}{
		{"not a send", &Command{Code: HeartBeat}, "not a send"},
		{"missing topic", &Command{Code: SendMessageV2, ExtFields: map[string]string{"a": "g"}}, "lacks required field topic"},
		{"queue id not a number", func() *Command {
			r := NewSendRequest(sampleSendHeader(), nil, true)
			r.ExtFields["e"] = "x"
			return r
		}(), `queueId="x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSendHeader(tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestParseSendHeaderTakesBatchFromTheHeaderOnly proves that the batch flag, not the request
// code, makes a batch, and that flags parse as Java's Boolean.parseBoolean does.
func TestParseSendHeaderTakesBatchFromTheHeaderOnly(t *testing.T) {
	tests := []struct {
		name  string
		code  int16
		key   string // the batch key of the header form the code uses
		value string // "" leaves the flag out
		want  bool
	}{
		{"SEND_BATCH_MESSAGE with m=true", SendBatchMessage, "m", "true", true},
		{"SEND_BATCH_MESSAGE with m=false is one message", SendBatchMessage, "m", "false", false},
		{"SEND_BATCH_MESSAGE without m is one message", SendBatchMessage, "m", "", false},
		{"SEND_MESSAGE_V2 with m=true is a batch", SendMessageV2, "m", "true", true},
		{"SEND_MESSAGE with batch=true is a batch", SendMessage, "batch", "true", true},
		{"m=TRUE is true, as parseBoolean ignores case", SendMessageV2, "m", "TRUE", true},
		{"m=yes is false", SendBatchMessage, "m", "yes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := sampleSendHeader()
			ext := h.V2()
			if tt.code == SendMessage {
				ext = h.V1()
			}
			delete(ext, tt.key)
			if tt.value != "" {
				ext[tt.key] = tt.value
			}
			got, err := ParseSendHeader(&Command{Code: tt.code, ExtFields: ext})
			if err != nil {
				t.Fatal(err)
			}
			if got.Batch != tt.want {
				t.Fatalf("Batch = %v, want %v", got.Batch, tt.want)
			}
		})
	}
}

func TestSendResponseRoundTrip(t *testing.T) {
	req := &Command{Code: SendMessageV2, Opaque: 9}
	for _, code := range []int16{Success, FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable} {
		in := SendResponse{Code: code, MsgID: "7F00000100002A9F0000000000000001", QueueID: 2, QueueOffset: 77, TransactionID: "U", RegionID: "r1", TraceOn: true}
		resp := NewSendResponse(req, in)
		if resp.Opaque != 9 || !resp.IsResponse() {
			t.Fatalf("response %v", resp)
		}
		got, err := ParseSendResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		if got != in {
			t.Fatalf("code %d: got %+v, want %+v", code, got, in)
		}
	}
}

func TestParseSendResponseFailures(t *testing.T) {
	ok := NewSendResponse(&Command{}, SendResponse{MsgID: "M", QueueID: 1, QueueOffset: 2})
	without := func(key string) *Command {
		c := *ok
		c.ExtFields = map[string]string{}
		for k, v := range ok.ExtFields {
			if k != key {
				c.ExtFields[k] = v
			}
		}
		return &c
	}
	t.Run("broker failure codes are ResponseErrors", func(t *testing.T) {
		_, err := ParseSendResponse(&Command{Code: TopicNotExist, Flag: FlagResponse, Remark: "no route"})
		var re *ResponseError
		if !errors.As(err, &re) || re.Code != TopicNotExist || !strings.Contains(err.Error(), "TOPIC_NOT_EXIST") {
			t.Fatalf("err = %v", err)
		}
	})
	for _, key := range []string{"msgId", "queueId", "queueOffset"} {
		t.Run("missing "+key, func(t *testing.T) {
			if _, err := ParseSendResponse(without(key)); !errors.Is(err, ErrBadResponse) {
				t.Fatalf("err = %v, want ErrBadResponse", err)
			}
		})
	}
	t.Run("region defaults and trace is on unless false", func(t *testing.T) {
		r, err := ParseSendResponse(without(PropertyMsgRegion))
		if err != nil || r.RegionID != DefaultRegionID {
			t.Fatalf("%+v %v", r, err)
		}
		r, _ = ParseSendResponse(without(PropertyTraceSwitch))
		if !r.TraceOn {
			t.Fatal("trace must default to on")
		}
	})
}

func TestOffsetMsgIDRoundTrip(t *testing.T) {
	host := netip.MustParseAddrPort("10.1.2.3:10911")
	id := NewOffsetMsgID(host, 1234567)
	if len(id) != 32 || id != strings.ToUpper(id) || !strings.HasPrefix(id, "0A010203") {
		t.Fatalf("id %q", id)
	}
	h, off, err := ParseOffsetMsgID(id)
	if err != nil || h != host || off != 1234567 {
		t.Fatalf("parsed %v %d %v", h, off, err)
	}
	if _, _, err := ParseOffsetMsgID("XYZ"); err == nil {
		t.Fatal("bad id accepted")
	}
}

func TestAdminRequests(t *testing.T) {
	t.Run("get max offset", func(t *testing.T) {
		req := NewGetMaxOffsetRequest("T", 3)
		want := map[string]string{"topic": "T", "queueId": "3", "committed": "true"}
		if req.Code != GetMaxOffset || !reflect.DeepEqual(req.ExtFields, want) {
			t.Fatalf("%v", req)
		}
		resp := NewResponse(req, Success, "")
		resp.ExtFields = map[string]string{"offset": "42"}
		if off, err := ParseMaxOffsetResponse(resp); err != nil || off != 42 {
			t.Fatalf("%d %v", off, err)
		}
		resp.ExtFields = nil
		if _, err := ParseMaxOffsetResponse(resp); !errors.Is(err, ErrBadResponse) {
			t.Fatalf("err = %v", err)
		}
		var re *ResponseError
		if _, err := ParseMaxOffsetResponse(NewResponse(req, SystemError, "x")); !errors.As(err, &re) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("update and create topic", func(t *testing.T) {
		req := NewCreateTopicRequest("T", 8, 4, PermReadWrite)
		h, err := ParseCreateTopicRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		if *h != (CreateTopicHeader{Topic: "T", ReadQueueNums: 8, WriteQueueNums: 4, Perm: 6}) {
			t.Fatalf("%+v", h)
		}
		delete(req.ExtFields, "perm")
		if _, err := ParseCreateTopicRequest(req); err == nil || !strings.Contains(err.Error(), "perm") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("heartbeat", func(t *testing.T) {
		req := NewHeartbeatRequest("127.0.0.1@1", "g1")
		want := `{"clientID":"127.0.0.1@1","producerDataSet":[{"groupName":"g1"}],"consumerDataSet":[]}`
		if req.Code != HeartBeat || string(req.Body) != want {
			t.Fatalf("%s", req.Body)
		}
	})
	t.Run("route request and response", func(t *testing.T) {
		req := NewGetRouteInfoRequest("T")
		if req.Code != GetRouteInfoByTopic || req.ExtFields["topic"] != "T" {
			t.Fatalf("%v", req)
		}
		var re *ResponseError
		if _, err := ParseRouteResponse(NewResponse(req, TopicNotExist, "none")); !errors.As(err, &re) || re.Code != TopicNotExist {
			t.Fatalf("err = %v", err)
		}
		if _, err := ParseRouteResponse(NewResponse(req, Success, "")); !errors.Is(err, ErrBadResponse) {
			t.Fatalf("err = %v", err)
		}
		resp := NewResponse(req, Success, "")
		resp.Body = []byte(`{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"b","cluster":"c"}],"queueDatas":[]}`)
		rd, err := ParseRouteResponse(resp)
		if err != nil || rd.BrokerDatas[0].MasterAddr() != "127.0.0.1:10911" {
			t.Fatalf("%+v %v", rd, err)
		}
	})
}

func TestCodeNames(t *testing.T) {
	if RequestCodeName(SendMessageV2) != "SEND_MESSAGE_V2" || RequestCodeName(9999) != "9999" {
		t.Fatal("request code names")
	}
	if ResponseCodeName(GoAway) != "GO_AWAY" || ResponseCodeName(-5) != "-5" {
		t.Fatal("response code names")
	}
	if LanguageCode("GO") != 9 || LanguageCode("NODE_JS") != 13 || LanguageCode("COBOL") != 7 || LanguageName(200) != "OTHER" {
		t.Fatal("language codes")
	}
	for _, c := range []int16{Success, FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable} {
		if !StoredOK(c) {
			t.Fatalf("%d not stored", c)
		}
	}
	if StoredOK(SystemBusy) {
		t.Fatal("SYSTEM_BUSY counted as stored")
	}
}
