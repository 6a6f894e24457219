package grpcfront

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A transaction id detour answers carries everything an EndTransaction needs to reach the half
// message, so the endpoint keeps nothing per transaction (the Proxy keeps a table in memory,
// lost on restart, and answers its clients the broker's transaction id alone). The id is
// txIDPrefix followed by the unpadded URL-safe base64 of four lines: the runtime's name of the
// broker that stored the half message, its commit-log offset, its offset in the half topic's
// queue (the broker's tranStateTableOffset) and the broker's own transaction id. A client can
// forge one, and gains nothing by it: the broker ends only a half message of the topic's group
// stored at both offsets, and the broker must be one of the topic's route.
const (
	txIDPrefix = "DTX1."
	// maxTransactionIDLength bounds the id a client may send back; detour's own ids are far
	// shorter.
	maxTransactionIDLength = 1024
	maxTxBrokerNameLength  = 255
	maxTxRocketMQIDLength  = 128
)

// txRef names one half message on one broker.
type txRef struct {
	Broker               string
	CommitLogOffset      int64
	TranStateTableOffset int64
	TransactionID        string
}

// errMalformedTransactionID is wrapped by every decoding failure.
var errMalformedTransactionID = errors.New("malformed transaction id")

// encodeTransactionID renders ref as the id answered to the client.
func encodeTransactionID(ref txRef) (string, error) {
	if err := ref.check(); err != nil {
		return "", err
	}
	raw := strings.Join([]string{ref.Broker, strconv.FormatInt(ref.CommitLogOffset, 10),
		strconv.FormatInt(ref.TranStateTableOffset, 10), ref.TransactionID}, "\n")
	return txIDPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw)), nil
}

// decodeTransactionID reads an id encodeTransactionID made, refusing anything else: another
// prefix, bad base64, a field missing or extra, offsets that are not canonical non-negative
// numbers, names out of bounds.
func decodeTransactionID(id string) (txRef, error) {
	bad := func(format string, args ...any) (txRef, error) {
		return txRef{}, fmt.Errorf("%w: %s", errMalformedTransactionID, fmt.Sprintf(format, args...))
	}
	if len(id) > maxTransactionIDLength {
		return bad("%d characters, over the limit of %d", len(id), maxTransactionIDLength)
	}
	payload, ok := strings.CutPrefix(id, txIDPrefix)
	if !ok {
		return bad("it does not start with %q, as the ids detour answers do", txIDPrefix)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil {
		return bad("its payload is not unpadded URL-safe base64")
	}
	fields := strings.Split(string(raw), "\n")
	if len(fields) != 4 {
		return bad("it holds %d fields, not 4", len(fields))
	}
	ref := txRef{Broker: fields[0], TransactionID: fields[3]}
	if ref.CommitLogOffset, err = canonicalOffset(fields[1]); err != nil {
		return bad("commit-log offset: %v", err)
	}
	if ref.TranStateTableOffset, err = canonicalOffset(fields[2]); err != nil {
		return bad("half-queue offset: %v", err)
	}
	if err := ref.check(); err != nil {
		return txRef{}, err
	}
	return ref, nil
}

// canonicalOffset parses a non-negative decimal offset written as strconv writes it.
func canonicalOffset(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("%q is not a non-negative number", s)
	}
	return n, nil
}

// check reports the first field of ref out of bounds.
func (ref txRef) check() error {
	if err := checkTxName("broker name", ref.Broker, maxTxBrokerNameLength); err != nil {
		return err
	}
	if ref.CommitLogOffset < 0 || ref.TranStateTableOffset < 0 {
		return fmt.Errorf("%w: negative offset", errMalformedTransactionID)
	}
	return checkTxName("RocketMQ transaction id", ref.TransactionID, maxTxRocketMQIDLength)
}

// checkTxName refuses an empty, overlong, non-UTF-8 or control-character name.
func checkTxName(what, v string, limit int) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: no %s", errMalformedTransactionID, what)
	case len(v) > limit:
		return fmt.Errorf("%w: %s of %d bytes, over the limit of %d", errMalformedTransactionID, what, len(v), limit)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not UTF-8", errMalformedTransactionID, what)
	case strings.ContainsFunc(v, unicode.IsControl):
		return fmt.Errorf("%w: %s holds a control character", errMalformedTransactionID, what)
	}
	return nil
}
