package rmqtest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/detourmq/detour/pkg/remoting"
)

// SuperUser is the user a broker started with BrokerConfig.Auth knows: its initial (super) user,
// whose requests every check passes.
var SuperUser = remoting.Credentials{AccessKey: "rocketmq", SecretKey: "12345678"}

// authSettings are the broker.conf entries of RocketMQ 5's quick start for ACL 2.0: the default
// providers with local (per broker) users and ACLs, SuperUser as the initial user, and the same
// user for the broker's own requests.
func authSettings() map[string]string {
	return map[string]string{
		"authenticationEnabled":          "true",
		"authenticationProvider":         "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
		"authenticationMetadataProvider": "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
		"authorizationEnabled":           "true",
		"authorizationProvider":          "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
		"authorizationMetadataProvider":  "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
		"initAuthenticationUser":         fmt.Sprintf(`{"username":"%s","password":"%s"}`, SuperUser.AccessKey, SuperUser.SecretKey),
		"innerClientAuthenticationCredentials": fmt.Sprintf(`{"accessKey":"%s","secretKey":"%s"}`,
			SuperUser.AccessKey, SuperUser.SecretKey),
	}
}

// Request codes of RocketMQ 5's user and ACL administration (RequestCode.AUTH_CREATE_USER and
// AUTH_CREATE_ACL), what `mqadmin createUser` and `mqadmin createAcl` send to each broker.
const (
	codeAuthCreateUser int16 = 3001
	codeAuthCreateACL  int16 = 3006
)

// CreateUser creates a normal (not super) user on the broker, signed as SuperUser; users are kept
// per broker, so a user every broker must know is created on each.
func (b *Broker) CreateUser(ctx context.Context, user, password string) error {
	body, err := json.Marshal(map[string]string{"username": user, "password": password, "userType": "Normal"})
	if err != nil {
		return err
	}
	_, err = b.c.invoke(ctx, b.Addr, codeAuthCreateUser, map[string]string{"username": user}, body)
	return err
}

// Allow lets user do actions (RocketMQ's names: Pub, Sub, Create, Get, ...) on resource (for
// example "Topic:orders") from any address, on the broker.
func (b *Broker) Allow(ctx context.Context, user, resource string, actions ...string) error {
	subject := "User:" + user
	body, err := json.Marshal(map[string]any{"subject": subject, "policies": []map[string]any{{
		"policyType": "Custom",
		"entries":    []map[string]any{{"resource": resource, "actions": actions, "decision": "Allow"}},
	}}})
	if err != nil {
		return err
	}
	_, err = b.c.invoke(ctx, b.Addr, codeAuthCreateACL, map[string]string{"subject": subject}, body)
	return err
}
