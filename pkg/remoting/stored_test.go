package remoting

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func sampleStored() *StoredMessage {
	return &StoredMessage{BodyCRC: 12345, QueueID: 1, Flag: 0, QueueOffset: 7, CommitLogOffset: 4096,
		SysFlag: TransactionPrepared, BornTimestamp: 1764720000000, BornHost: netip.MustParseAddrPort("10.0.0.9:50022"),
		StoreTimestamp: 1764720000005, StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), ReconsumeTimes: 0,
		PreparedTransactionOffset: 0, Body: []byte("order 42"), Topic: "Orders",
		Properties: map[string]string{"PGROUP": "Orders", "TRAN_MSG": "true", PropertyUniqKey: "AC1100010000ABCD"}}
}

// TestStoredMessageRoundTrips proves a record EncodeStoredMessage writes decodes to the message it
// was written from, with IPv4 and IPv6 hosts (each changes the layout by its sysFlag bit).
func TestStoredMessageRoundTrips(t *testing.T) {
	tests := []struct {
		name        string
		born, store string
		wantFlag    int32
	}{
		{"IPv4 hosts", "10.0.0.9:50022", "127.0.0.1:10911", TransactionPrepared},
		{"IPv6 born host", "[fd00::9]:50022", "127.0.0.1:10911", TransactionPrepared | sysFlagBornHostV6},
		{"IPv6 store host", "10.0.0.9:50022", "[::1]:10911", TransactionPrepared | sysFlagStoreHostV6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleStored()
			m.BornHost, m.StoreHost = netip.MustParseAddrPort(tt.born), netip.MustParseAddrPort(tt.store)
			b, err := EncodeStoredMessage(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeStoredMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			want := *m
			want.SysFlag = tt.wantFlag
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("decoded %+v\nwant    %+v", got, &want)
			}
		})
	}
}

// TestStoredMessageVersion2ReadsATwoByteTopicLength proves a version 2 record, whose topic length
// takes two bytes, decodes to the same message as version 1.
func TestStoredMessageVersion2ReadsATwoByteTopicLength(t *testing.T) {
	m := sampleStored()
	v1, err := EncodeStoredMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(v1, []byte("\x06Orders"))
	v2 := append(append(append([]byte{}, v1[:at]...), 0), v1[at:]...)
	binary.BigEndian.PutUint32(v2, uint32(len(v2)))
	magic := storedMagicV2
	binary.BigEndian.PutUint32(v2[4:], uint32(magic))
	got, err := DecodeStoredMessage(v2)
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != "Orders" || string(got.Body) != "order 42" || got.Properties["PGROUP"] != "Orders" {
		t.Fatalf("version 2 decoded as %+v", got)
	}
}

// TestStoredMessageDecodingRefusesBrokenRecords proves each kind of broken record is refused
// with an error saying what is wrong, never a partial message.
func TestStoredMessageDecodingRefusesBrokenRecords(t *testing.T) {
	good, err := EncodeStoredMessage(sampleStored())
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, good...)) }
	tests := []struct {
		name   string
		record []byte
		says   string
	}{
		{"empty", nil, "total size"},
		{"total size not the length", with(func(b []byte) []byte { return b[:len(b)-1] }), "total size"},
		{"unknown magic", with(func(b []byte) []byte { binary.BigEndian.PutUint32(b[4:], 1); return b }), "magic code"},
		{"body past the end", with(func(b []byte) []byte {
			at := bytes.Index(b, []byte("order 42")) - 4
			binary.BigEndian.PutUint32(b[at:], 1<<20)
			return b
		}), "ends inside"},
		{"negative body length", with(func(b []byte) []byte {
			at := bytes.Index(b, []byte("order 42")) - 4
			binary.BigEndian.PutUint32(b[at:], 0xFFFFFFFF)
			return b
		}), "body length"},
		{"bytes after the properties", with(func(b []byte) []byte {
			b = append(b, 0)
			binary.BigEndian.PutUint32(b, uint32(len(b)))
			return b
		}), "after the properties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeStoredMessage(tt.record)
			if err == nil || m != nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("DecodeStoredMessage = %+v, %v; want an error saying %q", m, err, tt.says)
			}
		})
	}
}

// TestCheckTransactionStateHeaderRoundTrips proves the header a broker sends is read back whole,
// and that a request without either offset is refused as RocketMQ's not-null check does.
func TestCheckTransactionStateHeaderRoundTrips(t *testing.T) {
	h := &CheckTransactionStateHeader{Topic: "RMQ_SYS_TRANS_HALF_TOPIC", TranStateTableOffset: 3, CommitLogOffset: 9000,
		MsgID: "AC11", TransactionID: "AC11", OffsetMsgID: "7F00000100002A9F0000000000002328", BrokerName: "broker-a"}
	req := NewCheckTransactionStateRequest(h, []byte("record"))
	if !req.IsOneway() || req.Code != CheckTransactionState {
		t.Fatalf("request code %d oneway %v, want CHECK_TRANSACTION_STATE oneway", req.Code, req.IsOneway())
	}
	got, err := ParseCheckTransactionStateHeader(req)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, h)
	}
	for _, field := range []string{"tranStateTableOffset", "commitLogOffset"} {
		delete(req.ExtFields, field)
		if _, err := ParseCheckTransactionStateHeader(req); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("a check without %s parsed: %v", field, err)
		}
		req.ExtFields[field] = "x"
		if _, err := ParseCheckTransactionStateHeader(req); err == nil {
			t.Errorf("a check with %s not a number parsed", field)
		}
		req.ExtFields[field] = "1"
	}
}
