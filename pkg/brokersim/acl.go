package brokersim

import (
	"fmt"
	"slices"

	"github.com/detourmq/detour/pkg/remoting"
)

// ACL turns on authentication and authorization as a RocketMQ 5.x broker with ACL 2.0 does:
// every request must carry the AccessKey of a known user and a Signature made with its secret,
// or it is answered NO_PERMISSION (16) with the remark RocketMQ's authentication handler gives;
// a send to a topic the user may not publish to is answered NO_PERMISSION with the
// authorization handler's remark.
type ACL struct {
	// Users are the known users' secrets by access key.
	Users map[string]string
	// NoPub lists, by access key, the topics the user may not send to.
	NoPub map[string][]string
}

// SetACL puts a in force for every later request; nil turns authentication off.
func (b *Broker) SetACL(a *ACL) {
	if a != nil {
		c := &ACL{Users: make(map[string]string, len(a.Users)), NoPub: make(map[string][]string, len(a.NoPub))}
		for k, v := range a.Users {
			c.Users[k] = v
		}
		for k, v := range a.NoPub {
			c.NoPub[k] = slices.Clone(v)
		}
		a = c
	}
	b.acl.Store(a)
}

// refuseCredentials returns the answer to a request the ACL refuses, or nil.
func (b *Broker) refuseCredentials(req *remoting.Command, sendTopic string) *remoting.Command {
	a := b.acl.Load()
	if a == nil {
		return nil
	}
	user, ok := req.ExtFields[remoting.FieldAccessKey]
	if !ok || user == "" {
		return remoting.NewResponse(req, remoting.NoPermission, "username cannot be null.")
	}
	secret, known := a.Users[user]
	if !known {
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf("User:%s is not found.", user))
	}
	if !remoting.VerifySignature(req, secret) {
		return remoting.NewResponse(req, remoting.NoPermission, "check signature failed.")
	}
	if sendTopic != "" && slices.Contains(a.NoPub[user], sendTopic) {
		return remoting.NewResponse(req, remoting.NoPermission, fmt.Sprintf(
			"User:%s has no permission to access Topic:%s from 127.0.0.1, no matched policies.", user, sendTopic))
	}
	return nil
}
