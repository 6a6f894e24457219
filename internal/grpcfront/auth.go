package grpcfront

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/detourmq/detour/pkg/rmqpb"
)

// How RocketMQ 5's SDKs sign a call (the Java client's rpc.Signature, checked by the Proxy's
// DefaultAuthenticationContextBuilder and DefaultAuthenticationHandler): metadata
// x-mq-date-time holds the time of the call as yyyyMMdd'T'HHmmss'Z', and metadata authorization
// holds
//
//	MQv2-HMAC-SHA1 Credential=<accessKey>,SignedHeaders=x-mq-date-time,Signature=<hex>
//
// where <hex> is HMAC-SHA1 keyed with the secret over the x-mq-date-time value, in hex (the
// Java client writes upper case; the Proxy decodes either case). Nothing else is signed, so a
// signature proves the client knows the secret, not what it asks: only TLS keeps a signed header
// from being read and replayed.
//
// There is no window on the date-time: the Proxy checks none, and the Java client formats the
// time in its JVM's time zone despite the literal Z, so a window would refuse correctly signed
// clients that run outside UTC.
const (
	authorizationHeader = "authorization"
	dateTimeHeader      = "x-mq-date-time"
	signatureAlgorithm  = "MQv2-HMAC-SHA1"
	credentialItem      = "Credential"
	signedHeadersItem   = "SignedHeaders"
	signatureItem       = "Signature"
)

// Bounds of the signed headers, far above what the SDKs send (an authorization of about 100
// bytes, a date-time of 16). gRPC already bounds a call's metadata; these keep a large header
// from being split and decoded.
const (
	maxAuthorizationLen = 1024
	maxDateTimeLen      = 64
)

// AllTopics in AccessKey.Topics lets a key send to every topic.
const AllTopics = "*"

// AccessKey is a key clients sign their calls with, and what it may do.
type AccessKey struct {
	// Secret is the key's secret, the HMAC key of its signatures.
	Secret string
	// Topics are the RocketMQ topics (by name, whatever resource namespace the client sends) the
	// key may send to and query routes of; AllTopics means every topic.
	Topics []string
}

// MaySendTo reports whether the key may send to topic.
func (k *AccessKey) MaySendTo(topic string) bool {
	return slices.Contains(k.Topics, AllTopics) || slices.Contains(k.Topics, topic)
}

// AccessKeys looks up the access keys that sign clients' calls.
type AccessKeys interface {
	// LookupAccessKey returns the key named id, ok false when there is none. An error means the
	// keys could not be read; the call is then refused as the endpoint's failure.
	LookupAccessKey(ctx context.Context, id string) (key AccessKey, ok bool, err error)
}

// StaticAccessKeys are access keys by their names.
type StaticAccessKeys map[string]AccessKey

// LookupAccessKey implements AccessKeys.
func (s StaticAccessKeys) LookupAccessKey(_ context.Context, id string) (AccessKey, bool, error) {
	k, ok := s[id]
	return k, ok, nil
}

// signedCall is what a call's authorization header says.
type signedCall struct {
	accessKey string
	signature []byte
}

// parseAuthorization reads an authorization header as the Proxy does: the algorithm, a space,
// then comma-separated Name=value items, each trimmed; the Credential's access key is what
// precedes its first "/", and items the Proxy ignores are ignored. It is stricter in three
// places, as what it cannot verify it refuses: the algorithm must be HMAC-SHA1, SignedHeaders
// (when given) must name the date-time only, and an item may not repeat.
func parseAuthorization(v string) (signedCall, error) {
	if len(v) > maxAuthorizationLen {
		return signedCall{}, fmt.Errorf("the %s header is %d bytes, over the limit of %d", authorizationHeader, len(v), maxAuthorizationLen)
	}
	alg, items, ok := strings.Cut(v, " ")
	if !ok {
		return signedCall{}, fmt.Errorf("the %s header is not %q followed by its items", authorizationHeader, signatureAlgorithm)
	}
	if alg != signatureAlgorithm {
		return signedCall{}, fmt.Errorf("the %s header's algorithm is not %s, the one this endpoint verifies", authorizationHeader, signatureAlgorithm)
	}
	var out signedCall
	seen := map[string]bool{}
	for i, item := range strings.Split(items, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return signedCall{}, fmt.Errorf("item %d of the %s header is not Name=value", i, authorizationHeader)
		}
		if seen[name] {
			return signedCall{}, fmt.Errorf("the %s header gives %s twice", authorizationHeader, name)
		}
		seen[name] = true
		switch name {
		case credentialItem:
			//docgen:not-identity a signature's Credential=AccessKey/date/region/service
			out.accessKey, _, _ = strings.Cut(value, "/")
		case signedHeadersItem:
			if !strings.EqualFold(value, dateTimeHeader) {
				return signedCall{}, fmt.Errorf("the %s header signs %s; this endpoint verifies signatures of %s only", authorizationHeader, signedHeadersItem, dateTimeHeader)
			}
		case signatureItem:
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha1.Size {
				return signedCall{}, fmt.Errorf("the %s header's Signature is not %d hex digits", authorizationHeader, 2*sha1.Size)
			}
			out.signature = sig
		}
	}
	if out.accessKey == "" {
		return signedCall{}, fmt.Errorf("the %s header names no access key (Credential)", authorizationHeader)
	}
	if out.signature == nil {
		return signedCall{}, fmt.Errorf("the %s header has no Signature", authorizationHeader)
	}
	return out, nil
}

// signature is the signature of dateTime with secret.
func signature(secret, dateTime string) []byte {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(dateTime))
	return mac.Sum(nil)
}

// errNotOneValue is the reason a header that must be given once is refused.
var errNotOneValue = errors.New("is given more than once")

// oneHeader is the only value of header, "" when absent.
func oneHeader(md metadata.MD, header string) (string, error) {
	vs := md.Get(header)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("the %s header %w", header, errNotOneValue)
}

// unauthorized is the UNAUTHORIZED status with a reason.
func unauthorized(format string, args ...any) *rmqpb.Status {
	return newStatus(rmqpb.Code_UNAUTHORIZED, "unauthorized: "+format, args...)
}

// caller is the access key that signed a call.
type caller struct {
	accessKey string
	key       AccessKey
}

// authenticate is the access key that signed the call, nil with nil when the endpoint checks no
// credentials, or the status refusing the call: UNAUTHORIZED saying what is wrong (never the
// secret), INTERNAL_SERVER_ERROR when the keys cannot be read.
func (s *Server) authenticate(ctx context.Context) (*caller, *rmqpb.Status) {
	if s.opts.Credentials == nil {
		return nil, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	auth, err := oneHeader(md, authorizationHeader)
	if err != nil {
		return nil, unauthorized("%v", err)
	}
	if auth == "" {
		return nil, unauthorized("missing %s header: this endpoint serves calls signed with an access key only", authorizationHeader)
	}
	call, err := parseAuthorization(auth)
	if err != nil {
		return nil, unauthorized("%v", err)
	}
	dateTime, err := oneHeader(md, dateTimeHeader)
	if err != nil {
		return nil, unauthorized("%v", err)
	}
	if dateTime == "" {
		return nil, unauthorized("missing %s header, the value a call's signature covers", dateTimeHeader)
	}
	if len(dateTime) > maxDateTimeLen {
		return nil, unauthorized("the %s header is %d bytes, over the limit of %d", dateTimeHeader, len(dateTime), maxDateTimeLen)
	}
	key, ok, err := s.opts.Credentials.LookupAccessKey(ctx, call.accessKey)
	if err != nil {
		s.log.Error(err, "Looking up a RocketMQ client's access key failed", "accessKey", call.accessKey)
		return nil, newStatus(rmqpb.Code_INTERNAL_SERVER_ERROR, "checking access key %q failed: the endpoint cannot read its access keys", call.accessKey)
	}
	if !ok {
		return nil, unauthorized("access key %q is not known here", call.accessKey)
	}
	// hmac.Equal takes the same time wherever the signatures differ.
	if !hmac.Equal(signature(key.Secret, dateTime), call.signature) {
		return nil, unauthorized("the signature does not match access key %q: signed with another secret, or over another %s", call.accessKey, dateTimeHeader)
	}
	return &caller{accessKey: call.accessKey, key: key}, nil
}

// authorizeSend is nil when the caller (nil: no credentials checked) may send to topic, else the
// FORBIDDEN status naming the topic.
func (c *caller) authorizeSend(topic *rmqpb.Resource) *rmqpb.Status {
	// A request naming no topic is resolve's to refuse (ILLEGAL_TOPIC).
	if c == nil || topic.GetName() == "" || c.key.MaySendTo(topic.GetName()) {
		return nil
	}
	return newStatus(rmqpb.Code_FORBIDDEN, "forbidden: access key %q may not send to topic %s", c.accessKey, topic.GetName())
}

// admit checks a call before it is served, in the Proxy's order: its signature, then that it
// names its client. It returns the key that signed it (nil when no credentials are checked).
func (s *Server) admit(ctx context.Context) (*caller, *rmqpb.Status) {
	who, st := s.authenticate(ctx)
	if st != nil {
		return nil, st
	}
	if st := requireClientID(ctx); st != nil {
		return nil, st
	}
	return who, nil
}
