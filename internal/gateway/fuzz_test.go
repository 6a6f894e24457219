package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzBatchRequest posts arbitrary bodies to the batch endpoint of a gateway in front of a real
// runtime and a brokersim broker: every request gets one answer that is JSON, never a 500; a 200
// names one id per message at consecutive offsets, anything else a code.
func FuzzBatchRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"bodyText":"a"},{"body":"YQ==","tags":"t","keys":["k1","k2"],"properties":{"p":"v"}}]}`,
		`{"messages":[{"bodyText":"line\n\"é\""}]}`,
		`{"messages":[]}`, `{"messages":null}`, `{"messages":{}}`, `{}`, `null`, `[]`, ``, `{"messages":[{}]}`,
		`{"messages":[{"bodyText":"a","messageGroup":"g"}]}`, `{"messages":[{"body":"!!"}]}`,
		`{"messages":[{"bodyText":"a","properties":{"DELAY":"1"}}]}`, `{"messages":[{"bodyText":"\ud800"}]}`,
		`{"messages":[{"bodyText":"a"}]} {"messages":[]}`, "{\"messages\":[{\"bodyText\":\"\xff\"}]}",
	} {
		f.Add([]byte(seed))
	}
	bed := newTestBed(f, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		bed.handler.ServeHTTP(rec, post(ordersBatchPath, "application/json", body, nil))
		if rec.Code == http.StatusOK {
			var br BatchResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &br); err != nil || len(br.Messages) == 0 {
				t.Fatalf("200 with %q (%v)", rec.Body, err)
			}
			for i, m := range br.Messages {
				if len(m.MsgID) != 32 || m.QueueOffset != br.Messages[0].QueueOffset+int64(i) {
					t.Fatalf("message %d answered as %+v", i, m)
				}
			}
			return
		}
		var er ErrorResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil || er.Code == "" || rec.Code == http.StatusInternalServerError {
			t.Fatalf("answer %d %q (%v)", rec.Code, rec.Body, err)
		}
	})
}
