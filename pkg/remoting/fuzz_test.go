package remoting

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"testing"
)

// The seed corpus lives in testdata/fuzz/<target>; plain `go test` runs every seed, and
// `go test -fuzz=<target>` (or `make fuzz`) explores from them.

func seedFrames(f *testing.F) {
	for _, c := range []*Command{
		routeRequest(JSON), routeRequest(RocketMQ),
		NewSendResponse(&Command{Opaque: 5}, SendResponse{MsgID: "M", QueueID: 1, QueueOffset: 2}),
		{Code: 1, Remark: "a\x01\"b", Body: []byte("body"), SerializeType: RocketMQ},
	} {
		b, _ := Encode(c)
		f.Add(b[4:])
	}
}

// reencodeIsStable checks that a decoded command survives encode and decode unchanged.
func reencodeIsStable(t *testing.T, c *Command) {
	t.Helper()
	f, err := Encode(c)
	if err != nil {
		t.Fatalf("re-encoding decoded command %+v: %v", c, err)
	}
	d, err := Decode(f[4:])
	if err != nil {
		t.Fatalf("decoding re-encoded %+v: %v", c, err)
	}
	if !reflect.DeepEqual(c, d) {
		t.Fatalf("unstable round trip\nfirst  %+v\nsecond %+v", c, d)
	}
}

func FuzzDecode(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := Decode(frame)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		reencodeIsStable(t, c)
	})
}

func FuzzDecodeJSONHeader(f *testing.F) {
	f.Add([]byte(`{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}`))
	f.Add([]byte(`{"code":0,"remark":"\u00e9\ud83d\ude00\n","extFields":{"i":"TAGS\u0001a\u0002"},"x":[{"y":null}]}`))
	f.Fuzz(func(t *testing.T, header []byte) {
		c, err := DecodeHeader(JSON, header)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		reencodeIsStable(t, c)
	})
}

func FuzzDecodeBinaryHeader(f *testing.F) {
	for _, c := range []*Command{
		routeRequest(RocketMQ),
		{Code: 103, Version: 2333, Remark: "Sample Remark", ExtFields: map[string]string{"key": "value"}},
	} {
		h, _ := AppendHeader(nil, c, RocketMQ)
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		c, err := DecodeHeader(RocketMQ, header)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		reencodeIsStable(t, c)
	})
}

// FuzzFrameReader feeds an arbitrary byte stream to the reader the client and servers use.
func FuzzFrameReader(f *testing.F) {
	a, _ := Encode(routeRequest(JSON))
	b, _ := Encode(routeRequest(RocketMQ))
	f.Add(append(append([]byte(nil), a...), b...))
	f.Add(append(append([]byte(nil), a...), 0, 0, 0x10, 0, 1))
	f.Fuzz(func(t *testing.T, stream []byte) {
		fr := NewFrameReader(bytes.NewReader(stream), 64, 4096)
		for {
			c, err := fr.ReadCommand()
			if err != nil {
				if !errors.Is(err, ErrFrame) && err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			reencodeIsStable(t, c)
		}
	})
}

func FuzzDecodeTopicRouteData(f *testing.F) {
	f.Add(sampleRoute().MarshalLegacy())
	std, _ := sampleRoute().MarshalStandard()
	f.Add(std)
	f.Fuzz(func(t *testing.T, body []byte) {
		if json.Valid(body) {
			q, err := QuoteIntegerKeys(body)
			if err == nil && !bytes.Equal(q, body) {
				t.Fatalf("standard JSON changed: %q -> %q", body, q)
			}
		}
		r, err := DecodeTopicRouteData(body)
		if err != nil {
			return
		}
		again, err := DecodeTopicRouteData(r.MarshalLegacy())
		if err != nil {
			t.Fatalf("decoding our own legacy form of %+v: %v", r, err)
		}
		if len(again.BrokerDatas) != len(r.BrokerDatas) || len(again.QueueDatas) != len(r.QueueDatas) {
			t.Fatalf("legacy round trip lost data: %+v -> %+v", r, again)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	b, _, _ := AppendBatch(nil, []*Message{{Tags: "a", Body: []byte("x")}, {Body: []byte("yy"), Flag: 2}}, nil)
	f.Add(b)
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := DecodeBatch(body)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		// The encoder adds WAIT and UNIQ_KEY where a message lacks them, so the decoded form of
		// its output keeps everything decoded here and is a fixed point from then on.
		once := reencode(t, msgs)
		for i := range msgs {
			for k, v := range msgs[i].Properties {
				if once[i].Properties[k] != v {
					t.Fatalf("message %d lost %s=%q: %v", i, k, v, once[i].Properties)
				}
			}
		}
		twice := reencode(t, once)
		for i := range msgs {
			if !bytes.Equal(twice[i].Body, msgs[i].Body) || twice[i].Flag != msgs[i].Flag || !reflect.DeepEqual(twice[i].Properties, once[i].Properties) {
				t.Fatalf("message %d changed: %+v -> %+v", i, once[i], twice[i])
			}
		}
	})
}

// reencode encodes msgs as a batch and decodes the result.
func reencode(t *testing.T, msgs []*Message) []*Message {
	t.Helper()
	out, _, err := AppendBatch(nil, msgs, nil)
	if err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
	again, err := DecodeBatch(out)
	if err != nil || len(again) != len(msgs) {
		t.Fatalf("re-decoding: %d messages, %v", len(again), err)
	}
	return again
}

func FuzzDecodeProperties(f *testing.F) {
	f.Add("TAGS\x01TAG\x02WAIT\x01true\x02KEYS\x01ffff\x02")
	f.Add("k1\x01v1")
	f.Fuzz(func(t *testing.T, s string) {
		m := DecodeProperties(s)
		if again := DecodeProperties((&Message{Properties: m}).EncodeProperties()); !reflect.DeepEqual(again, m) {
			t.Fatalf("%q: %v re-decoded as %v", s, m, again)
		}
	})
}

// FuzzDecodeStoredMessage: no record a peer sends panics the decoder, and every record it
// accepts encodes back to a record that decodes the same.
func FuzzDecodeStoredMessage(f *testing.F) {
	good, err := EncodeStoredMessage(sampleStored())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeStoredMessage(b)
		if err != nil || !m.BornHost.IsValid() || !m.StoreHost.IsValid() || len(m.Topic) > maxStoredTopicLengthV1 {
			return
		}
		again, err := EncodeStoredMessage(m)
		if err != nil {
			return // properties that decode but do not re-encode within the limit
		}
		m2, err := DecodeStoredMessage(again)
		if err != nil {
			t.Fatalf("a re-encoded record does not decode: %v", err)
		}
		if m2.Topic != m.Topic || !bytes.Equal(m2.Body, m.Body) || m2.CommitLogOffset != m.CommitLogOffset || !maps.Equal(m2.Properties, m.Properties) {
			t.Fatalf("re-encoded record decodes to %+v, want %+v", m2, m)
		}
	})
}
