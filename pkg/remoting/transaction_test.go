package remoting

import (
	"strings"
	"testing"
)

// TestEndTransactionHeaderRoundTrips proves the header a producer writes reads back as the
// broker reads it, under the field names the Java broker knows.
func TestEndTransactionHeaderRoundTrips(t *testing.T) {
	h := &EndTransactionHeader{Topic: "Orders", ProducerGroup: "Orders", TranStateTableOffset: 7, CommitLogOffset: 1 << 40,
		CommitOrRollback: TransactionRollback, FromTransactionCheck: true, MsgID: "M", TransactionID: "T"}
	req := NewEndTransactionRequest(h)
	if req.Code != EndTransaction || req.ExtFields["commitOrRollback"] != "12" || req.ExtFields["tranStateTableOffset"] != "7" {
		t.Fatalf("request %v", req.ExtFields)
	}
	frame, err := Encode(req)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseEndTransactionHeader(back)
	if err != nil || *got != *h {
		t.Fatalf("read back %+v, %v; want %+v", got, err, h)
	}
}

// TestEndTransactionHeaderRefusesWhatTheBrokerRefuses proves a header missing a required field,
// with a field that is not a number, or with an unknown end type is refused, naming the field.
func TestEndTransactionHeaderRefusesWhatTheBrokerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		says string
	}{
		{"no producer group", func(m map[string]string) { delete(m, "producerGroup") }, "<producerGroup> is null"},
		{"no msgId", func(m map[string]string) { delete(m, "msgId") }, "<msgId> is null"},
		{"offset not a number", func(m map[string]string) { m["commitLogOffset"] = "x" }, "commitLogOffset"},
		{"unknown end type", func(m map[string]string) { m["commitOrRollback"] = "4" }, "commitOrRollback field wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := NewEndTransactionRequest(&EndTransactionHeader{ProducerGroup: "g", MsgID: "m", CommitOrRollback: TransactionCommit})
			tc.edit(req.ExtFields)
			if _, err := ParseEndTransactionHeader(req); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}
