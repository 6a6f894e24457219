package brokersim

import (
	"context"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// TestEndTransactionMovesOnlyCommittedHalfMessages proves END_TRANSACTION is answered as a Java
// broker answers it: a commit makes the half message visible in the queue it was sent to, a
// rollback does not, a second commit stores it again (the broker never marks a half message as
// ended on its commit path), and an end naming no half message of its group at its offsets is
// SYSTEM_ERROR with the broker's remark.
func TestEndTransactionMovesOnlyCommittedHalfMessages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*remoting.EndTransactionHeader)
		ends    int
		code    int16
		remark  string
		visible int64
	}{
		{"commit", nil, 1, remoting.Success, "", 1},
		{"rollback", func(h *remoting.EndTransactionHeader) { h.CommitOrRollback = remoting.TransactionRollback }, 1, remoting.Success, "", 0},
		{"commit twice", nil, 2, remoting.Success, "", 2},
		{"commit from a check-back", func(h *remoting.EndTransactionHeader) { h.FromTransactionCheck = true }, 1, remoting.Success, "", 1},
		{"another group", func(h *remoting.EndTransactionHeader) { h.ProducerGroup = "other" }, 1, remoting.SystemError, remoting.RemarkWrongGroup, 0},
		{"another half-queue offset", func(h *remoting.EndTransactionHeader) { h.TranStateTableOffset++ }, 1, remoting.SystemError, remoting.RemarkWrongQueueOffset, 0},
		{"nothing at the commit-log offset", func(h *remoting.EndTransactionHeader) { h.CommitLogOffset++ }, 1, remoting.SystemError, remoting.RemarkHalfNotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, "broker-a", Options{})
			b.CreateTopic("T", 4)
			c := newClient(t)
			uniq := remoting.NewUniqID()
			send := sendWithProps("T", 2, []byte("x"), map[string]string{"TRAN_MSG": "true", "PGROUP": "g", "UNIQ_KEY": uniq},
				func(h *remoting.SendHeader) { h.SysFlag = remoting.TransactionPrepared })
			sent, err := remoting.ParseSendResponse(invoke(t, c, b.Addr(), send))
			if err != nil {
				t.Fatal(err)
			}
			_, clo, err := remoting.ParseOffsetMsgID(sent.MsgID)
			if err != nil {
				t.Fatal(err)
			}
			h := &remoting.EndTransactionHeader{Topic: "T", ProducerGroup: "g", TranStateTableOffset: sent.QueueOffset, CommitLogOffset: clo,
				CommitOrRollback: remoting.TransactionCommit, MsgID: uniq, TransactionID: sent.TransactionID}
			if tc.edit != nil {
				tc.edit(h)
			}
			for range tc.ends {
				resp := invoke(t, c, b.Addr(), remoting.NewEndTransactionRequest(h))
				if resp.Code != tc.code || resp.Remark != tc.remark {
					t.Fatalf("answered %d %q, want %d %q", resp.Code, resp.Remark, tc.code, tc.remark)
				}
			}
			if got := maxOffset(t, c, b, "T", 2); got != tc.visible {
				t.Fatalf("%d messages visible in the queue sent to, want %d", got, tc.visible)
			}
			for _, m := range b.Messages("T", 2) {
				if m.UniqKey != uniq || m.Properties["TRAN_MSG"] != "" || m.Properties["REAL_TOPIC"] != "" || m.SysFlag != remoting.TransactionCommit {
					t.Fatalf("committed message %+v", m)
				}
			}
		})
	}
}

// TestEndTransactionOfUnknownStateIsNotAnswered proves an end that is neither a commit nor a
// rollback gets no answer, as from a Java broker, and changes nothing.
func TestEndTransactionOfUnknownStateIsNotAnswered(t *testing.T) {
	b := startBroker(t, "broker-a", Options{})
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req := remoting.NewEndTransactionRequest(&remoting.EndTransactionHeader{ProducerGroup: "g", MsgID: "m", CommitOrRollback: remoting.TransactionNotType})
	if resp, err := c.Invoke(ctx, b.Addr(), req); err == nil {
		t.Fatalf("answered %v", resp)
	}
	if got := b.Stats().MessagesStored; got != 0 {
		t.Fatalf("%d messages stored", got)
	}
}
