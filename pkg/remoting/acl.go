package remoting

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"sync"
)

// Ext fields of RocketMQ's ACL signature (SessionCredentials' names).
const (
	// FieldAccessKey names the user a request is sent as.
	FieldAccessKey = "AccessKey"
	// FieldSecurityToken carries the optional security token.
	FieldSecurityToken = "SecurityToken"
	// FieldSignature carries the request's HMAC-SHA1 signature.
	FieldSignature = "Signature"
)

// Credentials are a RocketMQ user's ACL 2.0 credentials: the user name (access key), its password
// (secret key) and an optional security token.
type Credentials struct {
	AccessKey     string
	SecretKey     string
	SecurityToken string
}

// Check says what is wrong with the credentials, if anything: a broker refuses a request without
// an access key, and a signature made with an empty secret is one no broker accepts.
func (c Credentials) Check() error {
	switch {
	case c.AccessKey == "":
		return errors.New("credentials: access key is empty")
	case c.SecretKey == "":
		return errors.New("credentials: secret key is empty")
	case strings.ContainsAny(c.AccessKey, "\x00\r\n"):
		return errors.New("credentials: access key holds a control character")
	}
	return nil
}

// CredentialLookup returns the credentials to sign a request to addr with; ok is false when
// requests to addr go unsigned. It runs on every request's sending goroutine and must be fast.
type CredentialLookup func(addr string) (c *Credentials, ok bool)

// SetCredentials makes the client sign every request to an address the lookup has credentials
// for (nil turns signing off). Brokers of one client may belong to clusters with different
// users, so credentials are chosen per address on every request.
func (c *Client) SetCredentials(lookup CredentialLookup) {
	if lookup == nil {
		c.creds.Store(nil)
		return
	}
	c.creds.Store(&lookup)
}

// signFor returns req signed with the credentials for addr, or req itself when there are none.
func (c *Client) signFor(addr string, req *Command) *Command {
	lookup := c.creds.Load()
	if lookup == nil {
		return req
	}
	cr, ok := (*lookup)(addr)
	if !ok || cr == nil {
		return req
	}
	return cr.Sign(req)
}

// signBufPool holds the buffers a signature's content is gathered in.
var signBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Sign returns a copy of req signed as RocketMQ's AclClientRPCHook signs: ext fields AccessKey
// (and SecurityToken, when set) are added, then the values of every ext field but Signature,
// in the byte order of their names, followed by the body exactly as it will be sent, are
// HMAC-SHA1'd with the secret key, and the base64 of the result is added as Signature. req is not
// modified (commands are shared between goroutines and re-sent); only its ext map is copied, the
// body is shared. The opaque, code and header serialisation are not signed, so the copy may be
// sent any number of times.
func (c *Credentials) Sign(req *Command) *Command {
	out := *req
	ext := make(map[string]string, len(req.ExtFields)+3)
	for k, v := range req.ExtFields {
		if k != FieldSignature {
			ext[k] = v
		}
	}
	ext[FieldAccessKey] = c.AccessKey
	if c.SecurityToken != "" {
		ext[FieldSecurityToken] = c.SecurityToken
	} else {
		delete(ext, FieldSecurityToken)
	}
	ext[FieldSignature] = signature(c.SecretKey, ext, req.Body)
	out.ExtFields = ext
	return &out
}

// signature is base64(HMAC-SHA1(secret, sorted ext values but Signature + body)).
func signature(secret string, ext map[string]string, body []byte) string {
	keys := make([]string, 0, len(ext))
	for k := range ext {
		if k != FieldSignature {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	bp := signBufPool.Get().(*[]byte)
	content := (*bp)[:0]
	for _, k := range keys {
		content = append(content, ext[k]...)
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(content)
	mac.Write(body)
	if cap(content) <= maxRetainedBuffer {
		*bp = content[:0]
		signBufPool.Put(bp)
	}
	var sum [sha1.Size]byte
	return base64.StdEncoding.EncodeToString(mac.Sum(sum[:0]))
}

// ACLRefusal says whether a broker's answer refused the request's credentials rather than the
// request or the broker's state.
type ACLRefusal uint8

const (
	// NotACLRefusal: the answer says nothing about credentials.
	NotACLRefusal ACLRefusal = iota
	// AuthenticationRefused: the broker did not accept who the request says it is from (no
	// AccessKey, unknown or disabled user, wrong signature).
	AuthenticationRefused
	// AuthorizationRefused: the user is known, but may not do this to this resource.
	AuthorizationRefused
)

// String names the refusal as conditions and metrics do.
func (k ACLRefusal) String() string {
	switch k {
	case AuthenticationRefused:
		return "AuthenticationFailed"
	case AuthorizationRefused:
		return "Forbidden"
	}
	return "None"
}

// ClassifyACLRefusal tells a refusal of credentials from other answers. RocketMQ answers both
// with NO_PERMISSION (16), but also uses that code for a broker whose write permission is wiped
// ("the broker[...] sending message is forbidden") or a topic no one may send to: those are the
// broker's state or the message's, and only the remarks of RocketMQ's authentication and
// authorization handlers name the credentials.
func ClassifyACLRefusal(code int16, remark string) ACLRefusal {
	if code != NoPermission {
		return NotACLRefusal
	}
	switch {
	case remark == "username cannot be null.", remark == "check signature failed.",
		strings.HasPrefix(remark, "User:") && (strings.HasSuffix(remark, " is not found.") || strings.HasSuffix(remark, " is disabled.")):
		return AuthenticationRefused
	case strings.Contains(remark, " has no permission to access "):
		return AuthorizationRefused
	}
	return NotACLRefusal
}

// VerifySignature reports whether req carries the Signature secret makes of its other ext fields
// and body, as a broker checks it; for servers (brokersim) that authenticate as RocketMQ does.
func VerifySignature(req *Command, secret string) bool {
	got, ok := req.ExtFields[FieldSignature]
	return ok && hmac.Equal([]byte(got), []byte(signature(secret, req.ExtFields, req.Body)))
}
