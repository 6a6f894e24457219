package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/detourmq/detour/pkg/remoting"
)

// TestMessagesOfAGroupGoToOneQueueInOrder proves both request forms send a message group's
// messages to one queue, in the order sent, carrying the group as __SHARDINGKEY.
func TestMessagesOfAGroupGoToOneQueueInOrder(t *testing.T) {
	bed := newTestBed(t, nil)
	queueOf := map[string]int{}
	for seq := range 6 {
		for _, g := range []string{"order-1", "order-2", "order-3"} {
			text := fmt.Sprintf("%s/%d", g, seq)
			req := post(ordersPath, "application/json", jsonBody(t, JSONMessage{BodyText: &text, MessageGroup: g}), nil)
			if seq%2 == 1 {
				req = post(ordersPath, "text/plain", []byte(text), map[string]string{HeaderMessageGroup: g})
			}
			res, out := bed.do(t, req)
			var sr SendResponse
			if err := json.Unmarshal(out, &sr); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("answer %d %s", res.StatusCode, out)
			}
			if q, seen := queueOf[g]; seen && q != sr.QueueID {
				t.Fatalf("group %s went to queue %d, then %d", g, q, sr.QueueID)
			}
			queueOf[g] = sr.QueueID
		}
	}
	for g, q := range queueOf {
		seq := 0
		for _, m := range bed.good.Messages("Orders", q) {
			if m.Properties[remoting.PropertyShardingKey] != g {
				continue
			}
			if want := fmt.Sprintf("%s/%d", g, seq); string(m.Body) != want {
				t.Fatalf("group %s: message %d is %q, want %q", g, seq, m.Body, want)
			}
			seq++
		}
		if seq != 6 {
			t.Fatalf("group %s: %d of 6 messages on its queue", g, seq)
		}
	}
}

// TestAGroupWhoseBrokerFailsIsAnsweredAsNotMoved proves a failed ordered send says that its group
// stays on its broker, and that groups the gateway cannot hash are refused clearly.
func TestAGroupWhoseBrokerFailsIsAnsweredAsNotMoved(t *testing.T) {
	bed := newTestBed(t, nil)
	res, out := bed.do(t, post("/v1/namespaces/shop/topics/doomed/messages", "text/plain", []byte("m"), map[string]string{HeaderMessageGroup: "g1"}))
	var er ErrorResponse
	if err := json.Unmarshal(out, &er); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || er.Code != CodeSendFailed ||
		!strings.Contains(er.Error, `message group "g1" is bound to queue`) || !strings.Contains(er.Error, "broker-dead") {
		t.Fatalf("answer %d %s", res.StatusCode, out)
	}
	for name, req := range map[string]*http.Request{
		"blank group":    post(ordersPath, "text/plain", []byte("m"), map[string]string{HeaderMessageGroup: " "}),
		"long group":     post(ordersPath, "text/plain", []byte("m"), map[string]string{HeaderMessageGroup: strings.Repeat("g", 65)}),
		"group in batch": post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m","messageGroup":"g"}]}`), nil),
	} {
		res, out := bed.do(t, req)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), CodeInvalidMessage) {
			t.Errorf("%s: answer %d %s", name, res.StatusCode, out)
		}
	}
	if n := bed.good.Stats().SendsReceived; n != 0 {
		t.Fatalf("%d sends reached the broker", n)
	}
}
