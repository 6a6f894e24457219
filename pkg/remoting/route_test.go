package remoting

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func sampleRoute() *TopicRouteData {
	return &TopicRouteData{
		QueueDatas: []QueueData{
			{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
			{BrokerName: "broker-b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicSysFlag: 1},
		},
		BrokerDatas: []BrokerData{
			{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.2:10911"}},
			{Cluster: "DefaultCluster", BrokerName: "broker-b", BrokerAddrs: map[int64]string{0: "127.0.0.1:10921"}, ZoneName: "z1"},
		},
		FilterServerTable: map[string][]string{},
	}
}

func TestDecodeTopicRouteDataForms(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *TopicRouteData
	}{
		{
			name: "legacy fastjson with unquoted integer keys",
			body: `{"brokerDatas":[{"brokerAddrs":{0:"172.168.0.104:10911",1:"172.168.0.105:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSynFlag":0,"writeQueueNums":8}]}`,
			want: &TopicRouteData{
				BrokerDatas:       []BrokerData{{Cluster: "DefaultCluster", BrokerName: "broker-a", BrokerAddrs: map[int64]string{0: "172.168.0.104:10911", 1: "172.168.0.105:10911"}}},
				QueueDatas:        []QueueData{{BrokerName: "broker-a", Perm: 6, ReadQueueNums: 8, WriteQueueNums: 8}},
				FilterServerTable: map[string][]string{},
			},
		},
		{
			name: "standard JSON with quoted keys, pre-4.9 topicSynFlag and a negative broker id",
			body: `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","-1":"x:1"},"brokerName":"b","cluster":"c","enableActingMaster":true}],"queueDatas":[{"brokerName":"b","perm":4,"readQueueNums":1,"topicSynFlag":3,"writeQueueNums":2}],"orderTopicConf":"b:2"}`,
			want: &TopicRouteData{
				OrderTopicConf: "b:2",
				BrokerDatas:    []BrokerData{{Cluster: "c", BrokerName: "b", BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", -1: "x:1"}, EnableActingMaster: true}},
				QueueDatas:     []QueueData{{BrokerName: "b", Perm: 4, ReadQueueNums: 1, WriteQueueNums: 2, TopicSysFlag: 3}},
			},
		},
		{
			name: "whitespace around unquoted keys and strings that look like keys",
			body: "{ \"brokerDatas\" : [ { \"brokerAddrs\" : { 0 : \"a{1:2}\" , 7:\"b\\\"{3:4\" } , \"brokerName\":\"n,{5:\" } ] , \"queueDatas\":[] }",
			want: &TopicRouteData{
				BrokerDatas: []BrokerData{{BrokerName: "n,{5:", BrokerAddrs: map[int64]string{0: "a{1:2}", 7: "b\"{3:4"}}},
				QueueDatas:  []QueueData{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeTopicRouteData([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestTopicRouteDataEncodings(t *testing.T) {
	r := sampleRoute()
	legacy := r.MarshalLegacy()
	if !strings.Contains(string(legacy), `{0:"127.0.0.1:10911",1:"127.0.0.2:10911"}`) {
		t.Fatalf("legacy form lacks unquoted keys: %s", legacy)
	}
	if json.Valid(legacy) {
		t.Fatal("legacy form should not be standard JSON")
	}
	std, err := r.MarshalStandard()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(std) || !strings.Contains(string(std), `"0":"127.0.0.1:10911"`) {
		t.Fatalf("standard form: %s", std)
	}
	for name, b := range map[string][]byte{"legacy": legacy, "standard": std} {
		got, err := DecodeTopicRouteData(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%s round trip\n got %+v\nwant %+v", name, got, r)
		}
	}
}

func TestQuoteIntegerKeys(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "standard JSON is unchanged", in: `{"a":[1,{"b":-2}],"0":"x"}`, want: `{"a":[1,{"b":-2}],"0":"x"}`},
		{name: "keys quoted, values untouched", in: `{0:1,12:[3,{-4:5}]}`, want: `{"0":1,"12":[3,{"-4":5}]}`},
		{name: "numbers in arrays are values", in: `[0,1,{2:3}]`, want: `[0,1,{"2":3}]`},
		{name: "unbalanced brackets", in: `{0:[1}`, wantErr: true},
		{name: "unterminated string", in: `{"a`, wantErr: true},
		{name: "unclosed object", in: `{0:1`, wantErr: true},
		{name: "too deep", in: strings.Repeat("[", 100) + strings.Repeat("]", 100), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := QuoteIntegerKeys([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted %q as %q", tt.in, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
