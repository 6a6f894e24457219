package rmqtest

import (
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
