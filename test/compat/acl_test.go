package compat_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/detourmq/detour/internal/testsupport/rmqtest"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/remoting"
)

// aclRuntime routes topic over every broker of c under the Detour preset with probes watching
// every routed broker, signing as creds, after creating the topic on each broker signed as the
// super user.
func aclRuntime(t *testing.T, c *rmqtest.Cluster, topic string, creds *remoting.Credentials) *producer.Runtime {
	t.Helper()
	r := producer.New(producer.Options{ProducerGroup: "detour_acl", HeartbeatInterval: 300 * time.Millisecond})
	t.Cleanup(func() { _ = r.Close() })
	if err := r.SetCredentials("", creds); err != nil {
		t.Fatal(err)
	}
	pol := producer.DefaultPolicy("acl")
	pol.Probe.Routed, pol.Probe.Interval = true, 300*time.Millisecond
	// Room for a loaded machine's first writes: this proves what is accepted, not how fast.
	pol.Retry.SendTimeout, pol.Retry.PerAttemptTimeout = 30*time.Second, 0
	if err := r.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	route := producer.Route{Topic: topic, Policy: pol.Name}
	for _, b := range c.Brokers() {
		r.SetBroker(producer.Broker{Name: b.Name, Addr: b.Addr, Ready: true})
		route.Brokers = append(route.Brokers, producer.BrokerQueues{Broker: b.Name, WriteQueues: 4})
	}
	if err := r.SetRoute(route); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestACLSignedRequestsAreAcceptedByRealRocketMQ proves the signer against RocketMQ 5.5.0 brokers
// with authentication and authorization on: topic creation, single, batch, ordered and timed
// sends, heartbeats, probes and the pressure and config polls, all signed, are accepted (no
// refusal is kept, and both brokers' runtime figures and limits were read); a runtime with a
// wrong secret is refused with code 16 "check signature failed." on every kind of request and
// isolates nothing.
func TestACLSignedRequestsAreAcceptedByRealRocketMQ(t *testing.T) {
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{Auth: true}, rmqtest.BrokerConfig{Auth: true})
	const topic = "AclTopic"
	good := aclRuntime(t, c, topic, &rmqtest.SuperUser)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, b := range c.Brokers() {
		if err := good.CreateTopic(ctx, b.Addr, topic, 4, 4, 6); err != nil {
			t.Fatalf("signed topic creation on %s: %v", b.Name, err)
		}
	}
	msg := func(i int) *producer.Message {
		return &producer.Message{Topic: topic, Body: fmt.Appendf(nil, "acl-%d", i)}
	}
	for i := range 8 {
		if _, err := good.Send(ctx, msg(i)); err != nil {
			t.Fatalf("signed send %d: %v", i, err)
		}
	}
	if _, err := good.SendBatch(ctx, []*producer.Message{msg(100), msg(101), msg(102)}); err != nil {
		t.Fatalf("signed batch: %v", err)
	}
	if _, err := good.SendOrdered(ctx, msg(200), "order-1"); err != nil {
		t.Fatalf("signed ordered send: %v", err)
	}
	if _, err := good.SendTimed(ctx, msg(300), time.Now().Add(5*time.Second)); err != nil {
		t.Fatalf("signed timed send: %v", err)
	}
	waitFor(t, 90*time.Second, "both brokers' runtime figures and limits read, signed", func() bool {
		figs := good.Pressure("acl")
		return len(figs) == 2 && figs[0].Limits.SendQueueWaitMillis > 0 && figs[1].Limits.SendQueueWaitMillis > 0
	})
	if got := good.CredentialRefusals(); len(got) != 0 {
		t.Fatalf("signed requests refused: %+v", got)
	}

	// The same requests, signed by hand on a client of its own, one per request code.
	wrong := remoting.Credentials{AccessKey: rmqtest.SuperUser.AccessKey, SecretKey: "wrong-secret"}
	raw := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { _ = raw.Close() })
	reqs := []*remoting.Command{
		remoting.NewGetMaxOffsetRequest(topic, 0), remoting.NewGetBrokerRuntimeInfoRequest(),
		remoting.NewGetBrokerConfigRequest(), remoting.NewHeartbeatRequest("detour-acl-test", "detour_acl"),
	}
	for _, req := range reqs {
		for _, tc := range []struct {
			creds  remoting.Credentials
			code   int16
			remark string
		}{{rmqtest.SuperUser, remoting.Success, ""}, {wrong, remoting.NoPermission, "check signature failed."}} {
			resp, err := raw.Invoke(ctx, c.Brokers()[0].Addr, tc.creds.Sign(req))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Code != tc.code || (tc.remark != "" && resp.Remark != tc.remark) {
				t.Errorf("%s signed with secret %q: %d %q, want %d %q", remoting.RequestCodeName(req.Code), tc.creds.SecretKey,
					resp.Code, resp.Remark, tc.code, tc.remark)
			}
		}
	}

	canary := aclRuntime(t, c, topic, &wrong)
	_, err := canary.Send(ctx, msg(400))
	be, kind, ok := producer.CredentialRefusalOf(err)
	var se *producer.SendError
	if !ok || kind != remoting.AuthenticationRefused || be.Code != remoting.NoPermission || be.Remark != "check signature failed." ||
		!errors.As(err, &se) || se.Attempts != 1 {
		t.Fatalf("send with a wrong secret: %v; want one attempt refused with 16 \"check signature failed.\"", err)
	}
	waitFor(t, 90*time.Second, "the canary's probes refused too", func() bool {
		for _, rf := range canary.CredentialRefusals() {
			if rf.Request == "GET_MAX_OFFSET" {
				return true
			}
		}
		return false
	})
	if held := canary.Isolated("acl"); len(held) != 0 {
		t.Errorf("refusals of the canary's credentials isolated %+v", held)
	}
	if _, err := good.Send(ctx, msg(500)); err != nil {
		t.Errorf("signed send after the canary: %v", err)
	}
}

// TestACLNonSuperUserNeedsItsPermissions proves, against RocketMQ 5.5.0 with authorization on,
// that a normal user with PUB and GET on the topic (and CREATE) creates it, sends and probes, and
// one with GET alone is refused the send as Forbidden, which isolates nothing.
func TestACLNonSuperUserNeedsItsPermissions(t *testing.T) {
	c := rmqtest.Start(t, rmqtest.V5, rmqtest.BrokerConfig{Auth: true}, rmqtest.BrokerConfig{Auth: true})
	const topic = "AclAppTopic"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, b := range c.Brokers() {
		for _, u := range []struct {
			name    string
			actions []string
		}{{"app", []string{"Pub", "Get", "Create"}}, {"reader", []string{"Get"}}} {
			if err := b.CreateUser(ctx, u.name, u.name+"-pass"); err != nil {
				t.Fatalf("create user %s on %s: %v", u.name, b.Name, err)
			}
			if err := b.Allow(ctx, u.name, "Topic:"+topic, u.actions...); err != nil {
				t.Fatalf("allow %s on %s: %v", u.name, b.Name, err)
			}
		}
	}
	app := aclRuntime(t, c, topic, &remoting.Credentials{AccessKey: "app", SecretKey: "app-pass"})
	for _, b := range c.Brokers() {
		if err := app.CreateTopic(ctx, b.Addr, topic, 4, 4, 6); err != nil {
			t.Fatalf("topic creation by a user with CREATE on %s: %v", b.Name, err)
		}
	}
	for i := range 4 {
		if _, err := app.Send(ctx, &producer.Message{Topic: topic, Body: fmt.Appendf(nil, "app-%d", i)}); err != nil {
			t.Fatalf("send %d by a user with PUB: %v", i, err)
		}
	}
	reader := aclRuntime(t, c, topic, &remoting.Credentials{AccessKey: "reader", SecretKey: "reader-pass"})
	_, err := reader.Send(ctx, &producer.Message{Topic: topic, Body: []byte("no pub")})
	if be, kind, ok := producer.CredentialRefusalOf(err); !ok || kind != remoting.AuthorizationRefused || be.Code != remoting.NoPermission {
		t.Fatalf("send by a user without PUB: %v; want a Forbidden refusal (16)", err)
	}
	if held := reader.Isolated("acl"); len(held) != 0 {
		t.Errorf("a Forbidden send isolated %+v", held)
	}
	if got := app.CredentialRefusals(); len(got) != 0 {
		t.Errorf("the permitted user's requests were refused: %+v", got)
	}
}
