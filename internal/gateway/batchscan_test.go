package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// sameAsEncodingJSON returns an error unless the decoding fast gave of data (its messages or its
// refusal) is what decodeBatchJSON, encoding/json's decoding, gives.
func sameAsEncodingJSON(data []byte, fast []batchMessage, fastErr error) error {
	want, wantErr := decodeBatchJSON(data)
	switch {
	case fastErr != nil && (wantErr == nil || wantErr.Error() != fastErr.Error()):
		return fmt.Errorf("refused with %q; encoding/json: %v", fastErr, wantErr)
	case fastErr == nil && wantErr != nil:
		return fmt.Errorf("decoded %d messages; encoding/json refuses: %v", len(fast), wantErr)
	case fastErr == nil && !reflect.DeepEqual(fast, want):
		return fmt.Errorf("decoded %+v; encoding/json %+v", fast, want)
	}
	return nil
}

// batchSeeds are batch requests of the usual form and of each form the fast decoder leaves to
// encoding/json.
var batchSeeds = []string{
	`{"messages":[{"bodyText":"a","tags":"t"},{"body":"YQ==","tags":"t","keys":"k1  k2","properties":{"p":"v","p":"w"}}]}`,
	" {\n\t\"messages\" : [ { \"bodyText\" : \"é\" , \"properties\" : { } } , { } ] } \r\n",
	`{"messages":[]}`, `{"messages":null}`, `{"messages":{}}`, `{}`, `null`, `[]`, ``, `{"messages":[{}]}`,
	`{"messages":[{"bodyText":""},{"body":""}]}`, `{"messages":[{"bodyText":"a\u0062"}]}`,
	`{"messages":[{"BodyText":"a"}]}`, `{"messages":[{"bodyText":"a","bodyText":"b"}]}`,
	`{"messages":[{"bodyText":null}]}`, `{"messages":[{"keys":["k1","k2"]}]}`, `{"messages":[{"body":"!!"}]}`,
	`{"messages":[{"body":"YQ"}]}`, `{"messages":[{"tags":5}]}`, `{"messages":[{"bodyText":"a"}]} {}`,
	`{"messages":[{"bodyText":"a"},]}`, `{"messages":[{"bodyText":"a"}],"messages":[]}`,
	`{"messages":[{"properties":{"p":null}}]}`, `{"messages":[{"messageGroup":"g"}]}`,
	"{\"messages\":[{\"bodyText\":\"a\tb\"}]}", `{"messages":[{"bodyText":"a"}`,
	"{\"messages\":[{\"bodyText\":\"0123456789abcdef\tx\"}]}", `{"messages":[{"bodyText":"0123456789\"x","tags":"0123456789abcdefgh"}]}`,
}

// FuzzBatchFastDecodingMatchesEncodingJSON is the differential of the batch decoders: whatever
// the request, a decoding the fast decoder gives is encoding/json's (the same messages, or the
// same refusal).
func FuzzBatchFastDecodingMatchesEncodingJSON(f *testing.F) {
	for _, seed := range batchSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // refused before decoding
		}
		msgs, ok, err := decodeBatchFast(data)
		if !ok {
			return // decoded by decodeBatchJSON itself
		}
		if diff := sameAsEncodingJSON(data, msgs, err); diff != nil {
			t.Fatalf("%q: %v", data, diff)
		}
	})
}

// TestBatchDecodingDifferentialSeesADivergence is the differential's canary: a decoding that
// differs from encoding/json's in one byte of one body, or refuses what it accepts, is reported.
func TestBatchDecodingDifferentialSeesADivergence(t *testing.T) {
	data := []byte(`{"messages":[{"bodyText":"ab","tags":"t"},{"bodyText":"cd"}]}`)
	msgs, ok, err := decodeBatchFast(data)
	if !ok || err != nil {
		t.Fatalf("the usual form was not decoded: %v %v", ok, err)
	}
	if diff := sameAsEncodingJSON(data, msgs, nil); diff != nil {
		t.Fatalf("the fast decoding differs: %v", diff)
	}
	msgs[1].BodyText = []byte("ce")
	if sameAsEncodingJSON(data, msgs, nil) == nil {
		t.Fatal("a body that differs in one byte was not reported")
	}
	if sameAsEncodingJSON(data, nil, errTooManyInBatch()) == nil {
		t.Fatal("a refusal of what encoding/json decodes was not reported")
	}
}

// TestUsualBatchFormIsDecodedInOnePass proves the fast decoder decodes the form clients write
// (and what the benchmark sends), and leaves every other form to encoding/json.
func TestUsualBatchFormIsDecodedInOnePass(t *testing.T) {
	cases := []struct {
		data string
		fast bool
	}{
		{batchSeeds[0], true}, {batchSeeds[1], true}, {`{"messages":[]}`, true},
		{`{"messages":[{"bodyText":"a\u0062"}]}`, false}, {`{"messages":[{"BodyText":"a"}]}`, false},
		{`{"messages":[{"bodyText":"a","bodyText":"b"}]}`, false}, {`{"messages":[{"keys":["k"]}]}`, false},
		{`{"messages":[{"bodyText":"a"}]} {}`, false}, {`{"messages":null}`, false},
	}
	for _, tc := range cases {
		if _, ok, _ := decodeBatchFast([]byte(tc.data)); ok != tc.fast {
			t.Errorf("%s: decoded in one pass %v, want %v", tc.data, ok, tc.fast)
		}
	}
}

// TestBatchDecodingStopsPastTheLimit proves the fast decoder refuses a batch of more than 4096
// messages as encoding/json's decoding does, without decoding the messages past the limit.
func TestBatchDecodingStopsPastTheLimit(t *testing.T) {
	data := []byte(`{"messages":[` + strings.Repeat(`{"bodyText":"m"},`, 4096) + `"not even a message"]}`)
	msgs, ok, err := decodeBatchFast(data)
	if !ok || err == nil || !strings.Contains(err.Error(), "more than 4096 messages") {
		t.Fatalf("decoded %d messages, one pass %v, error %v", len(msgs), ok, err)
	}
	if diff := sameAsEncodingJSON(data, msgs, err); diff != nil {
		t.Fatal(diff)
	}
}

// TestReadingAndAnsweringABatchAllocatePerBatchNotPerMessage proves the gateway's part of a
// batch request (reading and decoding it into messages, writing the answer of their ids)
// allocates no more for 256 text messages with tags than for 64 but the growth of its buffers:
// the bodies are the request's bytes and equal tags share a string. (The runtime's encoding of a
// batch is proven so by TestEncodingABatchAllocatesNothingPerMessage.)
func TestReadingAndAnsweringABatchAllocatePerBatchNotPerMessage(t *testing.T) {
	allocs := func(n int) float64 {
		var b bytes.Buffer
		b.WriteString(`{"messages":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"bodyText":"` + strings.Repeat("x", 1024) + `","tags":"tag"}`)
		}
		b.WriteString(`]}`)
		data := b.Bytes()
		res := &producer.BatchResult{SendResult: producer.SendResult{Topic: "Orders", Broker: "b"}, MsgIDs: make([]string, n)}
		var answer []byte
		return testing.AllocsPerRun(20, func() {
			msgs, err := readBatch(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, ordersBatchPath, bytes.NewReader(data)))
			if err != nil || len(msgs) != n {
				t.Fatalf("read %d of %d: %v", len(msgs), n, err)
			}
			answer = batchResponse(res, scope.Scope{}).appendJSON(answer[:0])
		})
	}
	few, many := allocs(64), allocs(256)
	// Four times the messages cost the buffers that double as they grow (the request's bytes,
	// the list of messages) two doublings more each, nothing per message.
	if many > few+6 {
		t.Fatalf("a batch of 64 messages allocates %v times, of 256 messages %v times", few, many)
	}
}

// TestPlainPrefixStopsAtTheWordOfTheFirstSpecialByte proves the eight-bytes-at-once scan stops at
// the word holding a quote, a backslash or a control character wherever it is, and at no other
// byte (space, DEL, bytes of multi-byte characters).
func TestPlainPrefixStopsAtTheWordOfTheFirstSpecialByte(t *testing.T) {
	for _, c := range []byte{0x00, 0x01, 0x1f, '"', '\\', 0x20, 'a', 0x7f, 0x80, 0xa2, 0xdc, 0xff} {
		special := c < 0x20 || c == '"' || c == '\\'
		for pos := range 24 {
			b := bytes.Repeat([]byte{'x'}, 24)
			b[pos] = c
			want := 24
			if special {
				want = pos / 8 * 8
			}
			if got := plainPrefix(b); got != want {
				t.Errorf("byte %#x at %d: plain prefix %d, want %d", c, pos, got, want)
			}
		}
	}
}

// BenchmarkDecodingABatch decodes the throughput benchmark's batch (32 text messages of 1 KiB
// with tags) in one pass and with encoding/json, for the ratio of the two in one run.
func BenchmarkDecodingABatch(b *testing.B) {
	data := benchBatch(b, bytes.Repeat([]byte("x"), 1024))
	for _, d := range []struct {
		name   string
		decode func([]byte) ([]batchMessage, error)
	}{{"one-pass", decodeBatch}, {"encoding-json", decodeBatchJSON}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if msgs, err := d.decode(data); err != nil || len(msgs) != benchBatchSize {
					b.Fatalf("decoded %d: %v", len(msgs), err)
				}
			}
		})
	}
}
