package gateway

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"testing"
)

// encodedByEncodingJSON is v as encoding/json's Encoder writes it.
func encodedByEncodingJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestAnswersAreWrittenAsEncodingJSONWritesThem proves the 200 answers' own encoding gives
// encoding/json's bytes: omitted empty fields, null lists, escapes of quotes, control and HTML
// characters, non-ASCII and invalid UTF-8.
func TestAnswersAreWrittenAsEncodingJSONWritesThem(t *testing.T) {
	odd := "a\"b\\c\n<&>é\u2028\xff"
	answers := []jsonAppender{
		&SendResponse{},
		&SendResponse{MsgID: "7F0000010001", OffsetMsgID: "AC11", Topic: "Orders", Broker: "broker-a", QueueID: 3,
			QueueOffset: -1, Attempts: 2, BrokersTried: []string{"broker-b", "broker-a"}, Status: "SEND_OK", LatencyMillis: 12},
		&SendResponse{MsgID: odd, Topic: odd, BrokersTried: []string{}, Status: odd},
		&BatchResponse{},
		&BatchResponse{Messages: []BatchMessageResult{}, BrokersTried: []string{odd}},
		&BatchResponse{Topic: "Orders", Broker: "b", QueueID: 1, Attempts: 1, BrokersTried: []string{"b"}, Status: "SEND_OK",
			LatencyMillis: 3, Messages: []BatchMessageResult{{MsgID: "m1", OffsetMsgID: "o1", QueueOffset: 7}, {MsgID: odd, QueueOffset: 8}}},
	}
	for _, a := range answers {
		if got, want := a.appendJSON(nil), encodedByEncodingJSON(t, a); !bytes.Equal(got, want) {
			t.Errorf("wrote %s\nencoding/json %s", got, want)
		}
	}
}

// FuzzAnswerEncodingMatchesEncodingJSON holds the answers' own encoding to encoding/json's for any
// strings and numbers.
func FuzzAnswerEncodingMatchesEncodingJSON(f *testing.F) {
	f.Add("id", "Orders", int64(5), "<&>\"\\\x01é")
	f.Fuzz(func(t *testing.T, id, topic string, n int64, other string) {
		answers := []jsonAppender{
			&SendResponse{MsgID: id, OffsetMsgID: other, Topic: topic, Broker: other, QueueID: int(n), QueueOffset: n,
				BrokersTried: []string{other, id}, Status: other, LatencyMillis: -n},
			&BatchResponse{Topic: topic, Broker: id, Attempts: int(n), Status: other,
				Messages: []BatchMessageResult{{MsgID: id, OffsetMsgID: other, QueueOffset: n}, {MsgID: other}}},
		}
		for _, a := range answers {
			if got, want := a.appendJSON(nil), encodedByEncodingJSON(t, a); !bytes.Equal(got, want) {
				t.Fatalf("wrote %s\nencoding/json %s", got, want)
			}
		}
	})
}

// TestContentTypesAreReadAsMimeReadsThem proves isJSON, which reads a type without parameters
// itself, says what mime.ParseMediaType says of every form of Content-Type.
func TestContentTypesAreReadAsMimeReadsThem(t *testing.T) {
	for _, ct := range []string{"", "application/json", "APPLICATION/JSON", " application/json\t", "application/json; charset=utf-8",
		"application/json;", "application/octet-stream", "text/plain", "application/jſon", "application/json x",
		"application/json; =bad", "application/jsonx", "application/json\u00a0", "application", "/json"} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Content-Type", ct)
		mt, _, err := mime.ParseMediaType(ct)
		if want := err == nil && mt == "application/json"; isJSON(r) != want {
			t.Errorf("Content-Type %q: JSON %v, mime says %v", ct, !want, want)
		}
	}
}
