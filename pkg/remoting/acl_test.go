package remoting

import (
	"maps"
	"testing"
	"time"
)

// The expected signatures were computed outside Go, from the documented rule alone, e.g.
//
//	printf 'rocketmqtrue0TopicTest' | openssl dgst -sha1 -hmac 12345678 -binary | base64
//
// where the content is the values of AccessKey, committed, queueId and topic in that (byte) order.
func TestSignMatchesVectorsComputedWithOpenSSL(t *testing.T) {
	tests := []struct {
		name  string
		creds Credentials
		req   *Command
		want  string
	}{{
		name:  "probe: GET_MAX_OFFSET without body",
		creds: Credentials{AccessKey: "rocketmq", SecretKey: "12345678"},
		req:   NewGetMaxOffsetRequest("TopicTest", 0),
		// content "rocketmqtrue0TopicTest"
		want: "Qj9NOz4WGlCkF9Oi38RMAwV8mpY=",
	}, {
		name:  "security token is signed, body appended last",
		creds: Credentials{AccessKey: "rocketmq", SecretKey: "s3cr3t", SecurityToken: "t0ken"},
		req:   NewRequest(SendMessageV2, map[string]string{"producerGroup": "group", "topic": "TopicT"}, []byte("hello")),
		// content "rocketmqt0kengroupTopicThello"
		want: "bzP9wQt6PkPLRtew6sL5DKzfn48=",
	}, {
		name:  "names sort by bytes: upper case first, a prefix before its extensions",
		creds: Credentials{AccessKey: "ak", SecretKey: "k"},
		req:   NewRequest(HeartBeat, map[string]string{"b": "2", "A": "1", "a": "3"}, nil),
		// keys A, AccessKey, a, b: content "1ak32"
		want: "b4tSD2hcQE8D30bLOW634JncjA4=",
	}, {
		name:  "a stale signature is neither signed nor kept",
		creds: Credentials{AccessKey: "rocketmq", SecretKey: "12345678"},
		req: NewRequest(GetMaxOffset, map[string]string{"topic": "TopicTest", "queueId": "0", "committed": "true",
			FieldSignature: "old"}, nil),
		want: "Qj9NOz4WGlCkF9Oi38RMAwV8mpY=",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.req.ExtFields)
			got := tt.creds.Sign(tt.req)
			if got.ExtFields[FieldSignature] != tt.want {
				t.Errorf("Signature = %q, want %q", got.ExtFields[FieldSignature], tt.want)
			}
			if got.ExtFields[FieldAccessKey] != tt.creds.AccessKey {
				t.Errorf("AccessKey = %q, want %q", got.ExtFields[FieldAccessKey], tt.creds.AccessKey)
			}
			if tok, ok := got.ExtFields[FieldSecurityToken]; ok != (tt.creds.SecurityToken != "") || tok != tt.creds.SecurityToken {
				t.Errorf("SecurityToken = %q (present %v), want %q", tok, ok, tt.creds.SecurityToken)
			}
			if !maps.Equal(tt.req.ExtFields, before) {
				t.Errorf("the signed command was modified: %v, was %v", tt.req.ExtFields, before)
			}
		})
	}
}

func TestCredentialsCheckRefusesWhatNoBrokerAccepts(t *testing.T) {
	tests := []struct {
		name  string
		creds Credentials
		ok    bool
	}{
		{"complete", Credentials{AccessKey: "u", SecretKey: "p"}, true},
		{"with token", Credentials{AccessKey: "u", SecretKey: "p", SecurityToken: "t"}, true},
		{"no access key", Credentials{SecretKey: "p"}, false},
		{"no secret", Credentials{AccessKey: "u"}, false},
		{"newline in access key (a Secret written with echo)", Credentials{AccessKey: "u\n", SecretKey: "p"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.creds.Check(); (err == nil) != tt.ok {
				t.Errorf("Check() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestClientSignsPerAddress proves the client signs with the credentials its lookup gives for
// each address, leaves others unsigned, and never alters the caller's command.
func TestClientSignsPerAddress(t *testing.T) {
	signedBy := make(chan map[string]string, 4)
	handle := func(sc *serverConn, req *Command) {
		signedBy <- req.ExtFields
		sc.reply(req)
	}
	a, b := startTestServer(t, handle), startTestServer(t, handle)
	c := newTestClient(t, ClientOptions{})
	ca := &Credentials{AccessKey: "rocketmq", SecretKey: "12345678"}
	c.SetCredentials(func(addr string) (*Credentials, bool) {
		if addr == a.addr() {
			return ca, true
		}
		return nil, false
	})
	req := NewGetMaxOffsetRequest("TopicTest", 0)
	ctx := ctxTimeout(t, 10*time.Second)

	if _, err := c.Invoke(ctx, a.addr(), req); err != nil {
		t.Fatal(err)
	}
	if got := <-signedBy; got[FieldAccessKey] != "rocketmq" || got[FieldSignature] != "Qj9NOz4WGlCkF9Oi38RMAwV8mpY=" {
		t.Errorf("request to the credentialed address arrived as %v", got)
	}
	if err := c.InvokeOneway(ctx, a.addr(), req); err != nil {
		t.Fatal(err)
	}
	if got := <-signedBy; got[FieldSignature] != "Qj9NOz4WGlCkF9Oi38RMAwV8mpY=" {
		t.Errorf("oneway request arrived as %v", got)
	}
	if _, err := c.Invoke(ctx, b.addr(), req); err != nil {
		t.Fatal(err)
	}
	if got := <-signedBy; got[FieldAccessKey] != "" || got[FieldSignature] != "" {
		t.Errorf("request to an address without credentials was signed: %v", got)
	}
	if _, ok := req.ExtFields[FieldSignature]; ok {
		t.Errorf("the caller's command was signed in place: %v", req.ExtFields)
	}

	c.SetCredentials(nil)
	if _, err := c.Invoke(ctx, a.addr(), req); err != nil {
		t.Fatal(err)
	}
	if got := <-signedBy; got[FieldSignature] != "" {
		t.Errorf("signing turned off, yet the request carried %v", got)
	}
}

func BenchmarkSignASend(b *testing.B) {
	h := &SendHeader{ProducerGroup: "detour-producer", Topic: "TopicTest", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
		QueueID: 1, BornTimestamp: 1700000000000, Properties: "UNIQ_KEY\x01ABCDEF0123456789\x02WAIT\x01true\x02"}
	req := NewSendRequest(h, make([]byte, 1024), true)
	cr := &Credentials{AccessKey: "rocketmq", SecretKey: "12345678"}
	b.ReportAllocs()
	for b.Loop() {
		_ = cr.Sign(req)
	}
}

func TestClassifyACLRefusalTellsCredentialsFromBrokerState(t *testing.T) {
	tests := []struct {
		code   int16
		remark string
		want   ACLRefusal
	}{
		{NoPermission, "username cannot be null.", AuthenticationRefused},
		{NoPermission, "check signature failed.", AuthenticationRefused},
		{NoPermission, "User:nobody is not found.", AuthenticationRefused},
		{NoPermission, "User:old is disabled.", AuthenticationRefused},
		{NoPermission, "User:app has no permission to access Topic:orders from 10.0.0.7, no matched policies.", AuthorizationRefused},
		{NoPermission, "User:app has no permission to access Topic:orders from 10.0.0.7, the decision is deny.", AuthorizationRefused},
		// The broker's or the topic's state, not the credentials: these stay broker refusals.
		{NoPermission, "the broker[10.0.0.7] sending message is forbidden", NotACLRefusal},
		{NoPermission, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.", NotACLRefusal},
		{SystemError, "check signature failed.", NotACLRefusal},
	}
	for _, tt := range tests {
		t.Run(tt.remark, func(t *testing.T) {
			if got := ClassifyACLRefusal(tt.code, tt.remark); got != tt.want {
				t.Errorf("ClassifyACLRefusal(%d, %q) = %v, want %v", tt.code, tt.remark, got, tt.want)
			}
		})
	}
}
