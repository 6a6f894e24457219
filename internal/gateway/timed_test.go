package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourmq/detour/pkg/brokersim"
)

// TestTimedMessagesAreHeldUntilTheTimeAsked proves both request forms send a message for later:
// the broker (a 5.x one) holds it as a timer message due no earlier than asked.
func TestTimedMessagesAreHeldUntilTheTimeAsked(t *testing.T) {
	bed := newTestBed(t, nil)
	text := "later"
	at := time.Now().Add(time.Minute + 250*time.Millisecond)
	for _, req := range []*http.Request{
		post(ordersPath, "application/json", jsonBody(t, JSONMessage{BodyText: &text, DeliverAtMillis: at.UnixMilli()}), nil),
		post(ordersPath, "text/plain", []byte(text), map[string]string{HeaderDeliverAt: strconv.FormatInt(at.UnixMilli(), 10)}),
		post(ordersPath, "text/plain", []byte(text), map[string]string{HeaderDelay: "61000"}),
	} {
		res, out := bed.do(t, req)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("answer %d %s", res.StatusCode, out)
		}
	}
	held := bed.good.Messages(brokersim.TimerTopic, 0)
	if len(held) != 3 {
		t.Fatalf("%d timer messages held, want 3", len(held))
	}
	for _, m := range held {
		due, err := strconv.ParseInt(m.Properties["TIMER_OUT_MS"], 10, 64)
		if err != nil || due < at.UnixMilli() || string(m.Body) != text {
			t.Fatalf("held %q due %s, asked for %d", m.Body, m.Properties["TIMER_OUT_MS"], at.UnixMilli())
		}
	}
	if n := len(bed.good.Messages("Orders", 0)) + len(bed.good.Messages("Orders", 1)); n != 0 {
		t.Fatalf("%d messages delivered at once", n)
	}
}

// TestDeliveryTimesThatCannotBeKeptAreRefused proves every malformed or impossible delivery time
// is answered 400 with its reason and nothing is sent.
func TestDeliveryTimesThatCannotBeKeptAreRefused(t *testing.T) {
	bed := newTestBed(t, nil)
	later := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	for _, tc := range []struct {
		name  string
		req   *http.Request
		reply string
	}{
		{"both", post(ordersPath, "text/plain", []byte("m"), map[string]string{HeaderDeliverAt: later, HeaderDelay: "5"}), "not both"},
		{"negative", post(ordersPath, "application/json", []byte(`{"bodyText":"m","delayMillis":-5}`), nil), "cannot be negative"},
		{"not a number", post(ordersPath, "text/plain", []byte("m"), map[string]string{HeaderDelay: "5s"}), "not a whole number of milliseconds"},
		{"with a group", post(ordersPath, "text/plain", []byte("m"), map[string]string{HeaderDelay: "5000", HeaderMessageGroup: "g"}), "a group or a delivery time"},
		{"beyond three days", post(ordersPath, "text/plain", []byte("m"), map[string]string{HeaderDelay: strconv.FormatInt((73 * time.Hour).Milliseconds(), 10)}), "at most 72h0m0s ahead"},
		{"in a batch", post(ordersBatchPath, "application/json", []byte(`{"messages":[{"bodyText":"m","delayMillis":5000}]}`), nil), "a batch carries no delivery time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, out := bed.do(t, tc.req)
			var er ErrorResponse
			if err := json.Unmarshal(out, &er); err != nil || res.StatusCode != http.StatusBadRequest || er.Code != CodeInvalidMessage || !strings.Contains(er.Error, tc.reply) {
				t.Fatalf("answer %d %s, want 400 saying %q", res.StatusCode, out, tc.reply)
			}
		})
	}
	if n := bed.good.Stats().SendsReceived; n != 0 {
		t.Fatalf("%d sends reached the broker", n)
	}
}
