package remoting

import (
	"fmt"
	"strconv"
)

// Transaction types of a message's sysFlag and of END_TRANSACTION's commitOrRollback
// (MessageSysFlag): a half message is sent with TransactionPrepared, and ended with
// TransactionCommit or TransactionRollback; TransactionNotType in an end says "still unknown".
const (
	TransactionNotType  int32 = 0x0
	TransactionPrepared int32 = 0x4
	TransactionCommit   int32 = 0x8
	TransactionRollback int32 = 0xC
	// TransactionTypeMask selects the transaction type bits of a sysFlag.
	TransactionTypeMask int32 = 0xC
)

// PropertyCheckImmunitySeconds is the property with which a half message asks the broker not to
// check back before that many seconds (the gRPC clients' orphaned-transaction recovery time).
const PropertyCheckImmunitySeconds = "CHECK_IMMUNITY_TIME_IN_SECONDS"

// Remarks a 5.x broker answers an END_TRANSACTION with (SYSTEM_ERROR) when it holds no half
// message the request names: nothing at its commit-log offset, or a message there of another
// producer group or at another offset in the half topic's queue.
const (
	RemarkHalfNotFound     = "Find prepared transaction message failed"
	RemarkWrongGroup       = "The producer group wrong"
	RemarkWrongQueueOffset = "The transaction state table offset wrong"
)

// EndTransactionHeader is EndTransactionRequestHeader, the custom header of END_TRANSACTION:
// which half message to end (its commit-log offset and its offset in the half topic's queue,
// tranStateTableOffset), how, and by whom.
type EndTransactionHeader struct {
	Topic                string
	ProducerGroup        string
	TranStateTableOffset int64
	CommitLogOffset      int64
	// CommitOrRollback is TransactionCommit, TransactionRollback or TransactionNotType.
	CommitOrRollback int32
	// FromTransactionCheck says the end answers the broker's CHECK_TRANSACTION_STATE.
	FromTransactionCheck bool
	// MsgID is the message's UNIQ_KEY; TransactionID the broker's transaction id of the half
	// message (the same UNIQ_KEY, as a 5.x broker answers it).
	MsgID         string
	TransactionID string
	// BrokerName is the inherited RPC header field "bname".
	BrokerName string
}

// ext renders the header as the Java broker reads it.
func (h *EndTransactionHeader) ext() map[string]string {
	m := map[string]string{
		"producerGroup":        h.ProducerGroup,
		"tranStateTableOffset": strconv.FormatInt(h.TranStateTableOffset, 10),
		"commitLogOffset":      strconv.FormatInt(h.CommitLogOffset, 10),
		"commitOrRollback":     itoa32(h.CommitOrRollback),
		"fromTransactionCheck": strconv.FormatBool(h.FromTransactionCheck),
		"msgId":                h.MsgID,
	}
	if h.Topic != "" {
		m["topic"] = h.Topic
	}
	if h.TransactionID != "" {
		m["transactionId"] = h.TransactionID
	}
	if h.BrokerName != "" {
		m["bname"] = h.BrokerName
	}
	return m
}

// NewEndTransactionRequest returns END_TRANSACTION for h. A broker answers a commit or a
// rollback, and answers nothing to TransactionNotType, so such an end is only ever sent oneway.
func NewEndTransactionRequest(h *EndTransactionHeader) *Command {
	return NewRequest(EndTransaction, h.ext(), nil)
}

// ParseEndTransactionHeader reads END_TRANSACTION's header as a broker does: the fields RocketMQ
// marks not-null must be present, numbers must parse, and commitOrRollback must be one of the
// three types. The error's text is the one the Java broker answers with.
func ParseEndTransactionHeader(req *Command) (*EndTransactionHeader, error) {
	ext := req.ExtFields
	for _, k := range []string{"producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "msgId"} {
		if _, ok := ext[k]; !ok {
			return nil, fmt.Errorf("the custom field <%s> is null", k)
		}
	}
	h := &EndTransactionHeader{
		Topic: ext["topic"], ProducerGroup: ext["producerGroup"], MsgID: ext["msgId"],
		TransactionID: ext["transactionId"], BrokerName: ext["bname"],
		FromTransactionCheck: ext["fromTransactionCheck"] == "true",
	}
	var err error
	if h.TranStateTableOffset, err = strconv.ParseInt(ext["tranStateTableOffset"], 10, 64); err != nil {
		return nil, fmt.Errorf("tranStateTableOffset %q is not a number", ext["tranStateTableOffset"])
	}
	if h.CommitLogOffset, err = strconv.ParseInt(ext["commitLogOffset"], 10, 64); err != nil {
		return nil, fmt.Errorf("commitLogOffset %q is not a number", ext["commitLogOffset"])
	}
	n, err := strconv.ParseInt(ext["commitOrRollback"], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("commitOrRollback %q is not a number", ext["commitOrRollback"])
	}
	h.CommitOrRollback = int32(n)
	switch h.CommitOrRollback {
	case TransactionNotType, TransactionCommit, TransactionRollback:
	default:
		return nil, fmt.Errorf("commitOrRollback field wrong")
	}
	return h, nil
}

// CheckTransactionStateHeader is CheckTransactionStateRequestHeader, the custom header of the
// CHECK_TRANSACTION_STATE a broker sends, oneway, to a producer of the half message's group when
// the half message has waited past its check time without an end. The offsets are those of the
// copy the broker keeps while it checks, the ones an end must name.
type CheckTransactionStateHeader struct {
	// Topic is the topic the half message is checked from (the broker's half topic).
	Topic                string
	TranStateTableOffset int64
	CommitLogOffset      int64
	// MsgID is the message's UNIQ_KEY; TransactionID the broker's transaction id (the same
	// UNIQ_KEY on a 5.x broker); OffsetMsgID the copy's offset message id.
	MsgID, TransactionID, OffsetMsgID string
	// BrokerName is the inherited RPC header field "bname": the checking broker's name.
	BrokerName string
}

// NewCheckTransactionStateRequest returns CHECK_TRANSACTION_STATE for h, oneway as a broker
// sends it, with the stored record of the half message as its body.
func NewCheckTransactionStateRequest(h *CheckTransactionStateHeader, record []byte) *Command {
	ext := map[string]string{
		"tranStateTableOffset": strconv.FormatInt(h.TranStateTableOffset, 10),
		"commitLogOffset":      strconv.FormatInt(h.CommitLogOffset, 10),
	}
	for k, v := range map[string]string{"topic": h.Topic, "msgId": h.MsgID, "transactionId": h.TransactionID,
		"offsetMsgId": h.OffsetMsgID, "bname": h.BrokerName} {
		if v != "" {
			ext[k] = v
		}
	}
	c := NewRequest(CheckTransactionState, ext, record)
	c.Flag |= FlagOneway
	return c
}

// ParseCheckTransactionStateHeader reads CHECK_TRANSACTION_STATE's header as a client does: both
// offsets are required (RocketMQ marks them not-null) and must be numbers.
func ParseCheckTransactionStateHeader(req *Command) (*CheckTransactionStateHeader, error) {
	ext := req.ExtFields
	h := &CheckTransactionStateHeader{Topic: ext["topic"], MsgID: ext["msgId"], TransactionID: ext["transactionId"],
		OffsetMsgID: ext["offsetMsgId"], BrokerName: ext["bname"]}
	for _, f := range []struct {
		name string
		to   *int64
	}{{"tranStateTableOffset", &h.TranStateTableOffset}, {"commitLogOffset", &h.CommitLogOffset}} {
		v, ok := ext[f.name]
		if !ok {
			return nil, fmt.Errorf("the custom field <%s> is null", f.name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a number", f.name, v)
		}
		*f.to = n
	}
	return h, nil
}
